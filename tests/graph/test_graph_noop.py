"""A run that changed nothing leaves the graph file alone: it was written at the store's
generation with every file as it is, so reading it back whole (1.6 GB on a 213k-span
tree) only to write the same graph is skipped."""

from __future__ import annotations

import json

from click.testing import CliRunner
from graph_helpers import copy_project

from llmc.cli import main
from llmc.graph.query import graph_file


def _index(root) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _callers(root, symbol: str) -> list[str]:  # the answer, order-free
    result = CliRunner().invoke(
        main, ["graph", "where-used", symbol, "--repo", str(root), "--json"]
    )
    assert result.exit_code == 0, result.output
    return sorted(json.dumps(json.loads(result.stdout), sort_keys=True).split(","))


def test_a_noop_run_does_not_rewrite_the_graph_and_an_edit_does(tmp_path):
    root = copy_project(tmp_path, "pyshop")
    _index(root)
    graph = graph_file(root)
    first = graph.stat()
    head = json.loads(graph.read_text())
    before = _callers(root, "create_service")

    noop = _index(root)
    assert noop["files_indexed"] == 0
    again = graph.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert _callers(root, "create_service") == before

    service = root / "shop" / "service.py"
    service.write_text(service.read_text() + "\n\ndef audit_order(order):\n    return order\n")
    _index(root)
    after = json.loads(graph.read_text())
    assert after["graph"]["generation"] > head["graph"]["generation"]
    assert any(n.get("name") == "audit_order" for n in after["nodes"])
