"""What a request (REST ``config``, and through it `llmc search` talking to a daemon) may set.

A request may change how one query is answered, never what the daemon is: stage switches,
depths, weights, the ranker and fusion choice, HyDE and rerank gates. Keys that name a
host, a URL, a path, a model, a device, a runtime, a prefix, thread counts, or anything
else that would load a model or open a session are not on the list (``QUERY_KEYS``): a
value for one of them that differs from the daemon's own is refused, naming the key.
Values are checked against the config's declared types and against the bounds below, so
a request cannot ask for a million candidates either.

``request_overrides(cfg, config)`` returns the typed values that differ from ``cfg``.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any

from llmc.config import Config, _coerce, _hints
from llmc.errors import ConfigError, ConfigMismatch

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


class RequestConfigError(ConfigError):
    """A request's ``config`` names a key it may not set, or a bad value; ``key`` names it."""

    def __init__(self, key: str, message: str, refused: bool = False):
        super().__init__(message)
        self.key = key
        self.refused = refused  # the key itself may not be set (not just this value)


def _check(key: str, value: Any, tp: Any, rule: Rule) -> Any:
    """``value`` typed as ``tp`` (JSON carries types: no text parsing) and within ``rule``."""
    try:
        typed = _coerce(value, tp, "request config", key, from_text=False)
    except ConfigError as e:
        raise RequestConfigError(key, str(e)) from None
    items = typed if isinstance(typed, list) else [typed]
    for item in items:
        if rule.choices and item not in rule.choices:
            raise RequestConfigError(
                key,
                f"request config: {key} must be one of {', '.join(rule.choices)}, got {item!r}",
            )
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            bad = isinstance(item, float) and not math.isfinite(item)
            if (
                bad
                or (rule.lo is not None and item < rule.lo)
                or (rule.hi is not None and item > rule.hi)
            ):
                raise RequestConfigError(
                    key,
                    f"request config: {key} must be between {rule.lo:g} and {rule.hi:g}, got {item!r}",
                )
    return typed


def request_overrides(cfg: Config, config: typing.Mapping[str, Any]) -> dict[str, Any]:
    """The typed values of ``config`` (``section.key`` → value) that differ from ``cfg``.

    Raises ``RequestConfigError`` for a key outside ``QUERY_KEYS`` whose value differs from
    ``cfg``'s (clients such as `llmc search` send their whole config; equal values change
    nothing) or for a bad value, and ``ConfigMismatch`` for a key this llmc does not know
    (another version: its client works in-process instead).
    """
    out: dict[str, Any] = {}
    for key, value in sorted(config.items()):
        if not isinstance(key, str):
            raise RequestConfigError(str(key), f"config key {key!r} is not a string")
        section = key.split(".", 1)[0]
        if section in DAEMON_SECTIONS:
            raise RequestConfigError(
                key, f"config key {key!r} cannot be set per request", refused=True
            )
        if not cfg.has(key):
            raise ConfigMismatch(
                f"this daemon does not know config key {key!r} (it runs another llmc "
                "version; `llmc daemon stop` and start it again)"
            )
        rule = QUERY_KEYS.get(key)
        if rule is None:
            if value != cfg.get(key):
                raise RequestConfigError(
                    key,
                    f"config key {key!r} cannot be set per request (it configures the daemon, "
                    "not a query; see docs/daemon-api.md for the keys a request may set)",
                    refused=True,
                )
            continue
        tp = _hints(type(getattr(cfg, section)))[key.split(".", 1)[1]]
        typed = _check(key, value, tp, rule)
        if typed != cfg.get(key):
            out[key] = typed
    return out


__all__ = ["DAEMON_SECTIONS", "QUERY_KEYS", "RequestConfigError", "request_overrides"]
