"""The second stage after fusion: graph neighbours, cross-encoder, LLM listwise rerank.

Each step is switched by ``search.graph``, ``search.rerank``, ``search.llm_rerank``; a
switched-off step returns the candidates as they are and costs nothing (not even an
import). The cross-encoder and the LLM also ask the query's latency budget (``budget.py``):
a stage that was not asked for and whose expected cost does not fit what is left is skipped
with a trace note, before any model loads; each one that runs teaches the cost model. A missing graph or model degrades to the order it was given, with one warning in
the trace. The ranking logic lives in ``expand.py``, ``rerank.py`` and ``llm_rerank.py``;
this module hands each one what it needs and writes down what it did.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from llmc.errors import LlmcError, ModelError
from llmc.search import budget, fusion, router
from llmc.search.trace import Trace
from llmc.search.types import CATEGORY_ROUTE, CODE_ROUTE, Candidate, RouteDecision
from llmc.search.weights import tests_weight
from llmc.types import StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources


def graph_stage(
    sources: Sources, text: str, decision: RouteDecision, fused: list[Candidate], trace: Trace
) -> list[Candidate]:
    """Neighbours of the top results over calls/imports/tests/mentions, graph priors."""
    cfg = sources.cfg
    if not cfg.search.graph or not fused:
        return fused
    from llmc.graph import load_graph
    from llmc.search import expand

    with trace.stage("graph"):
        try:
            graph = load_graph(sources.root)
        except LlmcError as e:  # GraphMissingError: no graph, or unreadable
            trace.warn(f"{e}: graph expansion is off")
            trace.note("graph", str(e) if "skipped" in str(e) else f"skipped: {e}")
            return fused
        sims = None
        if cfg.search.dense:
            sims = expand.SpanVectors(
                lambda category: sources.query_vector(text, category, trace),
                sources.store.vectors,
            ).similarities
        tests = tests_weight(decision)

        def weight(s: StoredSpan) -> float:
            w = decision.weight(CATEGORY_ROUTE.get(s.span.category, CODE_ROUTE))
            return w * tests if router.is_test_path(s.span.path) else w

        head = fused[: cfg.expand.top_n * 4]  # the top results as shown: capped
        paths = sources.paths([c.span_id for c in head])
        shown, _ = fusion.diversify(head, paths, cfg.search.max_per_file)
        out = expand.expand(
            fused,
            graph,
            sources.store,
            cfg.expand,
            sims,
            query_words=frozenset(w.lower() for w in re.findall(r"\w+", text)),
            span_weight=weight,
            sources=shown,
        )
        touched = [a.span_id for a in out.added] + [a.source_id for a in out.added]
        named = sources.describe(touched + [b.span_id for b in out.boosts])
    for line in out.notes(lambda i: named.get(i, f"span {i}")):
        trace.note("graph", line)
    return list(out.candidates)


def rerank_stage(
    sources: Sources, text: str, fused: list[Candidate], trace: Trace,
    spend: budget.Budget | None = None,
) -> list[Candidate]:  # fmt: skip
    """The cross-encoder over the top ``rerank.top_k``, always on the user's own query,
    when it was asked for or its expected cost fits the budget."""
    cfg = sources.cfg
    rcfg = cfg.rerank
    if not cfg.search.rerank or len(fused) < 2:
        return fused
    pairs = min(rcfg.top_k, len(fused))
    if spend is not None:
        verdict = spend.allow(
            "rerank", spend.expect(budget.RERANK_PAIR, pairs), budget.explicit(cfg, "search.rerank")
        )
        if not verdict.run:
            trace.note("rerank", verdict.note)
            return fused
    from llmc.models.reranker import span_passage
    from llmc.search import rerank

    try:
        with trace.stage("load"):  # the first query of a process loads the model
            model = sources.models.reranker(rcfg)
        with trace.stage("rerank"), sources.threads.torch():
            spans = sources.spans([c.span_id for c in fused[: rcfg.top_k]])
            passages = {i: span_passage(s.span) for i, s in spans.items()}
            out = rerank.rerank(
                text, fused, passages, model, rcfg.top_k, rcfg.blend, rcfg.blend_weight
            )
    except ModelError as e:
        trace.warn(f"{e}: rerank is off")
        return fused
    if spend is not None and out.scored:
        spend.observe(budget.RERANK_PAIR, out.ms / out.scored)
    named = sources.describe([m[0] for m in out.moves[:5]])
    moved = ", ".join(f"{named.get(i, i)} #{a}→#{b}" for i, a, b in out.moves[:5])
    trace.note(
        "rerank",
        f"{model.model_id} ({rcfg.blend}) scored the top {out.scored} in {out.ms:.0f} ms"
        + (f"; moved {moved}" if moved else "; order kept"),
    )
    return list(out.candidates)


def llm_rerank_stage(
    sources: Sources, text: str, fused: list[Candidate], trace: Trace,
    spend: budget.Budget | None = None,
) -> list[Candidate]:  # fmt: skip
    """The local LLM reorders the top few, behind a gate and the query's latency budget
    (the call itself has ``llm_rerank.budget_ms`` as its timeout)."""
    cfg = sources.cfg
    lcfg = cfg.llm_rerank
    if not cfg.search.llm_rerank or len(fused) < 2:
        return fused
    from llmc.search import llm_rerank

    why = llm_rerank.gate(text, fused, lcfg)
    if why is None:
        trace.note("llm_rerank", "gate closed: short simple query, top scores apart")
        return fused
    from llmc.models.llm import get_llm

    llm = get_llm(cfg.llm)
    unit = f"{budget.LLM_RERANK_CALL}:{llm.provider}"
    if spend is not None:
        asked = lcfg.always or budget.explicit(cfg, "search.llm_rerank")
        verdict = spend.allow("llm_rerank", spend.expect(unit), asked)
        if not verdict.run:
            trace.note("llm_rerank", verdict.note)
            return fused
    with trace.stage("llm_rerank"):
        ids = [c.span_id for c in fused if not c.pinned][: lcfg.top_n]
        out = llm_rerank.llm_rerank(text, fused, sources.spans(ids), llm, lcfg, why)
    if spend is not None and (out.applied or out.answer or "timeout" in out.reason):
        spend.observe(unit, out.ms)  # a call was made: what it cost
    if out.unavailable:
        trace.warn(f"LLM rerank skipped: {out.reason}")
    answer = f"; answer {out.answer!r}" if out.answer else ""
    trace.note("llm_rerank", f"{out.reason} ({out.ms:.0f} ms){answer}")
    return list(out.candidates)


__all__ = ["graph_stage", "llm_rerank_stage", "rerank_stage"]
