"""PageRank over the repository graph: ``networkx.pagerank`` on the subgraph of chosen
nodes and edge types, edges weighted by summed confidence."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from llmc.graph.model import CALLS, IMPORTS, INHERITS

if TYPE_CHECKING:
    import networkx as nx

log = logging.getLogger(__name__)

DEPENDENCY_TYPES = (CALLS, IMPORTS, INHERITS)


def pagerank(
    g: nx.MultiDiGraph,
    nodes: Iterable[str] | None = None,
    edge_types: Iterable[str] | None = DEPENDENCY_TYPES,
    personalization: Mapping[str, float] | None = None,
    alpha: float = 0.85,
    max_iter: int = 100,
    tol: float = 1.0e-6,
) -> dict[str, float]:
    """``networkx.pagerank`` over the subgraph induced by ``nodes`` (default: all), with the
    edges of ``edge_types`` weighted by summed confidence. Negative personalization counts
    as 0, all-zero as none; the iteration starts from the personalization vector."""
    import networkx as nx

    sub = _weighted_subgraph(g, nodes, edge_types)
    if not sub:
        return {}
    p = _teleport(sub, personalization)
    args = {"alpha": alpha, "personalization": p, "tol": tol, "nstart": p, "weight": "weight"}
    try:
        ranks = nx.pagerank(sub, max_iter=max_iter, **args)
    except nx.PowerIterationFailedConvergence:
        log.warning("PageRank did not converge in %d iterations; trying 10x as many", max_iter)
        ranks = nx.pagerank(sub, max_iter=10 * max_iter, **args)
    return {n: float(r) for n, r in ranks.items()}


def _weighted_subgraph(
    g: nx.MultiDiGraph, nodes: Iterable[str] | None, edge_types: Iterable[str] | None
) -> nx.DiGraph:
    """The induced subgraph as a DiGraph: one edge per pair, weight = summed confidence."""
    import networkx as nx

    ns = list(dict.fromkeys(n for n in (nodes if nodes is not None else g.nodes) if n in g))
    types = set(edge_types) if edge_types is not None else None
    sub = nx.DiGraph()
    sub.add_nodes_from(ns)
    for u in ns:
        for _, v, d in g.out_edges(u, data=True):
            if v in sub and (types is None or d["type"] in types):
                w = float(d.get("confidence", 1.0))
                if sub.has_edge(u, v):
                    sub[u][v]["weight"] += w
                else:
                    sub.add_edge(u, v, weight=w)
    return sub


def _teleport(sub: nx.DiGraph, personalization: Mapping[str, float] | None) -> dict | None:
    """Personalization restricted to the subgraph, negatives as 0; None when nothing is left."""
    if not personalization:
        return None
    p = {n: max(0.0, float(personalization.get(n, 0.0))) for n in sub}
    total = sum(p.values())
    return {n: x / total for n, x in p.items()} if total > 0 else None


__all__ = ["DEPENDENCY_TYPES", "pagerank"]
