"""Graph stage: neighbor expansion of the top fused results, then graph priors.

Expansion: for each of the top ``top_n`` candidates, follow its graph node's edges of the
configured types (both directions, confidence >= ``min_confidence``) to neighbor
definitions and sections, and add each neighbor's span scored ``source × alpha`` (times
the route and test weights the neighbor's own span would get in fusion). Per source at most
``per_source`` neighbors, the most similar to the query first. A neighbor is skipped when

- it is a hub (more than ``hub_degree`` edges of those types) that retrieval did not find
  and whose name the query does not say: hubs link to everything, so say nothing;
- its stored embedding's cosine similarity to the query is below ``semantic_floor``;
- its node has no span of its own (a file, an unresolved name) or the span is gone.

A neighbor retrieval already found keeps ``max(own score, source × alpha)``; one it did
not find never outranks its source, whatever the priors do.

Priors, each a multiplicative factor on the top candidates, off (0) by default:

- ``mutual_support``: ``× (1 + w · links)``, links = how many other top candidates its
  node is connected to (at most 3): results that support each other;
- ``degree_prior``: ``× (1 + w · log(1 + degree) / log(1 + hub_degree))`` (capped at 1);
- ``pagerank_prior``: ``× (1 + w · pr / max pr)``, PageRank over the subgraph of the top
  candidates' nodes, personalised by their scores.

Everything the stage adds or boosts is written into the candidate (source ``graph``) and
listed in an :class:`Expansion` for ``--explain``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llmc.search.types import Candidate

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.config import ExpandConfig
    from llmc.graph import RepoGraph
    from llmc.store.db import Store
    from llmc.types import StoredSpan

GRAPH = "graph"  # the source name of everything this stage adds or boosts
PRIOR_WINDOW = 20  # priors look at this many top candidates
MAX_LINKS = 3  # mutual support counts at most this many linked results
_BELOW = 1.0 - 1e-6  # an added neighbor's score stays strictly below its source's


@dataclass(frozen=True)
class Added:
    """One neighbor the stage added (or lifted), and why."""

    span_id: int
    source_id: int  # the candidate whose edge led here
    node: str
    edge: str  # edge type, with its direction from the source: "calls>", "<tests"
    similarity: float | None  # cosine to the query (None: no query vector)
    score: float
    lifted: bool = False  # retrieval had it already, lower


@dataclass(frozen=True)
class Boost:
    span_id: int
    factor: float
    why: str


@dataclass(frozen=True)
class Expansion:
    """The graph stage's output: candidates in their new order, and the trace of it."""

    candidates: tuple[Candidate, ...]
    added: tuple[Added, ...] = ()
    boosts: tuple[Boost, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason → neighbors skipped
    sources: int = 0  # candidates expanded

    def notes(self, describe: Callable[[int], str]) -> list[str]:
        """Lines for the trace; ``describe(span_id)`` names a span (path:line symbol)."""
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        out = [
            f"expanded {self.sources} result(s): {sum(not a.lifted for a in self.added)} "
            f"neighbor(s) added, {sum(a.lifted for a in self.added)} lifted"
            + (f"; skipped {skipped}" if skipped else "")
        ]
        for a in self.added:
            sim = "" if a.similarity is None else f", cos {a.similarity:.2f}"
            verb = "lifted" if a.lifted else "added"
            out.append(
                f"{verb} {describe(a.span_id)} = {a.score:.4f} via {a.edge} "
                f"from {describe(a.source_id)}{sim}"
            )
        for b in self.boosts:
            out.append(f"boosted {describe(b.span_id)} ×{b.factor:.3f}: {b.why}")
        return out


def _direction(edge_type: str, direction: str) -> str:
    return f"{edge_type}>" if direction == "out" else f"<{edge_type}"


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    import numpy as np

    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


class SpanVectors:
    """Cosine of stored span vectors to the query, per category; the query embeds lazily.

    ``query_vector(category)`` gives the query's vector in that category's space (None when
    dense search is off for it); ``stored(category, ids)`` reads span vectors back from the
    store (``Store.vectors``), which is far cheaper than embedding the neighbors again.
    """

    def __init__(
        self,
        query_vector: Callable[[str], np.ndarray | None],
        stored: Callable[[str, Sequence[int]], Mapping[int, np.ndarray]],
    ):
        self._query_vector = query_vector
        self._stored = stored
        self._queries: dict[str, Any] = {}

    def similarities(self, spans: Sequence[StoredSpan]) -> dict[int, float]:
        out: dict[int, float] = {}
        by_cat: dict[str, list[int]] = {}
        for s in spans:
            by_cat.setdefault(s.span.category, []).append(s.id)
        for category, ids in by_cat.items():
            if category not in self._queries:
                self._queries[category] = self._query_vector(category)
            q = self._queries[category]
            if q is None:
                continue
            for span_id, vector in self._stored(category, ids).items():
                out[span_id] = _cosine(q, vector)
        return out


@dataclass
class _Walk:
    """One expansion's lookups into the graph, memoised, and what it skipped and why."""

    graph: RepoGraph
    store: Store
    types: tuple[str, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    _nodes: dict[int, str | None] = field(default_factory=dict)
    _degrees: dict[str, int] = field(default_factory=dict)

    def node(self, span_id: int) -> str | None:
        if span_id not in self._nodes:
            self._nodes[span_id] = self.graph.node_for_span(span_id, self.store)
        return self._nodes[span_id]

    def degree(self, n: str) -> int:
        if n not in self._degrees:
            self._degrees[n] = self.graph.degree(n, self.types, "both")
        return self._degrees[n]

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


Proposal = tuple[Candidate, str, str, int]  # source, neighbor node, edge, neighbor span id


def expand(
    candidates: Sequence[Candidate],
    graph: RepoGraph,
    store: Store,
    cfg: ExpandConfig,
    similarity: Callable[[Sequence[StoredSpan]], Mapping[int, float]] | None,
    *,
    query_words: frozenset[str] = frozenset(),
    span_weight: Callable[[StoredSpan], float] | None = None,
    sources: Sequence[Candidate] | None = None,
) -> Expansion:
    """Add graph neighbors of the top candidates and apply the priors; see the module doc.

    ``sources``: the candidates to expand (default: the first ``cfg.top_n``; the pipeline
    passes the top ones as results will show them, one file's many spans capped);
    ``similarity(spans) -> {span id: cosine to the query}`` (None: no semantic floor);
    ``query_words``: the query's lowercase words, to let a hub the query names through;
    ``span_weight(span)``: the weight fusion would give the span (route, tests; default 1).
    """
    cands = list(candidates)
    if not cands:
        return Expansion(())
    walk = _Walk(graph, store, tuple(cfg.edge_types))
    by_id = {c.span_id: c for c in cands}
    sources = list(cands if sources is None else sources)[: max(0, cfg.top_n)]
    proposals = _propose(walk, sources, by_id, cfg, query_words)
    spans = store.spans_by_ids(list({p[3] for p in proposals})) if proposals else {}
    sims = dict(similarity(list(spans.values()))) if similarity is not None and spans else {}
    floor_sims = sims if similarity is not None else None
    added = _choose(walk, sources, proposals, spans, floor_sims, by_id, cfg,
                    span_weight)  # fmt: skip
    cands = _merge(cands, by_id, added)
    cands.sort(key=_order)
    cands, boosts = _priors(cands, graph, store, cfg, walk.node, walk.degree, walk.types)
    cands = _below_sources(cands, added)
    return Expansion(tuple(cands), tuple(added.values()), tuple(boosts), walk.skipped, len(sources))


def _propose(
    walk: _Walk, sources: Sequence[Candidate], by_id: Mapping[int, Candidate],
    cfg: ExpandConfig, query_words: frozenset[str],
) -> list[Proposal]:  # fmt: skip
    """Each source's neighbor nodes (deduplicated, strongest edge first), less hubs that
    retrieval did not find and the query does not name, and nodes without a span."""
    graph = walk.graph
    proposals: list[Proposal] = []
    for src in sources:
        src_node = walk.node(src.span_id)
        if src_node is None:
            walk.skip("sources without a graph node")
            continue
        seen: set[str] = set()
        for e in graph.neighbors(src_node, walk.types, "both", cfg.min_confidence):
            if e.other in seen or e.other == src_node:
                continue
            seen.add(e.other)
            info = graph.node(e.other)
            if info.span_id is None:
                walk.skip("without a span of their own")
                continue
            if info.span_id == src.span_id:
                continue
            own = info.span_id in by_id
            if (
                walk.degree(e.other) > cfg.hub_degree
                and not own
                and info.name.lower() not in query_words
            ):
                walk.skip("hubs")
                continue
            proposals.append((src, e.other, _direction(e.type, e.direction), int(info.span_id)))
    return proposals


def _choose(
    walk: _Walk, sources: Sequence[Candidate], proposals: Sequence[Proposal],
    spans: Mapping[int, StoredSpan], sims: Mapping[int, float] | None,
    by_id: Mapping[int, Candidate], cfg: ExpandConfig,
    span_weight: Callable[[StoredSpan], float] | None,
) -> dict[int, Added]:  # fmt: skip
    """The neighbors each source adds, the most similar to the query first: above the
    semantic floor (``sims`` None: no floor), weighted as fusion would, at most
    ``per_source`` a source, each at its strongest source's score."""
    added: dict[int, Added] = {}
    for src in sources:
        mine = [p for p in proposals if p[0] is src]
        mine.sort(key=lambda p: (-(sims or {}).get(p[3], 0.0), p[1]))
        taken = 0
        for _, nid, edge, span_id in mine:
            stored = spans.get(span_id)
            if stored is None:
                walk.skip("no longer indexed")
                continue
            sim = sims.get(span_id) if sims is not None else None
            if sims is not None and sim is None:
                walk.skip("without a vector to check against the floor")
                continue
            if sim is not None and sim < cfg.semantic_floor:
                walk.skip("below the semantic floor")
                continue
            weight = span_weight(stored) if span_weight is not None else 1.0
            score = src.score * cfg.alpha * weight
            if score <= 0.0:
                walk.skip("weighted out by the route")
                continue
            own = by_id.get(span_id)
            if own is not None and own.score >= score:
                continue  # retrieval ranks it higher already
            prev = added.get(span_id)
            if prev is not None and prev.score >= score:
                continue  # a stronger source added it
            if taken >= cfg.per_source:
                walk.skip("over the per-source cap")
                continue
            taken += 1
            added[span_id] = Added(span_id, src.span_id, nid, edge, sim, score, own is not None)
    return added


def _merge(
    cands: list[Candidate], by_id: dict[int, Candidate], added: Mapping[int, Added]
) -> list[Candidate]:
    """``cands`` with each added neighbor appended, or lifted where retrieval had it."""
    for a in added.values():
        old = by_id.get(a.span_id)
        rank = cands.index(by_id[a.source_id]) + 1
        if old is None:
            by_id[a.span_id] = Candidate(
                span_id=a.span_id,
                score=a.score,
                ranks={GRAPH: rank},
                scores={GRAPH: a.similarity if a.similarity is not None else 0.0},
                contributions={GRAPH: a.score},
            )
            cands.append(by_id[a.span_id])
        else:
            lifted = _with_graph(old, a.score, rank, a.score - old.score)
            by_id[a.span_id] = lifted
            cands[cands.index(old)] = lifted
    return cands


def _order(c: Candidate) -> tuple:
    """Pinned first (as fusion put them), then by score, then as fusion breaks ties."""
    return (not c.pinned, -c.score, c.best_rank, c.span_id)


def _with_graph(c: Candidate, score: float, rank: int, share: float) -> Candidate:
    return Candidate(
        span_id=c.span_id,
        score=score,
        ranks={**c.ranks, GRAPH: min(rank, c.ranks.get(GRAPH, rank))},
        scores=dict(c.scores),
        contributions={**c.contributions, GRAPH: c.contributions.get(GRAPH, 0.0) + share},
        pinned=c.pinned,
    )


def _priors(
    cands: list[Candidate],
    graph: RepoGraph,
    store: Store,
    cfg: ExpandConfig,
    node: Callable[[int], str | None],
    degree: Callable[[str], int],
    types: tuple[str, ...],
) -> tuple[list[Candidate], list[Boost]]:
    if cfg.mutual_support <= 0 and cfg.degree_prior <= 0 and cfg.pagerank_prior <= 0:
        return cands, []
    window = cands[:PRIOR_WINDOW]
    nodes = {c.span_id: node(c.span_id) for c in window}
    factors: dict[int, list[tuple[float, str]]] = {}
    if cfg.mutual_support > 0:
        in_window: dict[str, set[int]] = {}
        for span_id, n in nodes.items():
            if n is not None:
                in_window.setdefault(n, set()).add(span_id)
        for span_id, n in nodes.items():
            if n is None:
                continue
            linked = {
                other
                for e in graph.neighbors(n, types, "both", cfg.min_confidence)
                for other in in_window.get(e.other, ())
                if other != span_id
            }
            if linked:
                links = min(len(linked), MAX_LINKS)
                factors.setdefault(span_id, []).append(
                    (1.0 + cfg.mutual_support * links, f"linked to {len(linked)} top result(s)")
                )
    if cfg.degree_prior > 0:
        top = math.log1p(max(1, cfg.hub_degree))
        for span_id, n in nodes.items():
            if n is None:
                continue
            d = degree(n)
            if d > 0:
                share = min(1.0, math.log1p(d) / top)
                factors.setdefault(span_id, []).append(
                    (1.0 + cfg.degree_prior * share, f"degree {d}")
                )
    if cfg.pagerank_prior > 0:
        present = {n for n in nodes.values() if n is not None}
        personal: dict[str, float] = {}
        for c in window:
            n = nodes[c.span_id]
            if n is not None:
                personal[n] = personal.get(n, 0.0) + max(c.score, 0.0)
        if len(present) > 1 and sum(personal.values()) > 0:
            pr = graph.pagerank(present, types, personalization=personal)
            best = max(pr.values(), default=0.0)
            if best > 0:
                for span_id, n in nodes.items():
                    if n is not None and pr.get(n, 0.0) > 0:
                        share = pr[n] / best
                        factors.setdefault(span_id, []).append(
                            (1.0 + cfg.pagerank_prior * share, f"pagerank {share:.2f} of the top")
                        )
    boosts: list[Boost] = []
    out = []
    for c in cands:
        fs = factors.get(c.span_id)
        if not fs or c.pinned:
            out.append(c)
            continue
        factor = math.prod(f for f, _ in fs)
        boosts.append(Boost(c.span_id, factor, "; ".join(why for _, why in fs)))
        rank = c.ranks.get(GRAPH, c.best_rank)
        out.append(_with_graph(c, c.score * factor, rank, c.score * (factor - 1.0)))
    out.sort(key=_order)
    return out, boosts


def _below_sources(cands: list[Candidate], added: Mapping[int, Added]) -> list[Candidate]:
    """An added neighbor retrieval did not find stays below its source."""
    fresh = {a.span_id: a.source_id for a in added.values() if not a.lifted}
    if not fresh:
        return cands
    score = {c.span_id: c.score for c in cands}
    out = []
    for c in cands:
        src = fresh.get(c.span_id)
        if src is not None and src in score and c.score >= score[src] * _BELOW:
            capped = score[src] * _BELOW
            c = Candidate(
                span_id=c.span_id,
                score=capped,
                ranks=dict(c.ranks),
                scores=dict(c.scores),
                contributions={**c.contributions, GRAPH: capped},
                pinned=c.pinned,
            )
            score[c.span_id] = capped
        out.append(c)
    out.sort(key=_order)
    return out


__all__ = ["GRAPH", "Added", "Boost", "Expansion", "SpanVectors", "expand"]
