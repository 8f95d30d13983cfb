"""Records the search stages pass along: frozen dataclasses, never dicts of dicts.

``SearchResponse.to_json()`` is the `llmc search --json` object (one per query):
``{query, route, results: [{path, start_line, end_line, symbol, kind, lang, score, sources,
snippet}], timings_ms, took_ms, warnings}`` plus ``explain`` when it was asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.hyde.diagnostics import HydeReport

CODE_ROUTE = "code"
DOCS_ROUTE = "docs"
MIXED_ROUTE = "mixed"
INTENTS = (CODE_ROUTE, DOCS_ROUTE, MIXED_ROUTE)
TESTS = "tests"  # a weight, not a route: test files within the code route

# Routes name what the user asks for ("docs"); store categories name what a span is ("doc").
ROUTE_CATEGORY = {CODE_ROUTE: "code", DOCS_ROUTE: "doc"}
CATEGORY_ROUTE = {category: route for route, category in ROUTE_CATEGORY.items()}
BM25, DENSE, HYDE, EXACT = "bm25", "dense", "hyde", "exact"  # the retrievers


def list_name(retriever: str, category: str | None = None) -> str:
    """The name of one ranked list: ``bm25.code``, ``dense.doc``, ``exact``."""
    return f"{retriever}.{category}" if category else retriever


@dataclass(frozen=True)
class RouteDecision:
    """Where a query should look, how sure the router is, and why.

    ``weights`` holds one weight per route (``code``, ``docs``); a route with weight 0 is
    not searched unless the favoured route finds nothing (see ``pipeline``). ``tests``
    further weighs test files (test dirs, ``test_*.py``, ``*.spec.ts``...) in the code route.
    ``list_weights`` are the fusion weights per ranked list (route weight times retriever
    weight), filled in by the pipeline once it knows which lists ran.
    """

    intent: str  # code | docs | mixed
    p_code: float
    weights: Mapping[str, float]
    confidence: float
    reasons: tuple[str, ...] = ()
    source: str = "router"  # router | flag | config | off
    list_weights: Mapping[str, float] = field(default_factory=dict)

    def weight(self, route: str) -> float:
        return float(self.weights.get(route, 0.0))

    def to_json(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "p_code": round(self.p_code, 4),
            "confidence": round(self.confidence, 4),
            "weights": {k: round(v, 4) for k, v in self.weights.items()},
            "list_weights": {k: round(v, 4) for k, v in self.list_weights.items()},
            "reasons": list(self.reasons),
            "source": self.source,
        }


@dataclass(frozen=True)
class Hit:
    """One entry of a ranked list; ranks are 1-based."""

    span_id: int
    score: float


@dataclass(frozen=True)
class RankedList:
    """What one retriever returned for one category, best first.

    ``category`` is None for a list over both categories (merged routes, ``exact``)."""

    retriever: str  # bm25 | dense | hyde | exact
    category: str | None
    hits: tuple[Hit, ...]
    ms: float = 0.0

    @property
    def name(self) -> str:
        """The list's name in traces and fusion weights: ``bm25.code``, ``exact``."""
        return list_name(self.retriever, self.category)

    @property
    def top_score(self) -> float:
        return self.hits[0].score if self.hits else 0.0


@dataclass(frozen=True)
class Candidate:
    """A fused span: its rank and score in each list that had it, and each list's share."""

    span_id: int
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)
    contributions: Mapping[str, float] = field(default_factory=dict)
    pinned: bool = False

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(sorted(self.ranks, key=lambda n: (self.ranks[n], n)))

    @property
    def best_rank(self) -> int:
        return min(self.ranks.values()) if self.ranks else 1 << 30


@dataclass(frozen=True)
class SearchResult:
    """One answer: a span with its place in the repo, a snippet and how it got here."""

    path: str  # relative to the repo root, posix separators
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    symbol: str
    kind: str
    lang: str
    score: float
    sources: tuple[str, ...]
    snippet: str
    span_id: int
    qualname: str = ""
    category: str = ""
    snippet_start_line: int = 0  # first line of the snippet in the file

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "symbol": self.symbol,
            "kind": self.kind,
            "lang": self.lang,
            "score": round(self.score, 6),
            "sources": list(self.sources),
            "snippet": self.snippet,
        }


