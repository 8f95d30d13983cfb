"""Graph queries for the daemon and MCP: the objects `llmc graph … --json` prints.

``where_used`` answers ``usage.to_json()``; ``deps`` answers ``{target, depth, deps}``;
``neighbors`` ``{target, edges}``; ``stats`` ``{summary}`` (the object `llmc graph stats
--json` prints); an ambiguous name answers ``{query, ambiguous: true, candidates}`` (the
CLI exits 2 on it).
Each answer also carries ``warnings`` (a stale-graph line, for stderr) and, when asked
for with ``text``, ``text``: the CLI's human output, so `llmc graph` without ``--json``
can print a daemon's answer as it is. The graph is loaded through ``load_graph``, which
caches it per file identity, so a daemon parses it once per index run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmc.config import Config


def _ambiguous(graph: Any, query: str, candidates: list[str], text: bool) -> dict[str, Any]:
    from llmc.graph.render import candidate_lines

    out: dict[str, Any] = {
        "query": query,
        "ambiguous": True,
        "candidates": [graph.node(c).to_json() for c in candidates],
    }
    if text:
        out["text"] = "\n".join(candidate_lines(graph, query, candidates))
    return out


def _open(root: Path) -> tuple[Any, list[str]]:
    from llmc.graph import load_graph
    from llmc.graph.render import stale_warning

    graph = load_graph(root)
    warning = stale_warning(root, graph)
    return graph, [warning] if warning else []


def where_used(
    root: Path, symbol: str, min_confidence: float = 0.5, text: bool = False
) -> dict[str, Any]:
    from llmc.errors import AmbiguousSymbolError
    from llmc.graph.render import usage_lines

    graph, warnings = _open(root)
    try:
        usage = graph.where_used(symbol, min_confidence)
    except AmbiguousSymbolError as e:
        out = _ambiguous(graph, symbol, e.candidates, text)
    else:
        out = usage.to_json()
        if text:
            out["text"] = "\n".join(usage_lines(usage))
    out["warnings"] = warnings
    return out


def deps(
    root: Path, cfg: Config, target: str, depth: int | None = None, text: bool = False
) -> dict[str, Any]:
    from llmc.errors import AmbiguousSymbolError
    from llmc.graph.render import deps_lines

    graph, warnings = _open(root)
    depth = depth or cfg.graph.deps_depth
    try:
        node = graph.resolve_one(target)
    except AmbiguousSymbolError as e:
        out = _ambiguous(graph, target, e.candidates, text)
    else:
        found = graph.deps(node, depth)
        out = {
            "target": graph.node(node).to_json(),
            "depth": depth,
            "deps": [d.to_json() for d in found],
        }
        if text:
            out["text"] = "\n".join(deps_lines(graph, node, found))
    out["warnings"] = warnings
    return out


def neighbors(
    root: Path,
    target: str,
    edge_types: list[str] | None = None,
    direction: str = "both",
    text: bool = False,
) -> dict[str, Any]:
    from llmc.errors import AmbiguousSymbolError
    from llmc.graph.render import neighbor_lines

    graph, warnings = _open(root)
    try:
        node = graph.resolve_one(target)
    except AmbiguousSymbolError as e:
        out = _ambiguous(graph, target, e.candidates, text)
    else:
        edges = graph.neighbors(node, edge_types or None, direction)
        out = {"target": graph.node(node).to_json(), "edges": [e.to_json() for e in edges]}
        if text:
            out["text"] = "\n".join(neighbor_lines(graph, node, edges))
    out["warnings"] = warnings
    return out


def stats(root: Path, top: int = 10, text: bool = False) -> dict[str, Any]:
    from llmc.graph.render import stats_lines

    graph, warnings = _open(root)
    summary = graph.summary(top)
    out: dict[str, Any] = {"summary": summary, "warnings": warnings}
    if text:
        out["text"] = "\n".join(stats_lines(summary))
    return out


__all__ = ["deps", "neighbors", "stats", "where_used"]
