"""A branch switch touching thousands of files, through a running daemon's watcher: one
batch (or a few), one reindex for the lot, and an index that matches the new branch."""

from __future__ import annotations

import json
import shutil

import pytest
from daemon_helpers import child_env, git, llmc, make_git_repo, start_daemon, stop_daemon

from llmc.paths import db_path
from llmc.store.db import Store
from llmc.types import CODE, DOC

N = 1000  # files per directory: 3,000 files change between the branches


def _module(i: int, variant: str) -> str:
    return f"def {variant}_function_{i}(value):\n    return value + {i}\n"


@pytest.fixture
def two_branches(tmp_path_factory):
    """main: pkg/ and old/; feature: pkg/ rewritten, old/ gone, new/ added."""
    root = tmp_path_factory.mktemp("switch") / "repo"
    files = {f"pkg/m{i}.py": _module(i, "main") for i in range(N)}
    files.update({f"old/o{i}.py": _module(i, "old") for i in range(N)})
    files["README.md"] = "# switch\n\nA repository whose branches differ in 3,000 files.\n"
    make_git_repo(root, files)
    git(root, "checkout", "-q", "-b", "feature")
    shutil.rmtree(root / "old")
    for i in range(N):
        (root / "pkg" / f"m{i}.py").write_text(_module(i, "feature"))
    (root / "new").mkdir()
    for i in range(N):
        (root / "new" / f"n{i}.py").write_text(_module(i, "new"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "feature")
    return root


@pytest.mark.slow
def test_a_checkout_of_3000_files_is_one_batch_and_one_reindex(two_branches, tmp_path_factory):
    root = two_branches
    env = child_env(tmp_path_factory.mktemp("xdg"))
    # Both branches' texts in the embedding cache first, so the switch costs no model time
    llmc("index", str(root), "-q", "--vectors", "here", env=env, timeout=900)
    git(root, "checkout", "-q", "main")
    llmc("index", str(root), "-q", "--vectors", "here", env=env, timeout=900)
    daemon = start_daemon(root, env, "--no-tcp")
    try:
        daemon.wait_idle(timeout=300)
        before = daemon.status()
        git(root, "checkout", "-q", "feature")
        daemon.wait_idle(timeout=600, settle=2.0)  # > debounce: the last events are in
        after = daemon.status()
    finally:
        stop_daemon(root, env)

    watcher = after["watcher"]
    batches = watcher["batches"] - before["watcher"]["batches"]
    runs = after["queue"]["runs"] - before["queue"]["runs"]
    assert 1 <= batches <= 2, watcher  # git writes the tree in one burst
    assert 1 <= runs <= 2, after["queue"]
    assert watcher["pending_paths"] == 0
    # The burst came in these batches (deletions under old/, a top-level directory git
    # removes, may go unreported once its watch goes: the reindex's walk finds them)
    assert watcher["paths"] - before["watcher"]["paths"] >= 2 * N
    last = after["queue"]["last"]
    assert last["error"] is None, last
    if runs == 1:  # the whole switch in one run
        assert (last["summary"]["files_indexed"], last["summary"]["files_removed"]) == (2 * N, N)

    store = Store(db_path(root), readonly=True)
    try:
        known = store.files()
        assert not [p for p in known if p.startswith("old/")]
        assert sum(p.startswith("new/") for p in known) == N
        symbols = {s.span.symbol for s in store.spans_for_path("pkg/m7.py")}
        assert "feature_function_7" in symbols and "main_function_7" not in symbols
        assert not store.missing_vectors(CODE) and not store.missing_vectors(DOC)
        generation = store.generation
    finally:
        store.close()
    st = llmc("status", "--repo", str(root), "--json", env=env)
    status = json.loads(st.stdout)
    assert status["fresh"] and status["generation"] == generation
    assert status["searchable"]["graph"] == "yes" and status["vectors"]["complete"]
