"""The graph's files written as they are encoded: the same bytes as encoding them whole."""

from __future__ import annotations

import orjson

from llmc.graph import cache, output
from llmc.graph.model import GraphStats


def _graph(n: int):
    nodes = {
        f"p{i % 3}.py::f{i}": {"kind": "function", "line": i, "name": f"é{i}"} for i in range(n)
    }
    ids = sorted(nodes)
    edges = [
        (ids[i % n], ids[(i * 7) % n], ("calls", "imports")[i % 2], {"weight": i})
        for i in range(2 * n)
    ]
    return nodes, edges


def test_node_link_chunks_are_the_bytes_of_the_whole_document(monkeypatch):
    monkeypatch.setattr(output, "WRITE_SLICE", 3)
    for n in (0, 1, 3, 4, 10):
        nodes, edges = _graph(n) if n else ({}, [])
        data = output.to_node_link(nodes, edges, 5, GraphStats(generation=5), {"x": 1})
        chunks = list(output.node_link_chunks(nodes, edges, data["graph"]))
        assert b"".join(chunks) == orjson.dumps(data), n
        assert n < 4 or len(chunks) > 4  # in slices


def test_write_node_link_writes_what_write_json_writes(tmp_path):
    nodes, edges = _graph(9)
    header = output.write_node_link(tmp_path / "a.json", nodes, edges, 2, GraphStats(generation=2))
    output.write_json(
        tmp_path / "b.json",
        output.to_node_link(nodes, edges, 2, GraphStats(generation=2)) | {"graph": header},
    )
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o600


def test_facts_cache_results_as_pairs_or_by_path_are_the_same_file(tmp_path):
    data = {"version": 1, "token": "t", "files": {"a.py": {"hash": "h", "raw": b"[1]"}}}
    results = {"a.py": b"[[],[]]", "b.py": b"[2]"}
    cache.write(tmp_path / "one.jsonl", data, {"version": 1}, results)
    cache.write(tmp_path / "two.jsonl", data, {"version": 1}, iter(results.items()))
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
