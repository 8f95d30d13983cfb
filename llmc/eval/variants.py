"""Named pipeline variants: what ``llmc eval --ablate`` and ``--variants`` run.

A variant is a function from a (deep-copied) Config to the Config to search with, plus
the config keys it needs: a variant whose keys do not exist (a stage not built yet) is
skipped with a note, so the registry can name later stages ahead of time.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmc.config import Config
from llmc.errors import EvalError

DEFAULT = "default"
SOURCE = "eval variant"  # what ``llmc config``-style sources say of a variant's values


@dataclass(frozen=True)
class Variant:
    name: str
    apply: Callable[[Config], Config]
    requires: tuple[str, ...]
    description: str

    def __call__(self, cfg: Config) -> Config:
        return self.apply(cfg)


VARIANTS: dict[str, Variant] = {}

# Switches of the stages around retrieval. The single-retriever baselines turn off every
# one that exists, so "bm25-only" is BM25 alone whatever later stages get added.
CODE_IN_TOP = "search.code_in_top"  # an int: the baselines set it to 0 (``_baseline``)
FILE_BM25 = "search.file_bm25_weight"  # file-level answers: the baselines' files come
# from their span list alone (0, ``_baseline``); ``bm25-file`` is the whole-file baseline
FILE_RANKER = "search.file_ranker"  # ... in that order, no learned file ranker ("fusion")
EXTRA_STAGES = (
    "search.exact_symbol",
    "search.graph",
    "search.hyde",
    "search.rerank",
    "search.llm_rerank",
)


def register_variant(
    name: str, requires: Sequence[str] = (), description: str = ""
) -> Callable[[Callable[[Config], Config]], Callable[[Config], Config]]:
    """Decorator: add ``fn(cfg) -> cfg`` to VARIANTS under ``name``."""

    def wrap(fn: Callable[[Config], Config]) -> Callable[[Config], Config]:
        VARIANTS[name] = Variant(name, fn, tuple(requires), description or (fn.__doc__ or ""))
        return fn

    return wrap


def _stages_off(cfg: Config, *keys: str) -> Config:
    for key in keys:
        if cfg.has(key):
            cfg.set(key, False, SOURCE)
    return cfg


def _baseline(cfg: Config, *keys: str) -> Config:
    """``keys`` off, and no code result moved up for code intent: a baseline ranks its
    list as it is."""
    if cfg.has(CODE_IN_TOP):
        cfg.set(CODE_IN_TOP, 0, SOURCE)
    if cfg.has(FILE_BM25):
        cfg.set(FILE_BM25, 0.0, SOURCE)
    if cfg.has(FILE_RANKER):
        cfg.set(FILE_RANKER, "fusion", SOURCE)
    return _stages_off(cfg, *keys)


@register_variant(DEFAULT, description="the configured pipeline")
def _default(cfg: Config) -> Config:
    return cfg


@register_variant(
    "bm25-only", ("search.bm25", "search.dense", "search.ranker"), "BM25 alone, no other stage"
)
def _bm25_only(cfg: Config) -> Config:
    cfg.set("search.bm25", True, SOURCE)
    cfg.set("search.ranker", "fusion", SOURCE)  # one list, ranked as it is
    return _baseline(cfg, "search.dense", "search.routing", *EXTRA_STAGES)


@register_variant(
    "dense-only", ("search.bm25", "search.dense", "search.ranker"), "dense alone, no other stage"
)
def _dense_only(cfg: Config) -> Config:
    cfg.set("search.dense", True, SOURCE)
    cfg.set("search.ranker", "fusion", SOURCE)  # one list, ranked as it is
    return _baseline(cfg, "search.bm25", "search.routing", *EXTRA_STAGES)


# What a user would build from the same parts: BM25 and dense, top 100 of each over every
# span, fused by RRF (k = 60); no routing, exact-symbol pinning, test-file weighting,
# per-file cap, learned weights, learned ranker or second stage.
RRF_BASELINE = {
    "search.ranker": "fusion",
    "search.bm25": True,
    "search.dense": True,
    "search.routing": False,
    "search.route": "auto",
    "search.merge_routes": True,
    "search.bm25_depth": 100,
    "search.dense_depth": 100,
    "search.fusion": "rrf",
    "search.rrf_k": 60,
    "search.bm25_weight": 1.0,
    "search.dense_weight": 1.0,
    "search.max_per_file": 0,
    "search.test_weight": 1.0,
    "learn.use_tuned": False,
}


@register_variant("rrf", tuple(RRF_BASELINE), "plain BM25 + dense top 100, RRF k=60, nothing else")
def _rrf_baseline(cfg: Config) -> Config:
    for key, value in RRF_BASELINE.items():
        cfg.set(key, value, SOURCE)
    return _baseline(cfg, *EXTRA_STAGES)


@register_variant("no-routing", ("search.routing",), "every route searched, unweighted")
def _no_routing(cfg: Config) -> Config:
    return _stages_off(cfg, "search.routing")


def _register_stage_off(name: str, key: str, description: str) -> None:
    register_variant(name, (key,), description)(lambda cfg: _stages_off(cfg, key))


_register_stage_off("no-exact-symbol", "search.exact_symbol", "no exact-symbol fast path")
_register_stage_off("no-graph", "search.graph", "no graph expansion or priors")
_register_stage_off("no-rerank", "search.rerank", "no cross-encoder rerank")
_register_stage_off("no-llm-rerank", "search.llm_rerank", "no LLM listwise rerank")
_register_stage_off("no-hyde", "search.hyde", "no HyDE query expansion")
_register_stage_off("untuned", "learn.use_tuned", "without .llmc/tuned/ (llmc tune)")


@register_variant("no-code-in-top", (CODE_IN_TOP,), "no code result moved up for code intent")
def _no_code_in_top(cfg: Config) -> Config:
    cfg.set(CODE_IN_TOP, 0, SOURCE)
    return cfg


# Second-stage trials: each stage on (as default where the default has it on), and each
# graph prior on at a trial weight, so `--ablate` measures what the defaults leave off.
PRIOR_TRIALS = {"mutual_support": 0.1, "degree_prior": 0.1, "pagerank_prior": 0.2}


def _register_stage_on(name: str, keys: dict[str, Any], description: str) -> None:
    def apply(cfg: Config) -> Config:
        for key, value in keys.items():
            cfg.set(key, value, SOURCE)
        return cfg

    register_variant(name, tuple(keys), description)(apply)


_register_stage_on("learned", {"search.ranker": "learned"}, "the learned ranker ranks the pool")
_register_stage_on("fusion", {"search.ranker": "fusion"}, "hand-set fusion weights rank (RRF)")
# The learned default before the late RRF blend (docs/reports/2026-11-23-late-blend-rrf.md):
# the trees' order alone, under the results' per-file cap of 3.
_register_stage_on(
    "learned-trees",
    {
        "search.ranker": "learned",
        "search.ranker_rrf_weight": 0.0,
        "search.ranker_max_per_file": 3,
        CODE_IN_TOP: 0,
    },
    "the learned ranker's trees alone, per-file cap 3 (the default before the RRF blend)",
)
_register_stage_on("ranker-auto", {"search.ranker": "auto"}, "learned ranker unless docs intent")
_register_stage_on("graph", {"search.graph": True}, "graph expansion on, priors as configured")
for _prior, _weight in PRIOR_TRIALS.items():
    _register_stage_on(
        f"graph-{_prior.split('_')[0]}",
        {"search.graph": True, f"expand.{_prior}": _weight},
        f"graph expansion with expand.{_prior} = {_weight}",
    )
_register_stage_on("rerank", {"search.rerank": True}, "cross-encoder rerank on")
_register_stage_on(
    "rerank-replace",
    {"search.rerank": True, "rerank.blend": "replace"},
    "cross-encoder rerank, its score alone ordering the top k",
)
_register_stage_on(
    "llm-rerank", {"search.llm_rerank": True}, "LLM listwise rerank on, behind its gate"
)
_register_stage_on(
    "llm-rerank-always",
    {"search.llm_rerank": True, "llm_rerank.always": True},
    "LLM listwise rerank of every query (ungated)",
)


@register_variant(
    "hyde", ("search.hyde", "hyde.mode", "hyde.intents"), "gated HyDE for every intent"
)
def _hyde_all_intents(cfg: Config) -> Config:
    cfg.set("search.hyde", True, SOURCE)
    cfg.set("hyde.mode", "auto", SOURCE)
    cfg.set("hyde.intents", ["code", "docs", "mixed"], SOURCE)
    return cfg


@register_variant("hyde-always", ("search.hyde", "hyde.mode"), "HyDE for every query, ungated")
def _hyde_always(cfg: Config) -> Config:
    cfg.set("search.hyde", True, SOURCE)
    cfg.set("hyde.mode", "always", SOURCE)
    return cfg


def available_variants(cfg: Config) -> list[str]:
    """Registered variants whose config keys all exist, in registration order."""
    return [n for n, v in VARIANTS.items() if all(cfg.has(k) for k in v.requires)]


def variant_config(cfg: Config, name: str) -> Config:
    if name not in VARIANTS:
        raise EvalError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")
    variant = VARIANTS[name]
    missing = [k for k in variant.requires if not cfg.has(k)]
    if missing:
        raise EvalError(f"variant {name!r} needs config key(s) {', '.join(missing)}")
    return variant(copy.deepcopy(cfg))


__all__ = [
    "DEFAULT",
    "PRIOR_TRIALS",
    "RRF_BASELINE",
    "VARIANTS",
    "Variant",
    "available_variants",
    "register_variant",
    "variant_config",
]
