"""Faults in the derived indexes (``rag_graph.json``, ``.llmc/lexical/``): they are
rebuilt from SQLite, so the index keeps answering and the next ``llmc index`` heals them."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from fault_helpers import (
    assert_clean_success,
    assert_consistent,
    assert_one_line_failure,
    index_in_process,
    llmc,
    top_results,
)

from llmc.cli import main
from llmc.paths import graph_path, lexical_path


def where_used(repo) -> subprocess.CompletedProcess:
    return llmc("graph", "where-used", "--json", "--repo", str(repo), "save_session")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "not-a-graph"])
def test_corrupt_graph_is_one_line_then_rebuilt(repo, good_answers, good_repo, damage):
    before = where_used(good_repo)
    assert_clean_success(before)
    path = graph_path(repo)
    if damage == "garbage":
        path.write_bytes(b"{\x00\xffnot json")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_text(json.dumps({"nodes": 5, "links": "x"}))
    assert_one_line_failure(where_used(repo), "rag_graph.json", "llmc index")
    assert top_results(repo) == good_answers  # search does not need the graph
    index_in_process(repo)
    after = where_used(repo)
    assert_clean_success(after)
    assert json.loads(after.stdout) == json.loads(before.stdout)


def _dense_search(repo, query: str) -> list[str]:
    result = CliRunner().invoke(main, ["search", "--json", "--no-hyde", "--repo", str(repo), query])
    assert result.exit_code == 0, (result.output, result.exception)
    return [r["path"] for r in json.loads(result.stdout)["results"]]


@pytest.mark.parametrize("damage", ["deleted", "segments-garbage", "meta-garbage"])
def test_broken_lexical_index_still_answers_then_is_rebuilt(repo, good_answers, damage):
    lexical = lexical_path(repo)
    if damage == "deleted":
        shutil.rmtree(lexical)
    elif damage == "segments-garbage":
        for f in [*lexical.glob("*.term"), *lexical.glob("*.idx")]:
            f.write_bytes(b"\xde\xad" * 50)
    else:
        (lexical / "meta.json").write_text("{bad")
    out = llmc("search", "--no-dense", "--no-hyde", "--repo", str(repo), "save session token")
    assert_clean_success(out)
    assert any(
        line.startswith("warning:") and "lexical index" in line for line in out.stderr.splitlines()
    ), out.stderr
    assert "app/store.py" in _dense_search(repo, "save session token")[:3]  # dense answers
    summary = index_in_process(repo)
    assert "lexical" in summary["repaired"]
    assert top_results(repo) == good_answers
    assert_consistent(repo)
