"""A daemon's search answer back as the typed ``SearchResponse`` the CLI renders.

`llmc search` without ``--json`` asks the daemon with ``extras: true`` (highlight terms,
and per result ``span_id``, ``qualname``, ``category``, ``snippet_start_line``), so what
it prints from a daemon's answer is what it prints from its own search: the same lines,
snippets and highlights, and with ``--explain`` the same trace. Rounding is the JSON's
(scores to 6 places, timings to 3), invisible at the precision the CLI prints.
"""

from __future__ import annotations

from typing import Any

from llmc.search.hyde.diagnostics import HydeReport, Hypothesis, ThresholdStep
from llmc.search.types import (
    Explain,
    ExplainHit,
    RouteDecision,
    SearchResponse,
    SearchResult,
    StageNote,
)


def _route(d: dict[str, Any]) -> RouteDecision:
    return RouteDecision(
        intent=d["intent"],
        p_code=float(d["p_code"]),
        weights=dict(d.get("weights", {})),
        confidence=float(d["confidence"]),
        reasons=tuple(d.get("reasons", ())),
        source=d.get("source", "router"),
        list_weights=dict(d.get("list_weights", {})),
    )


def _result(d: dict[str, Any]) -> SearchResult:
    return SearchResult(
        path=d["path"],
        start_line=int(d["start_line"]),
        end_line=int(d["end_line"]),
        symbol=d.get("symbol") or "",
        kind=d.get("kind") or "",
        lang=d.get("lang") or "",
        score=float(d["score"]),
        sources=tuple(d.get("sources", ())),
        snippet=d.get("snippet") or "",
        span_id=int(d.get("span_id", -1)),
        qualname=d.get("qualname") or "",
        category=d.get("category") or "",
        snippet_start_line=int(d.get("snippet_start_line") or d["start_line"]),
    )


def _explain(d: dict[str, Any]) -> Explain:
    per_result = d.get("results", [])
    return Explain(
        query_terms=tuple(d.get("query_terms", ())),
        lists={
            name: tuple(ExplainHit(**hit) for hit in hits)
            for name, hits in d.get("lists", {}).items()
        },
        fusion=d.get("fusion", ""),
        contributions=tuple(dict(r.get("contributions", {})) for r in per_result),
        ranks=tuple(dict(r.get("ranks", {})) for r in per_result),
        stages=tuple(StageNote(s["stage"], s["note"]) for s in d.get("stages", ())),
    )


def _hyde(d: dict[str, Any]) -> HydeReport:
    return HydeReport(
        used=bool(d["used"]),
        reason=d.get("reason", ""),
        model=d.get("model", ""),
        hypotheses=tuple(Hypothesis(**h) for h in d.get("hypotheses", ())),
        thresholds=tuple(ThresholdStep(**t) for t in d.get("thresholds", ())),
        expansion=dict(d.get("expansion", {})),
        llm_ms=float(d.get("llm_ms", 0.0)),
        took_ms=float(d.get("took_ms", 0.0)),
        dense_best=d.get("dense_best"),
    )


def search_response(data: dict[str, Any]) -> SearchResponse:
    """The ``SearchResponse`` of a daemon's ``/v1/search`` answer (asked with ``extras``)."""
    return SearchResponse(
        query=data["query"],
        route=_route(data["route"]),
        results=tuple(_result(r) for r in data.get("results", ())),
        timings_ms=dict(data.get("timings_ms", {})),
        took_ms=float(data.get("took_ms", 0.0)),
        warnings=tuple(data.get("warnings", ())),
        highlight_terms=tuple(data.get("highlight_terms", ())),
        explain=_explain(data["explain"]) if data.get("explain") else None,
        hyde=_hyde(data["hyde"]) if data.get("hyde") else None,
    )


__all__ = ["search_response"]
