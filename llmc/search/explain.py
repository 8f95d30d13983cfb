"""What ``--explain`` shows, and why a query came back empty.

``build_explain`` hydrates each retriever's top hits (path, lines, symbol) and pairs every
result with its ranks and fusion shares; ``why_empty`` tells an empty index from a query
whose words match nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmc.search.trace import Trace
from llmc.search.types import (
    ROUTE_CATEGORY,
    Candidate,
    Explain,
    ExplainHit,
    RankedList,
    SearchResult,
)

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources

EXPLAIN_HITS = 10  # hits shown per ranked list


def build_explain(
    sources: Sources,
    lists: Sequence[RankedList],
    found: Sequence[tuple[Candidate, SearchResult]],
    groups: Sequence[Sequence[str]],
    trace: Trace,
) -> Explain:
    with trace.stage("explain"):
        spans = sources.spans(list({h.span_id for r in lists for h in r.hits[:EXPLAIN_HITS]}))
        hydrated: dict[str, tuple[ExplainHit, ...]] = {}
        for ranked in lists:
            hits = []
            for rank, hit in enumerate(ranked.hits[:EXPLAIN_HITS], start=1):
                s = spans.get(hit.span_id)
                hits.append(
                    ExplainHit(
                        rank,
                        hit.span_id,
                        hit.score,
                        s.span.path if s else "(no longer indexed)",
                        s.span.start_line if s else 0,
                        s.span.end_line if s else 0,
                        s.span.symbol if s else "",
                    )
                )
            hydrated[ranked.name] = tuple(hits)
        return Explain(
            query_terms=tuple(g[0] for g in groups),
            lists=hydrated,
            fusion=sources.cfg.search.fusion,
            contributions=tuple(dict(c.contributions) for c, _ in found),
            ranks=tuple(dict(c.ranks) for c, _ in found),
            stages=tuple(trace.notes),
        )


def why_empty(sources: Sources, trace: Trace) -> None:
    """One warning that says why nothing was found."""
    if sources.span_count() == 0:
        trace.warn("the index is empty: nothing was indexed (see `llmc index -v`)")
    elif not sources.cfg.search.dense or len(sources.dense_off) == len(ROUTE_CATEGORY):
        trace.warn("no indexed span matches the query's words (dense search is off)")
    elif set(ROUTE_CATEGORY.values()) <= sources.dense_empty | set(sources.dense_off):
        trace.warn("no indexed span matches the query's words (no span is embedded yet)")
    else:
        trace.warn("no results")


__all__ = ["EXPLAIN_HITS", "build_explain", "why_empty"]
