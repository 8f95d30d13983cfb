"""The query-time keys and their bounds: what a request may set (``llmc.request_config``)
and, with the same bounds, what a repository's ``llmc.toml`` may set of them
(``llmc.repo_config``). Plain data with no import from llmc, so both can read it without an
import circle through ``llmc.config``."""

from __future__ import annotations

from dataclasses import dataclass

# Sections a request never reaches, whatever the value (they govern the daemon and its index).
DAEMON_SECTIONS = ("index", "daemon", "eval")


@dataclass(frozen=True)
class Rule:
    """Bounds (inclusive) for numbers, the allowed strings for a choice or a list."""

    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()


def _n(lo: float, hi: float) -> Rule:
    return Rule(lo, hi)


def _one_of(*choices: str) -> Rule:
    return Rule(choices=choices)


BOOL = Rule()
WEIGHT = _n(0, 100)
SHARE = _n(0, 1)
COSINE = _n(-1, 1)
DEPTH = _n(1, 1000)
COUNT = _n(0, 1000)

QUERY_KEYS: dict[str, Rule] = {
    # search: the stages and how their lists are fused and ranked
    "search.k": DEPTH,
    "search.route": _one_of("auto", "code", "docs", "mixed"),
    "search.bm25_depth": DEPTH,
    "search.dense_depth": DEPTH,
    "search.fusion": _one_of("rrf", "weighted", "max"),
    "search.rrf_k": _n(1, 10_000),
    "search.max_per_file": COUNT,
    "search.exact_symbol": BOOL,
    "search.snippet_lines": COUNT,
    "search.bm25": BOOL,
    "search.dense": BOOL,
    "search.routing": BOOL,
    "search.graph": BOOL,
    "search.rerank": BOOL,
    "search.llm_rerank": BOOL,
    "search.hyde": BOOL,
    "search.dense_floor": COSINE,
    "search.bm25_weight": WEIGHT,
    "search.dense_weight": WEIGHT,
    "search.exact_weight": WEIGHT,
    "search.exact_max": COUNT,
    "search.route_drop_confidence": SHARE,
    "search.min_route_weight": SHARE,
    "search.merge_routes": BOOL,
    "search.test_weight": WEIGHT,
    "search.max_query_chars": _n(1, 10_000),
    "search.ranker": _one_of("learned", "fusion", "auto"),
    "search.ranker_depth": DEPTH,
    "search.ranker_rrf_weight": SHARE,
    "search.ranker_blend_k": _n(0, 10_000),
    "search.ranker_max_per_file": COUNT,
    "search.code_in_top": _n(0, 100),
    "search.code_in_top_p": SHARE,
    "search.budget_ms": _n(0, 60_000),  # which costly stages fit (their models: the daemon's)
    "search.profile": _one_of("auto", "cpu", "gpu"),  # which stages are candidates, no device
    # graph expansion and priors (switch: search.graph)
    "expand.top_n": _n(0, 100),
    "expand.edge_types": _one_of("defines", "calls", "imports", "inherits", "tests", "mentions"),
    "expand.alpha": WEIGHT,
    "expand.per_source": _n(0, 100),
    "expand.min_confidence": SHARE,
    "expand.hub_degree": _n(0, 1_000_000),
    "expand.semantic_floor": COSINE,
    "expand.mutual_support": WEIGHT,
    "expand.degree_prior": WEIGHT,
    "expand.pagerank_prior": WEIGHT,
    # cross-encoder rerank (switch: search.rerank; the model is the daemon's)
    "rerank.top_k": _n(1, 100),
    "rerank.blend": _one_of("blend", "replace"),
    "rerank.blend_weight": SHARE,
    # LLM listwise rerank (switch: search.llm_rerank; the LLM is the daemon's)
    "llm_rerank.top_n": _n(1, 20),
    "llm_rerank.always": BOOL,
    "llm_rerank.close_margin": SHARE,
    "llm_rerank.min_query_words": COUNT,
    "llm_rerank.budget_ms": _n(0, 30_000),
    "llm_rerank.snippet_lines": _n(0, 100),
    "llm_rerank.max_tokens": _n(1, 256),
    # HyDE (switch: search.hyde; the LLM is the daemon's)
    "hyde.mode": _one_of("auto", "always"),
    "hyde.intents": _one_of("code", "docs", "mixed"),
    "hyde.dense_below": COSINE,
    "hyde.n": _n(1, 4),
    "hyde.temperature": _n(0, 2),
    "hyde.max_tokens": _n(1, 256),
    "hyde.timeout_s": _n(0, 30),
    "hyde.initial_threshold": COSINE,
    "hyde.threshold_step": SHARE,
    "hyde.min_threshold": COSINE,
    "hyde.weight": WEIGHT,
    "hyde.rocchio": BOOL,
    "hyde.rocchio_alpha": WEIGHT,
    "hyde.rocchio_beta": WEIGHT,
    "hyde.rocchio_max_df": SHARE,
    "hyde.max_terms": _n(0, 100),
    "hyde.cache": BOOL,
}


__all__ = ["DAEMON_SECTIONS", "QUERY_KEYS", "Rule"]
