"""The retrieve stage: every retriever's ranked list for one query.

BM25 and dense lists for each route the decision searches; when the favoured route finds
nothing above the floor, the other route is searched at full weight (so a non-empty index
never comes back empty with dense search on); adaptive HyDE adds its lists for vague
queries; the exact-symbol definitions come last as the ``exact`` list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmc.errors import StoreError
from llmc.search import retrieve
from llmc.search.exact import ExactMatch, pinned_categories
from llmc.search.trace import Trace
from llmc.search.types import (
    BM25,
    CODE_ROUTE,
    DENSE,
    DOCS_ROUTE,
    ROUTE_CATEGORY,
    RankedList,
    RouteDecision,
)

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search import hyde
    from llmc.search.sources import Sources


def retrieve_lists(
    sources: Sources,
    text: str,
    decision: RouteDecision,
    exact: ExactMatch,
    k: int,
    trace: Trace,
    hyde_stage: hyde.HydeStage | None,
    dense_text: str | None = None,
) -> tuple[list[RankedList], RouteDecision]:
    """The ranked lists for ``text`` and the decision, widened by a route fallback;
    ``dense_text``: what the embedders (and HyDE) read instead, when it differs (a long
    query's title and first paragraph, ``report.py``)."""
    dense_text = text if dense_text is None else dense_text
    lists: dict[str, list[RankedList]] = {}
    for r in (CODE_ROUTE, DOCS_ROUTE):
        if decision.weight(r) > 0:
            lists[r] = route_lists(sources, text, ROUTE_CATEGORY[r], k, trace, dense_text)
    favoured, other = (
        (CODE_ROUTE, DOCS_ROUTE) if decision.p_code >= 0.5 else (DOCS_ROUTE, CODE_ROUTE)
    )
    pinned_favoured = ROUTE_CATEGORY[favoured] in pinned_categories(sources, exact.pinned)
    floor = sources.cfg.search.dense_floor
    if not found(lists.get(favoured, []), pinned_favoured, floor) and decision.weight(other) < 1:
        if other not in lists:
            lists[other] = route_lists(sources, text, ROUTE_CATEGORY[other], k, trace, dense_text)
        why = f"fallback: the {favoured} route found nothing above the floor; {other} searched"
        decision = dataclasses.replace(
            decision,
            weights={**decision.weights, other: 1.0},
            reasons=(*decision.reasons, why),
        )
        trace.note("retrieve", why)
    out = [ranked for r in (CODE_ROUTE, DOCS_ROUTE) for ranked in lists.get(r, [])]
    if hyde_stage is not None:
        out = run_hyde(sources, hyde_stage, dense_text, decision, out, k, trace)
    if exact.fused:
        out.append(retrieve.exact_list(exact.fused))
    for ranked in out:
        top = f", top {ranked.top_score:.3f}" if ranked.hits else ""
        trace.note("retrieve", f"{ranked.name}: {len(ranked.hits)} hits{top}")
    return out, decision


def route_lists(
    sources: Sources, text: str, category: str, k: int, trace: Trace,
    dense_text: str | None = None,
) -> list[RankedList]:  # fmt: skip
    """BM25 and dense lists over ``category``'s spans (each when switched on and able);
    the embedder reads ``dense_text`` when given."""
    scfg = sources.cfg.search
    pool = scfg.ranker_depth if scfg.ranker != "fusion" else 0  # the learned ranker's pool

    def depth(configured: int) -> int:
        return max(configured, k, pool)

    out: list[RankedList] = []
    if scfg.bm25 and sources.lexical is not None:
        with trace.stage("bm25"):
            try:
                out.append(retrieve.bm25(sources.lexical, text, category, depth(scfg.bm25_depth)))
            except StoreError as e:
                trace.warn(f"{e}: BM25 skipped")
    if scfg.dense:
        vector = sources.query_vector(text if dense_text is None else dense_text, category, trace)
        if vector is not None:
            with trace.stage("dense"):
                out.append(retrieve.dense(sources.knn, vector, category, depth(scfg.dense_depth)))
    return out


def found(lists: Sequence[RankedList], pinned: bool, dense_floor: float) -> bool:
    """Whether a route found something: any BM25 hit, a dense hit at the floor, a pin."""
    for ranked in lists:
        if ranked.retriever == BM25 and ranked.hits:
            return True
        if ranked.retriever == DENSE and ranked.top_score >= dense_floor:
            return True
    return pinned


def run_hyde(
    sources: Sources,
    stage: hyde.HydeStage,
    text: str,
    decision: RouteDecision,
    lists: list[RankedList],
    k: int,
    trace: Trace,
) -> list[RankedList]:
    """Adaptive HyDE (search/hyde.py) for vague queries: ``hyde.*`` dense lists from
    hypothetical answers, BM25 lists re-searched with Rocchio terms. Never raises for
    the LLM: a missing, slow or babbling one leaves the lists as they are, one warning."""
    scfg = sources.cfg.search
    with trace.stage("hyde"):
        outcome = stage.run(
            text,
            decision,
            lists,
            store=sources.store,
            lexical=sources.lexical if scfg.bm25 else None,
            embed=sources.embed_passages,
            depth=max(scfg.dense_depth, scfg.bm25_depth, k),
            knn=sources.knn,
        )
    for note in outcome.notes:
        trace.note("hyde", note)
    for warning in outcome.warnings:
        trace.warn(warning)
    trace.hyde = outcome.report
    return outcome.lists


__all__ = ["found", "retrieve_lists", "route_lists", "run_hyde"]
