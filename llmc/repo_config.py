"""What a repository's own ``llmc.toml`` may set: ranking and indexing of its own files, no more.

A repository is untrusted input (someone else wrote it), and its ``llmc.toml`` comes with
every clone and pull. So the keys it may set are an explicit allow-list (``REPO_KEYS``), each
with bounds: which files are indexed and how they are cut into spans, how search weighs and
fuses what it finds, the graph's knobs. Every other key is the user's alone
(``USER_ONLY``, each with the reason): secret switches (the user's own untracked ``.env`` and
keys would be indexed and served), every model and model path (llmc would open and parse a
file the repository names), runtimes, devices, threads and memory sizes, anything that calls
an LLM or a paid model server or sets how much it may spend, the daemon's network and
limits, and where eval and learn data live. Such a key in ``llmc.toml`` is ignored with one
warning naming it, and `llmc config` shows it as ignored. A value out of its bounds is ignored
the same way. ``tests/test_repo_config.py`` fails on a config key in neither list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Bound:
    """Inclusive bounds for a number, the allowed strings for a choice (or a list's items),
    and for lists a length cap."""

    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    max_items: int = 1000

    def fits(self, value: Any) -> bool:
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) > self.max_items:
            return False
        for item in items:
            if self.choices and item not in self.choices:
                return False
            if isinstance(item, str) and len(item) > 1000:
                return False
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                if isinstance(item, float) and not math.isfinite(item):
                    return False
                if (self.lo is not None and item < self.lo) or (
                    self.hi is not None and item > self.hi
                ):
                    return False
        return True

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.lo is not None and self.hi is not None:
            return f"between {self.lo:g} and {self.hi:g}"
        return f"at most {self.max_items} items"


ANY = Bound()
WEIGHT = Bound(0, 100)
SHARE = Bound(0, 1)
COSINE = Bound(-1, 1)
DEPTH = Bound(1, 1000)
COUNT = Bound(0, 1000)
MIB = 1024 * 1024

REPO_KEYS: dict[str, Bound] = {
    # which of its files are indexed, and how they are cut into spans
    "index.include": ANY,
    "index.exclude": ANY,
    "index.skip_dirs": ANY,
    "index.max_file_size": Bound(1, 8 * MIB),
    "index.skip_generated": ANY,
    "index.skip_translations": ANY,
    "index.max_span_lines": Bound(1, 2000),
    "index.span_overlap_lines": Bound(0, 200),
    "index.window_lines": Bound(1, 2000),
    "index.languages": ANY,
    # how search weighs, fuses and ranks what it finds (models and LLM stages excepted)
    "search.k": DEPTH,
    "search.route": Bound(choices=("auto", "code", "docs", "mixed")),
    "search.bm25_depth": DEPTH,
    "search.dense_depth": DEPTH,
    "search.fusion": Bound(choices=("rrf", "weighted", "max")),
    "search.rrf_k": Bound(1, 10_000),
    "search.max_per_file": COUNT,
    "search.exact_symbol": ANY,
    "search.snippet_lines": COUNT,
    "search.bm25": ANY,
    "search.dense": ANY,
    "search.routing": ANY,
    "search.graph": ANY,
    "search.rerank": ANY,
    "search.dense_floor": COSINE,
    "search.bm25_weight": WEIGHT,
    "search.dense_weight": WEIGHT,
    "search.exact_weight": WEIGHT,
    "search.exact_max": COUNT,
    "search.route_drop_confidence": SHARE,
    "search.min_route_weight": SHARE,
    "search.merge_routes": ANY,
    "search.test_weight": WEIGHT,
    "search.max_query_chars": Bound(1, 10_000),
    "search.ranker": Bound(choices=("learned", "fusion", "auto")),
    "search.ranker_depth": DEPTH,
    "search.ranker_rrf_weight": SHARE,
    "search.ranker_question_rrf_weight": SHARE,
    "search.ranker_blend_k": Bound(0, 10_000),
    "search.file_bm25_weight": WEIGHT,
    "search.file_ranker": Bound(choices=("learned", "fusion")),
    "search.ranker_max_per_file": COUNT,
    "search.code_in_top": Bound(0, 100),
    "search.code_in_top_p": SHARE,
    "search.budget_ms": Bound(0, 1000),
    # the graph of its own code
    "graph.enabled": ANY,
    "graph.max_file_size": Bound(1, 8 * MIB),
    "graph.name_fallback": ANY,
    "graph.deps_depth": Bound(1, 10),
    "expand.top_n": Bound(0, 100),
    "expand.edge_types": Bound(
        choices=("defines", "calls", "imports", "inherits", "tests", "mentions")
    ),
    "expand.alpha": WEIGHT,
    "expand.per_source": Bound(0, 100),
    "expand.min_confidence": SHARE,
    "expand.hub_degree": Bound(0, 1_000_000),
    "expand.semantic_floor": COSINE,
    "expand.mutual_support": WEIGHT,
    "expand.degree_prior": WEIGHT,
    "expand.pagerank_prior": WEIGHT,
    # how the cross-encoder's scores blend in (the model itself is the user's)
    "rerank.top_k": Bound(1, 100),
    "rerank.blend": Bound(choices=("blend", "replace")),
    "rerank.blend_weight": SHARE,
}

_SECRETS = "would index and serve your own secret files"
_MODEL = "names a model or model file llmc would load"
_MACHINE = "sets how llmc uses your machine (device, runtime, threads, memory)"
_LLM = "calls an LLM (perhaps a paid server) or sets how much it may spend"
_DAEMON = "configures the daemon's network, limits or behaviour"
_REACH = "names a host, URL, variable or directory outside the repository"
_YOURS = "concerns your own data, labels or tuning, not the repository's"

# Whole sections that are the user's alone, and the reason.
USER_SECTIONS: dict[str, str] = {
    "embedding": _MODEL + " or " + _MACHINE,
    "llm": _LLM,
    "llm_rerank": _LLM,
    "hyde": _LLM,
    "eval": _REACH,
    "daemon": _DAEMON,
    "learn": _YOURS,
}

# Single keys of the other sections that are the user's alone, and the reason.
USER_KEYS: dict[str, str] = {
    "index.index_secrets": _SECRETS,
    "index.redact_secrets": _SECRETS,
    "index.lock_timeout": _MACHINE,
    "index.vectors": _MACHINE,
    "search.hyde": _LLM,
    "search.llm_rerank": _LLM,
    "search.ranker_model": _MODEL,
    "search.blas_threads": _MACHINE,
    "search.torch_threads": _MACHINE,
    "search.profile": _MACHINE,
    "graph.warm_max_files": _MACHINE,
    "rerank.model": _MODEL,
    "rerank.batch_size": _MACHINE,
    "rerank.max_length": _MACHINE,
    "rerank.device": _MACHINE,
    "rerank.precision": _MACHINE,
}


def user_only_reason(key: str) -> str | None:
    """Why a repository may not set ``key``; None when it may (``REPO_KEYS``)."""
    if key in REPO_KEYS:
        return None
    section = key.split(".", 1)[0]
    return USER_KEYS.get(key) or USER_SECTIONS.get(section) or "is not on the repository allow-list"


def out_of_bounds(key: str, value: Any) -> str | None:
    """Why ``value`` (already typed) is refused for ``key`` from a repository; None: fine."""
    bound = REPO_KEYS.get(key)
    if bound is None or bound.fits(value):
        return None
    return f"must be {bound.describe()} in a repository's llmc.toml"


def classified(key: str) -> bool:
    """Whether ``key`` is on one of the lists (the test that walks every key asks)."""
    section = key.split(".", 1)[0]
    return key in REPO_KEYS or key in USER_KEYS or section in USER_SECTIONS


__all__ = [
    "REPO_KEYS",
    "USER_KEYS",
    "USER_SECTIONS",
    "classified",
    "out_of_bounds",
    "user_only_reason",
]
