"""Plain-text renderings of graph answers for ``llmc graph`` (the CLI prints them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmc.graph.query import RepoGraph
from llmc.graph.records import Dep, Edge, NodeInfo, Ref, Usage


def _where(info: NodeInfo) -> str:
    if not info.path:
        return info.kind
    if info.kind == "file":
        return f"file, {info.path}"
    return f"{info.kind}, {info.path}:{info.start_line}-{info.end_line}"


def _ref_line(r: Ref) -> str:
    via = f" ({r.via})" if r.via and r.via not in ("calls", "imports") else ""
    return f"  {r.path}:{r.line}  {r.name or r.node}  {r.confidence:.2f}{via}"


def usage_lines(u: Usage) -> list[str]:
    lines = [f"{u.target.id}  ({_where(u.target)})"]
    labels = {
        "callers": "callers",
        "possible_callers": "possible callers (by name only)",
        "importers": "importers",
        "subclasses": "subclasses",
        "tests": "tests",
        "docs": "docs",
    }
    empty = True
    for group, label in labels.items():
        refs: list[Ref] = getattr(u, group)
        if not refs:
            continue
        empty = False
        lines.append(f"{label} ({len(refs)})")
        lines += [_ref_line(r) for r in refs]
    if empty:
        lines.append("  no uses found")
    return lines


def deps_lines(graph: RepoGraph, target: str, deps: list[Dep]) -> list[str]:
    info = graph.node(target)
    lines = [f"{info.id}  ({_where(info)})"]
    if not deps:
        lines.append("  no dependencies found")
    for d in deps:
        n = graph.node(d.node)
        loc = f"{n.path}:{n.start_line}" if n.kind != "file" else n.path
        lines.append(f"  {'  ' * (d.depth - 1)}{d.type:<8} {d.node}  [{loc}]  {d.confidence:.2f}")
    return lines


def neighbor_lines(graph: RepoGraph, target: str, edges: list[Edge]) -> list[str]:
    info = graph.node(target)
    lines = [f"{info.id}  ({_where(info)})"]
    if not edges:
        lines.append("  no neighbors")
    for e in sorted(edges, key=lambda e: (e.direction, e.type, -e.confidence, e.other)):
        arrow = "->" if e.direction == "out" else "<-"
        at = f" line {e.line}" if e.line else ""
        lines.append(f"  {arrow} {e.type:<8} {e.other}  {e.confidence:.2f}{at}")
    return lines


def candidate_lines(graph: RepoGraph, query: str, candidates: list[str]) -> list[str]:
    lines = [f"{query!r} is ambiguous; {len(candidates)} candidates (pass one of these ids):"]
    for c in candidates:
        lines.append(f"  {c}  ({_where(graph.node(c))})")
    return lines


def stats_lines(summary: dict[str, Any]) -> list[str]:
    lines = [
        f"graph generation {summary['generation']}  built {summary['built_at']}  "
        f"in {summary['build_seconds']:.2f}s",
        f"nodes {summary['nodes']}: "
        + ", ".join(f"{k} {v}" for k, v in summary["nodes_by_kind"].items()),
        f"edges {summary['edges']}: "
        + ", ".join(f"{k} {v}" for k, v in summary["edges_by_type"].items()),
        "resolution:",
    ]
    for etype, c in summary["resolution"].items():
        lines.append(
            f"  {etype:<9} {c['rate'] * 100:5.1f}%  resolved {c['resolved']}, "
            f"unresolved {c['unresolved']}, external {c['external']}"
        )
    lines.append("top nodes by PageRank:")
    for t in summary["top"]:
        lines.append(f"  {t['pagerank']:.4f}  {t['node']}  ({t['kind']})")
    return lines


def stale_warning(repo_root: Path, graph: RepoGraph) -> str | None:
    """A one-line warning when the graph reflects an older index generation."""
    from llmc.store.db import Store

    db = Path(repo_root) / ".llmc" / "index.db"
    if not db.exists():
        return None
    try:
        store = Store(db, readonly=True)
        try:
            gen = store.generation
        finally:
            store.close()
    except Exception:  # noqa: BLE001 - a warning must not fail the command
        return None
    if gen != graph.generation:
        return (
            f"warning: the graph reflects index generation {graph.generation}, the index is "
            f"at {gen}; run `llmc index` to refresh it"
        )
    return None


__all__ = [
    "candidate_lines",
    "deps_lines",
    "neighbor_lines",
    "stale_warning",
    "stats_lines",
    "usage_lines",
]