@dataclass(frozen=True)
class ExplainHit:
    """One retriever hit, hydrated for ``--explain``."""

    rank: int
    span_id: int
    score: float
    path: str
    start_line: int
    end_line: int
    symbol: str

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "span_id": self.span_id,
            "score": round(self.score, 6),
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "symbol": self.symbol,
        }


@dataclass(frozen=True)
class StageNote:
    """What one stage decided or changed, in words, for the trace."""

    stage: str
    note: str


@dataclass(frozen=True)
class Explain:
    """The trace of one query: each list's top hits, fusion shares, what each stage did."""

    query_terms: tuple[str, ...]
    lists: Mapping[str, tuple[ExplainHit, ...]]
    fusion: str
    contributions: tuple[Mapping[str, float], ...]  # one per result, same order
    ranks: tuple[Mapping[str, int], ...]  # one per result, same order
    stages: tuple[StageNote, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "query_terms": list(self.query_terms),
            "fusion": self.fusion,
            "lists": {name: [h.to_json() for h in hits] for name, hits in self.lists.items()},
            "results": [
                {
                    "ranks": dict(r),
                    "contributions": {k: round(v, 6) for k, v in c.items()},
                }
                for r, c in zip(self.ranks, self.contributions, strict=True)
            ],
            "stages": [{"stage": s.stage, "note": s.note} for s in self.stages],
        }


@dataclass(frozen=True)
class Match:
    """How well the index matches one query (``--json``'s ``match``)."""

    term_share: float  # content words some span holds / content words (1.0: no such word)
    terms: int  # content words of the query
    dense_best: float | None  # the best cosine in the dense lists; None: no dense list
    weak: bool

    def line(self) -> str:
        """The warning a weak match gets."""
        said = (
            "none of the query's words is in the index"
            if self.term_share == 0
            else f"{self.term_share:.0%} of the query's words are in the index"
        )
        close = f"; the closest span's similarity is {self.dense_best:.2f}" if (
            self.dense_best is not None
        ) else ""  # fmt: skip
        return f"no good match: {said}{close}. The results are the nearest guesses"

    def to_json(self) -> dict[str, Any]:
        return {
            "term_share": round(self.term_share, 3),
            "terms": self.terms,
            "dense_best": None if self.dense_best is None else round(self.dense_best, 4),
            "weak": self.weak,
        }


@dataclass(frozen=True)
class SearchResponse:
    """Everything one query produced; ``to_json`` is the `--json` object."""

    query: str
    route: RouteDecision
    results: tuple[SearchResult, ...]
    timings_ms: Mapping[str, float]
    took_ms: float
    warnings: tuple[str, ...] = ()
    highlight_terms: tuple[str, ...] = ()
    explain: Explain | None = None
    hyde: HydeReport | None = None  # when the HyDE stage considered the query
    match: Match | None = None  # how well the index matches the query (match.py)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query,
            "route": self.route.to_json(),
            "results": [r.to_json() for r in self.results],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "took_ms": round(self.took_ms, 3),
            "warnings": list(self.warnings),
        }
        if self.match is not None:
            out["match"] = self.match.to_json()
        if self.explain is not None:
            out["explain"] = self.explain.to_json()
        if self.hyde is not None and (self.hyde.used or self.explain is not None):
            out["hyde"] = self.hyde.to_json()  # HyDE's diagnostics; why not, with --explain
        return out


__all__ = [
    "BM25",
    "CATEGORY_ROUTE",
    "CODE_ROUTE",
    "DENSE",
    "EXACT",
    "HYDE",
    "DOCS_ROUTE",
    "INTENTS",
    "Match",
    "MIXED_ROUTE",
    "ROUTE_CATEGORY",
    "TESTS",
    "Candidate",
    "Explain",
    "ExplainHit",
    "Hit",
    "RankedList",
    "RouteDecision",
    "SearchResponse",
    "SearchResult",
    "StageNote",
    "list_name",
]
