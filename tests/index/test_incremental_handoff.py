"""A small change is searchable first and embedded after (``llmc.index.handoff``): the
command returns once BM25, exact symbols and the graph answer, one background embedder
(or the daemon) embeds the few new spans, and search meanwhile says what it covers."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from index_checks import assert_index_consistent
from repo_fixtures import SAMPLE_FILES, make_repo, user_config
from waiting import wait_for

from llmc.cli import main
from llmc.index.handoff import BACKFILL_LOCK, BACKFILL_WANT, embedder_pid
from llmc.index.live import pid_alive
from llmc.paths import db_path, state_dir
from llmc.store.db import Store

NEW_FUNCTION = '''

def reconcile_ledger_entries(ledger, statement):
    """Match each bank statement line to a ledger entry by amount and date."""
    return [(e, s) for e in ledger for s in statement if e.amount == s.amount]
'''


def _index(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _search(root: Path, query: str) -> dict:
    result = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--json", "--no-hyde", "--explain", query],
        env={"LLMC_NO_DAEMON": "1"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _status(root: Path) -> dict:
    result = CliRunner().invoke(main, ["status", "--repo", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _vectors(root: Path) -> dict:
    return _status(root)["vectors"]


def _wait_gone(pid: int) -> None:
    wait_for(lambda: not pid_alive(pid), 240, f"the background embedder (pid {pid}) to end")


@pytest.fixture
def embedded_repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    first = _index(root, "--vectors", "here")
    assert first["embedded"] == first["spans_written"] > 0
    return root


def test_an_edit_is_searchable_at_once_and_embedded_by_a_background_process(embedded_repo):
    root = embedded_repo
    with (root / "app/store.py").open("a") as f:
        f.write(NEW_FUNCTION)
    run = _index(root, "--vectors", "later")
    assert run["files_indexed"] == 1 and run["embedded"] == 0
    assert run["backfill"] == "background"
    handoff = run["handoff"]
    assert handoff["where"] == "background" and handoff["spans"] >= 1 and handoff["pid"]
    assert handoff["graph"] is True  # the graph update went with the vectors
    try:
        # BM25 and exact symbols answer for the new span now, dense or not
        hit = _search(root, "reconcile_ledger_entries")
        assert hit["results"][0]["symbol"] == "reconcile_ledger_entries"
        assert run["vectors"]["missing"] == handoff["spans"]
        assert _status(root)["searchable"]["graph"] in ("behind", "building", "yes")
    finally:
        _wait_gone(handoff["pid"])
    st = _status(root)
    assert st["vectors"]["complete"] and st["searchable"]["graph"] == "yes"
    assert "reconcile_ledger_entries" in (state_dir(root) / "rag_graph.json").read_text()
    log = (state_dir(root) / "backfill.log").read_text()
    assert "embedded" in log and "Traceback" not in log
    assert oct((state_dir(root) / "backfill.log").stat().st_mode & 0o777) == "0o600"
    assert embedder_pid(root) is None
    assert_index_consistent(root)


def test_until_then_search_uses_bm25_for_the_new_spans_and_says_so(embedded_repo):
    root = embedded_repo
    with (root / "app/store.py").open("a") as f:
        f.write(NEW_FUNCTION)
    run = _index(root, "--vectors", "none")
    assert run["backfill"] == "deferred" and run["vectors"]["missing"] >= 1
    hit = _search(root, "match bank statement lines to ledger entries by amount")
    top = hit["results"][0]
    assert top["symbol"] == "reconcile_ledger_entries"
    assert not any(s.startswith("dense") for s in top["sources"])  # no vector yet
    coverage = [w for w in hit["warnings"] if w.startswith("dense:")]
    assert coverage and "BM25 and exact symbols cover all" in coverage[0]
    # the next run embeds exactly what was missing, here (no terminal, no daemon)
    again = _index(root)
    assert again["files_indexed"] == 0 and again["embedded"] + again["embed_cached"] >= 1
    assert again["vectors"]["complete"] and again["handoff"] is None


def test_one_background_embedder_at_a_time_and_no_handoff_is_lost(embedded_repo):
    root = embedded_repo
    with (root / "app/store.py").open("a") as f:
        f.write(NEW_FUNCTION)
    _index(root, "--vectors", "none")
    fd = os.open(state_dir(root) / BACKFILL_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # an embedder is running
    try:
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        assert embedder_pid(root) == os.getpid()
        second = CliRunner().invoke(main, ["index", str(root), "--vectors-only", "--json"])
        assert second.exit_code == 0, second.output
        assert json.loads(second.stdout) == {"backfill": "elsewhere"}
        assert (state_dir(root) / BACKFILL_WANT).exists()  # the holder will look again
        assert not _vectors(root)["complete"]
    finally:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    done = CliRunner().invoke(main, ["index", str(root), "--vectors-only", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["vectors"]["complete"]
    assert not (state_dir(root) / BACKFILL_WANT).exists()


def test_the_background_embedder_never_imports_the_repositorys_own_llmc(tmp_path: Path):
    files = {**SAMPLE_FILES, "llmc/__init__.py": "open(__file__ + '.ran', 'w').close()\n"}
    root = make_repo(tmp_path / "repo", files)
    _index(root, "--vectors", "none")
    run = subprocess.run(
        [sys.executable, "-m", "llmc", "index", str(root), "--vectors", "later", "--json"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    handoff = json.loads(run.stdout)["handoff"]
    assert handoff["where"] == "background"
    _wait_gone(handoff["pid"])
    assert not (root / "llmc" / "__init__.py.ran").exists()
    assert _vectors(root)["complete"]


def test_vectors_here_and_auto_off_a_terminal_embed_before_returning(embedded_repo):
    root = embedded_repo
    with (root / "app/store.py").open("a") as f:
        f.write(NEW_FUNCTION)
    run = _index(root)  # auto, no terminal, no daemon: here, as a script expects
    assert run["backfill"] == "done" and run["vectors"]["complete"] and run["handoff"] is None
    assert run["embedded"] >= 1
    store = Store(db_path(root), readonly=True)
    try:
        assert not store.missing_vectors("code") and not store.missing_vectors("doc")
    finally:
        store.close()


def test_the_summary_says_where_the_vectors_went(embedded_repo):
    """Plain output: the vectors line names the hand-off, not "incomplete" with advice to
    run `llmc index` again, and the hand-off line comes with it, before any skip line."""
    root = embedded_repo
    with (root / "app/store.py").open("a") as f:
        f.write(NEW_FUNCTION)
    result = CliRunner().invoke(main, ["index", str(root), "--vectors", "later"])
    assert result.exit_code == 0, result.output
    found = re.search(r"\(pid (\d+),", result.output)
    pid = int(found.group(1)) if found else embedder_pid(root)
    try:
        lines = result.output.splitlines()
        vectors = next(i for i, line in enumerate(lines) if "embedding handed to" in line)
        assert "handed to a background process" in lines[vectors]
        assert "`llmc index` embeds them" not in result.output
        assert "in the background" in lines[vectors + 1]
    finally:
        if pid is not None:
            _wait_gone(pid)


def test_index_vectors_in_the_config_sets_the_default_and_a_bad_value_is_one_line(tmp_path):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    user_config('[index]\nvectors = "sometimes"\n')  # who embeds: the user's say
    bad = CliRunner().invoke(main, ["index", str(root)])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert "index.vectors = 'sometimes'" in bad.output
    user_config('[index]\nvectors = "none"\n')
    run = _index(root)
    assert run["spans_written"] > 0 and run["embedded"] == 0 and run["backfill"] == "deferred"
    assert run["handoff"] is None
    here = _index(root, "--vectors", "here")  # the flag wins over the config
    assert here["embedded"] == run["spans_written"]
