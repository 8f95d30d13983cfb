"""Worktrees of one repository share embedded vectors (llmc/index/worktree_cache.py).

A `git worktree add` of an indexed repository embeds nothing its sibling has already
embedded: the backfill finds the vectors in the sibling's cache by (model, text hash),
read-only. A sibling vector that is not what it should be is a miss, embedded again.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import git, make_repo

from llmc.cli import main
from llmc.index.worktree_cache import sibling_worktrees

FILES = {
    **{f"pkg/m{i}.py": f'def f{i}(x):\n    """Add {i}."""\n    return x + {i}\n' for i in range(4)},
    "README.md": "# Title\n\nHow the package adds numbers.\n",
}


def _index(root: Path) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def main_and_worktree(tmp_path, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    first = make_repo(tmp_path / "main", FILES)
    assert _index(first)["embedded"] == 5
    git(first, "worktree", "add", "-q", str(tmp_path / "wt"))
    return first, tmp_path / "wt"


def test_a_new_worktree_borrows_its_siblings_vectors(main_and_worktree) -> None:
    first, second = main_and_worktree
    assert sibling_worktrees(second) == [first.resolve()]
    report = _index(second)
    assert report["embedded"] == 0 and report["embed_cached"] == 5
    with sqlite3.connect(second / ".llmc" / "index.db") as conn:  # kept in its own cache
        assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] == 5


def test_a_bad_sibling_vector_is_a_miss(main_and_worktree) -> None:
    first, second = main_and_worktree
    with sqlite3.connect(first / ".llmc" / "index.db") as conn:
        conn.execute("UPDATE embedding_cache SET vector = x'0000803f'")  # dimension 1
    report = _index(second)
    assert report["embedded"] == 5 and report["embed_cached"] == 0


def test_no_worktrees_no_siblings(tmp_path) -> None:
    assert sibling_worktrees(make_repo(tmp_path / "solo", {"a.py": "x = 1\n"})) == []
    plain = tmp_path / "plain"
    plain.mkdir()
    assert sibling_worktrees(plain) == []
