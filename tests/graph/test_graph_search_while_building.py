"""`llmc search --graph` while an index run has made BM25 and exact symbols searchable but
has not written the graph yet (a first run writes it last): the search answers, and the
graph stage is skipped with a line saying why, not an error and not a wait."""

from __future__ import annotations

import fcntl
import json
import os

from click.testing import CliRunner
from graph_helpers import copy_project

from llmc.cli import main
from llmc.graph.query import graph_file
from llmc.paths import lock_path

QUERY = ["place an order", "-k", "3"]


def _search(root) -> dict:
    args = ["search", "--repo", str(root), "--graph", "--no-dense", "--explain", "--json"]
    result = CliRunner().invoke(main, [*args, *QUERY])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_search_while_the_graph_is_built_skips_the_graph_stage(tmp_path):
    root = copy_project(tmp_path, "pyshop")
    result = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q", "--json"])
    assert result.exit_code == 0, result.output
    with_graph = _search(root)
    assert not [w for w in with_graph["warnings"] if "graph" in w]

    graph_file(root).unlink()  # the state of a first run before its graph is written
    fd = os.open(lock_path(root), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, as the index run holds it
    try:
        building = _search(root)
    finally:
        os.close(fd)
    assert [r["path"] for r in building["results"]] == [r["path"] for r in with_graph["results"]]
    assert building["results"][0]["path"] == "shop/service.py"
    graph_lines = [w for w in building["warnings"] if "graph" in w]
    assert len(graph_lines) == 1
    assert "graph skipped: still being built" in graph_lines[0]
    notes = [n["note"] for n in building["explain"]["stages"] if n["stage"] == "graph"]
    assert notes and notes[0].startswith("graph skipped: still being built")
    assert "graph" in building["timings_ms"]

    # no run under way: a missing graph is reported as missing, with what to do
    gone = _search(root)
    assert [r["path"] for r in gone["results"]] == [r["path"] for r in with_graph["results"]]
    missing = [w for w in gone["warnings"] if "graph" in w]
    assert len(missing) == 1 and "no graph at" in missing[0] and "llmc index" in missing[0]
    assert "still being built" not in missing[0]
    notes = [n["note"] for n in gone["explain"]["stages"] if n["stage"] == "graph"]
    assert notes and notes[0].startswith("skipped: no graph at")
