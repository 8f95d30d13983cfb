"""The watcher's memory is bounded whatever the burst: past ``max_pending`` paths a batch
counts the rest instead of keeping them, and still goes out as one reindex request, even
when every path it kept is git-ignored (a build beside a source edit)."""

from __future__ import annotations

import threading

from daemon_helpers import make_git_repo
from waiting import wait_for

from llmc.config import load_config
from llmc.daemon.watcher import Watcher


def _watch(root, max_pending):
    batches: list[list[str]] = []
    lock = threading.Lock()

    def on_batch(paths: list[str]) -> None:
        with lock:
            batches.append(list(paths))

    w = Watcher(root, load_config(root), on_batch, debounce_s=0.5, max_delay_s=30.0,
                max_pending=max_pending)  # fmt: skip
    w.start()
    return w, batches


def test_a_burst_past_the_bound_is_one_batch_that_keeps_only_the_bound(tmp_path):
    root = make_git_repo(tmp_path / "repo", {"src/a.py": "x = 1\n", ".gitignore": "build/\n"})
    w, batches = _watch(root, max_pending=20)
    try:
        for i in range(150):
            (root / "src" / f"m{i}.py").write_text(f"y = {i}\n")
        wait_for(lambda: w.to_json()["paths"] >= 150 and not w.to_json()["pending_paths"],
                 60, "the burst to be handed over")  # fmt: skip
    finally:
        w.stop()
    st = w.to_json()
    assert st["batches"] == len(batches) <= 2
    assert all(len(b) <= 20 for b in batches)  # what the daemon holds: the bound
    assert st["overflow_batches"] >= 1 and st["max_pending_paths"] == 20
    assert sum(len(b) for b in batches) < st["paths"]


def test_an_overflowing_batch_of_ignored_files_is_not_dropped(tmp_path):
    root = make_git_repo(tmp_path / "repo", {"src/a.py": "x = 1\n", ".gitignore": "*.o\n"})
    w, batches = _watch(root, max_pending=10)
    try:
        for i in range(60):  # a build output, ignored by git...
            (root / "src" / f"out{i}.o").write_text("obj\n")
        (root / "src" / "a.py").write_text("x = 2\n")  # ...and the edit beside it
        wait_for(lambda: batches and not w.to_json()["pending_paths"], 60, "a batch")
    finally:
        w.stop()
    assert w.to_json()["overflow_batches"] >= 1
    assert w.to_json()["ignored_batches"] == 0  # not dropped: the reindex walks the tree


def test_below_the_bound_ignored_paths_are_still_dropped(tmp_path):
    root = make_git_repo(tmp_path / "repo", {"src/a.py": "x = 1\n", ".gitignore": "*.o\n"})
    w, batches = _watch(root, max_pending=1000)
    try:
        for i in range(5):
            (root / "src" / f"out{i}.o").write_text("obj\n")
        wait_for(lambda: w.to_json()["ignored_batches"] >= 1, 60, "the ignored batch")
    finally:
        w.stop()
    assert batches == [] and w.to_json()["paths"] == 0


def test_the_files_of_a_directory_moved_into_the_tree_join_the_batch(tmp_path):
    """A directory that arrives whole (moved in, or filled by a checkout before its watch
    is placed) sends one event for itself and none for its files: they are listed when its
    watch is placed, so the batch names them."""
    root = make_git_repo(tmp_path / "repo", {"src/a.py": "x = 1\n"})
    outside = tmp_path / "outside" / "fresh"
    (outside / "deep").mkdir(parents=True)
    for i in range(40):
        (outside / f"f{i}.py").write_text(f"v = {i}\n")
    (outside / "deep" / "g.py").write_text("w = 1\n")
    (outside / "__pycache__").mkdir()
    (outside / "__pycache__" / "f0.cpython-311.pyc").write_bytes(b"\0")
    w, batches = _watch(root, max_pending=1000)
    try:
        outside.rename(root / "fresh")
        wait_for(lambda: batches and not w.to_json()["pending_paths"], 60, "a batch")
    finally:
        w.stop()
    seen = {p for b in batches for p in b}
    assert {f"fresh/f{i}.py" for i in range(40)} | {"fresh/deep/g.py"} <= seen
    assert not any("__pycache__" in p for p in seen)  # skipped as the indexer skips it
