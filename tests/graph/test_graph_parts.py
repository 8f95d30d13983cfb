"""A cold build merges its edges part by part of the sources (``llmc.graph.parts``) and
writes the same graph as merging them all in one table."""

from __future__ import annotations

import shutil

import orjson
import pytest
from graph_helpers import FIXTURES, copy_project, filler_factory

from llmc.graph import parts, update_graph, warm
from llmc.graph.model import GRAPH_FILE
from llmc.graph.parts import part_bounds

filler = pytest.fixture(name="filler")(filler_factory)

_NODES = b',"nodes":['


def _mixed(tmp_path):
    root = copy_project(tmp_path, "pyshop")
    shutil.copytree(FIXTURES / "tsapp", root / "web")
    return root


def _graph(root) -> tuple[dict, bytes]:
    """The graph file's attributes, but when it was built and its token; and its body."""
    raw = (root / ".llmc" / GRAPH_FILE).read_bytes()
    at = raw.index(_NODES)
    head = orjson.loads(raw[len(b'{"directed":true,"multigraph":true,"graph":') : at])
    head.pop("built_at")
    head.pop("facts_token")
    head["stats"].pop("seconds")
    return head, raw[at:]


_MADE: list[int] = []  # each cold build's number of parts


class _Counted(parts.PartSpill):
    def __init__(self, *args) -> None:
        super().__init__(*args)
        _MADE.append(self.parts)


def _cold(root, f, changed, monkeypatch, files_per_part: int) -> tuple[dict, bytes]:
    monkeypatch.setattr(parts, "FILES_PER_PART", files_per_part)
    monkeypatch.setattr("llmc.graph.build.PartSpill", _Counted)
    for name in ("rag_graph.json", "graph_facts.jsonl"):
        (root / ".llmc" / name).unlink(missing_ok=True)
    update_graph(root, f.store, changed, [], 1)
    return _graph(root)


def test_a_merge_part_by_part_writes_the_graph_of_one_table(tmp_path, filler, monkeypatch):
    root = _mixed(tmp_path)
    f = filler(root)
    changed = f.put()
    f.bump()
    one = _cold(root, f, changed, monkeypatch, 10**9)
    edges = one[0]["stats"]["edges_by_type"]
    assert {"defines", "imports", "calls", "tests"} <= set(edges), edges
    n = one[0]["stats"]["files"]
    assert len(part_bounds([f"{i}.py" for i in range(n)], 1)) == n - 1
    for files_per_part in (1, 2, 3, 7):
        assert _cold(root, f, changed, monkeypatch, files_per_part) == one, files_per_part
    assert _MADE == [1, n, n // 2, n // 3, n // 7]
    # and as a kept state merges them (every file's events in memory, one table)
    warm.enable(True)
    try:
        assert _cold(root, f, changed, monkeypatch, 1) == one
        assert len(_MADE) == 5  # (no spill: one table in memory)
    finally:
        warm.forget(root / ".llmc")
        warm.enable(False)
    assert not [p for p in (root / ".llmc").iterdir() if p.name.endswith(".tmp")]


def test_no_part_begins_inside_the_ids_of_a_file():
    paths = ["a.py", "a.py.orig", "a.py/x", "b.py", "c", "c-d", "d"]
    bounds = part_bounds(paths, 1)
    assert "a.py.orig" not in bounds and "a.py/x" not in bounds and "c-d" not in bounds
    assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds)
    assert bounds == ["b.py", "c", "d"]
    ids = sorted(
        [*paths, *(f"{p}::f" for p in paths), *(f"{p}::A.g" for p in paths)]
    )  # the order the graph file lists sources in
    import bisect

    part = [bisect.bisect_right(bounds, i) for i in ids]
    assert part == sorted(part)  # each part a range of the sorted ids
    for p in paths:  # and a file's ids in one part
        assert len({bisect.bisect_right(bounds, i) for i in ids if i.split("::")[0] == p}) == 1
    assert part_bounds(paths, 100) == []
