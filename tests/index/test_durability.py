"""Power loss: SQLite may lose its last commits; the index must notice and end up right.

SQLite runs WAL with ``synchronous=NORMAL``: a process crash loses nothing committed, a
power loss can drop a tail of commits. A real power cut cannot be staged in a test, so the
lost tail is simulated the way it looks on disk afterwards: ``index.db`` as it was one
run earlier, next to the lexical index and graph of the later run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from index_checks import assert_index_consistent
from repo_fixtures import SAMPLE_FILES, make_repo

import llmc.graph.build
from llmc.cli import main
from llmc.paths import db_path, graph_path, lexical_path
from llmc.store.db import Store
from llmc.store.lexical import LexicalIndex, LexicalUpdate

NEW_CODE = '''

def rotate_session_token(store, user_id):
    """Replace a user's session token with a fresh one."""
    store.save_session(user_id, "fresh")
'''
NEW_FILE = '''"""Token helpers."""


def mint_audit_token(seed):
    """A token for the audit log."""
    return f"audit-{seed}"
'''


def run_index(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def search(root: Path, query: str) -> list[dict]:
    result = CliRunner().invoke(main, ["search", "--json", "--repo", str(root), query])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["results"]


def db_files(root: Path) -> list[Path]:
    return sorted(db_path(root).parent.glob(db_path(root).name + "*"))


def save_db(root: Path, to: Path) -> None:
    to.mkdir()
    for f in db_files(root):
        shutil.copy2(f, to / f.name)


def restore_db(root: Path, saved: Path) -> None:
    """Put back the saved ``index.db*``: as if the commits since never reached the disk."""
    for f in db_files(root):
        f.unlink()
    for f in saved.iterdir():
        shutil.copy2(f, db_path(root).parent / f.name)


def generations(root: Path) -> tuple[int, int]:
    """(store, lexical) generations."""
    store = Store(db_path(root), readonly=True)
    try:
        return store.generation, LexicalIndex(lexical_path(root)).generation
    finally:
        store.close()


def assert_consistent(root: Path) -> None:
    assert_index_consistent(root, graph=True)


def line_of(root: Path, rel: str, text: str) -> int:
    lines = (root / rel).read_text(encoding="utf-8").split("\n")
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_lost_tail_of_index_db_is_detected_and_repaired(tmp_path):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    run_index(root)
    save_db(root, tmp_path / "saved")

    store_py = root / "app/store.py"
    store_py.write_text(store_py.read_text() + NEW_CODE)
    (root / "app/tokens.py").write_text(NEW_FILE)
    later = run_index(root)
    assert later["files_indexed"] == 2

    restore_db(root, tmp_path / "saved")
    store_gen, lexical_gen = generations(root)
    assert store_gen < lexical_gen == later["generation"]  # the derived index is ahead

    repaired = run_index(root)
    assert "lost-tail" in repaired["repaired"] and "lexical" in repaired["repaired"]
    assert repaired["files_indexed"] == 2  # the files whose records went back in time
    assert repaired["generation"] > later["generation"]  # no generation names two contents
    assert_consistent(root)

    top = search(root, "rotate_session_token")[0]
    assert (top["path"], top["start_line"]) == (
        "app/store.py",
        line_of(root, "app/store.py", "def rotate_session_token"),
    )
    top = search(root, "mint_audit_token")[0]
    assert (top["path"], top["start_line"]) == ("app/tokens.py", 4)

    again = run_index(root)
    assert again["files_indexed"] == 0 and again["repaired"] == []


def test_index_db_replaced_under_a_newer_lexical_index(tmp_path):
    """A fresh `index.db` (deleted, or an old backup) next to the lexical index of many runs:
    the lexical docs of files gone since must not survive the repair."""
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    run_index(root)
    for f in db_files(root):
        f.unlink()
    (root / "docs/guide.md").unlink()
    repaired = run_index(root)
    assert "lost-tail" in repaired["repaired"]
    assert_consistent(root)
    store_gen, lexical_gen = generations(root)
    assert store_gen == lexical_gen == repaired["generation"]


def test_derived_indexes_record_only_durable_generations(tmp_path, monkeypatch):
    """Before the lexical index or the graph records generation G, G was made durable
    (committed with synchronous=FULL), so after a power loss they are never ahead."""
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    recorded: list[tuple[str, int, int]] = []

    def durable() -> int:
        store = Store(db_path(root), readonly=True)
        try:
            return store.durable_generation
        finally:
            store.close()

    def spy(name: str, fn, position: int):
        def wrapper(*args, **kwargs):
            generation = kwargs.get("generation", args[position] if len(args) > position else 0)
            recorded.append((name, generation, durable()))
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(LexicalUpdate, "commit", spy("update", LexicalUpdate.commit, 1))
    monkeypatch.setattr(LexicalIndex, "rebuild", spy("rebuild", LexicalIndex.rebuild, 2))
    monkeypatch.setattr(
        llmc.graph.build, "update_graph", spy("graph", llmc.graph.build.update_graph, 4)
    )

    run_index(root)
    (root / "app/tokens.py").write_text(NEW_FILE)
    run_index(root)
    (lexical_path(root) / "generation").unlink()  # a lexical index behind the store
    run_index(root)

    names = {name for name, _, _ in recorded}
    assert names == {"update", "rebuild", "graph"}, recorded
    for name, generation, durable_gen in recorded:
        assert generation <= durable_gen, (name, generation, durable_gen)
    assert graph_path(root).exists()


@pytest.mark.parametrize("readonly", [False, True])
def test_connections_commit_with_synchronous_normal(tmp_path, readonly):
    """FULL is only for the commit that makes a generation durable, not every commit."""
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    run_index(root)
    store = Store(db_path(root), readonly=readonly)
    try:
        assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        if not readonly:
            store.make_durable()
            assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
            assert store.durable_generation == store.generation
    finally:
        store.close()
