"""`llmc graph ...` end to end: a real `llmc index` (tree-sitter, model, SQLite) builds the
graph through the indexer's hook, then every subcommand answers, as text and as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from graph_helpers import FIXTURES, copy_project

from llmc.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "graph.md"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = copy_project(tmp_path_factory.mktemp("cli"), "pyshop")
    result = CliRunner().invoke(main, ["index", str(root), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert (root / ".llmc" / "rag_graph.json").is_file()
    return root


def run(repo: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(main, ["graph", *args, "--repo", str(repo)])
    assert result.exit_code == code, result.output
    return result


def test_where_used_text_and_json(repo):
    out = run(repo, "where-used", "OrderService.place").stdout
    assert out.splitlines()[0].startswith("shop/service.py::OrderService.place  (method")
    assert re.search(r"callers \(2\)\n  shop/cli\.py:\d+  main", out)
    data = json.loads(run(repo, "where-used", "OrderService.place", "--json").stdout)
    assert data["target"]["id"] == "shop/service.py::OrderService.place"
    assert data["target"]["span_id"] is not None
    assert {r["node"] for r in data["callers"]} == {
        "shop/cli.py::main",
        "tests/service_checks.py::test_place",
    }
    assert {r["node"] for r in data["tests"]} == {"tests/service_checks.py::test_place"}
    assert {r["node"] for r in data["docs"]} == {"docs/usage.md::Shop"}


def test_ambiguous_names_list_candidates_and_exit_2(repo):
    out = run(repo, "where-used", "save", code=2).stdout
    assert "'save' is ambiguous; 2 candidates" in out
    assert "shop/storage/base.py::Repository.save" in out
    data = json.loads(run(repo, "deps", "get", "--json", code=2).stdout)
    assert data["ambiguous"] is True
    assert {c["id"] for c in data["candidates"]} == {
        "shop/storage/base.py::Repository.get",
        "shop/storage/memory.py::MemoryRepository.get",
    }


def test_unknown_names_fail_with_suggestions(repo):
    result = run(repo, "where-used", "round3", code=1)
    assert "no symbol or file named 'round3'" in result.output
    assert "round2" in result.output


def test_deps(repo):
    out = run(repo, "deps", "create_service", "--depth", "2").stdout
    assert "calls    shop/service.py::OrderService" in out
    data = json.loads(run(repo, "deps", "shop/service.py", "--json").stdout)
    got = {(d["node"], d["type"]) for d in data["deps"]}
    assert ("shop/pricing.py", "imports") in got
    assert ("shop/util.py::round2", "calls") in got


def test_neighbors(repo):
    data = json.loads(
        run(repo, "neighbors", "shop/util.py::round2", "--type", "calls", "--direction", "in",
            "--json").stdout
    )  # fmt: skip
    assert {e["other"] for e in data["edges"]} >= {
        "shop/models.py::Item.total",
        "shop/pricing.py::tax",
    }
    assert all(e["direction"] == "in" and e["type"] == "calls" for e in data["edges"])
    text = run(repo, "neighbors", "Repository").stdout
    assert "<- inherits shop/storage/memory.py::MemoryRepository" in text


def test_stats(repo):
    data = json.loads(run(repo, "stats", "--json", "--top", "3").stdout)
    assert data["resolution"]["calls"]["rate"] >= 0.9
    assert data["resolution"]["imports"]["rate"] >= 0.95
    assert len(data["top"]) == 3
    assert data["nodes_by_kind"]["method"] > 10
    text = run(repo, "stats").stdout
    assert "resolution:" in text and "top nodes by PageRank:" in text


def test_reindex_after_an_edit_updates_the_graph(repo):
    util = repo / "shop" / "util.py"
    original = util.read_text()
    try:
        util.write_text(original + "\n\ndef shout(msg: str) -> None:\n    note(msg.upper())\n")
        result = CliRunner().invoke(main, ["index", str(repo), "--json", "-q"])
        assert result.exit_code == 0, result.output
        data = json.loads(run(repo, "where-used", "note", "--json").stdout)
        assert "shop/util.py::shout" in {r["node"] for r in data["callers"]}
    finally:
        util.write_text(original)
        CliRunner().invoke(main, ["index", str(repo), "-q"])


def test_missing_graph_says_run_llmc_index(tmp_path):
    result = CliRunner().invoke(main, ["graph", "stats", "--repo", str(tmp_path)])
    assert result.exit_code == 1
    assert "llmc index" in result.output


def test_every_graph_command_and_option_is_documented():
    doc = DOC.read_text(encoding="utf-8")
    group = main.commands["graph"]
    for name, cmd in group.commands.items():
        assert f"llmc graph {name}" in doc, name
        for param in cmd.params:
            for opt in param.opts:
                if opt.startswith("--") and opt not in ("--help", "--repo"):
                    assert opt in doc, f"{name} {opt}"
    assert "rag_graph.json" in doc and '"version"' in doc


def test_fixture_projects_are_not_collected_as_tests():
    names = {p.name for p in (FIXTURES / "pyshop").rglob("*.py")}
    assert not {n for n in names if n.startswith("test_") or n.endswith("_test.py")}
    assert "conftest.py" not in names
