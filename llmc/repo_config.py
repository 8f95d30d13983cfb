"""What a repository's own ``llmc.toml`` may set: ranking and indexing of its own files, no more.

A repository is untrusted input (someone else wrote it), and its ``llmc.toml`` comes with
every clone and pull. So the keys it may set are an explicit allow-list (``REPO_KEYS``), each
with bounds: which files are indexed and how they are cut into spans, how search weighs and
fuses what it finds (the query-time keys a request may set too, with a request's bounds from
``llmc.query_keys``, less the LLM stages and the latency budget), the graph's knobs. Every
other key is the user's alone (``USER_ONLY``, each with the reason): secret switches (the
user's own untracked ``.env`` and keys would be indexed and served), every model and model
path (llmc would open and parse a file the repository names), runtimes, devices, threads and
memory sizes, anything that calls an LLM or a paid model server or sets how much it may spend
(``search.budget_ms = 0`` switches the budget off, and HyDE then calls the LLM on every vague
query), the daemon's network and limits, and where eval and learn data live. Such a key in
``llmc.toml`` is ignored with one warning naming it, and `llmc config` shows it as ignored. A
value out of its bounds is ignored the same way. ``tests/test_repo_config.py`` fails on a
config key in neither list.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmc.query_keys import QUERY_KEYS

USER_ONLY = "user-only: it "
OUT_OF_BOUNDS = "out of bounds: "


@dataclass(frozen=True)
class Bound:
    """Inclusive bounds for a number, the allowed strings for a choice (or a list's items),
    and for lists a length cap (strings: at most ``MAX_CHARS`` characters)."""

    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    max_items: int = 1000

    MAX_CHARS = 1000

    def fits(self, value: Any) -> bool:
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) > self.max_items:
            return False
        for item in items:
            if self.choices and item not in self.choices:
                return False
            if isinstance(item, str) and len(item) > self.MAX_CHARS:
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
        return f"at most {self.max_items} items of at most {self.MAX_CHARS} characters"


ANY = Bound()
MIB = 1024 * 1024

# How search weighs, fuses and ranks what it finds, the graph expansion and how the
# cross-encoder's scores blend in: query-time keys, bounded as a request's are.
_QUERY_TIME = (
    "search.k", "search.route", "search.bm25_depth", "search.dense_depth", "search.fusion",
    "search.rrf_k", "search.max_per_file", "search.exact_symbol", "search.snippet_lines",
    "search.bm25", "search.dense", "search.routing", "search.graph", "search.rerank",
    "search.dense_floor", "search.bm25_weight", "search.dense_weight", "search.exact_weight",
    "search.exact_max", "search.route_drop_confidence", "search.min_route_weight",
    "search.merge_routes", "search.test_weight", "search.max_query_chars", "search.ranker",
    "search.ranker_depth", "search.ranker_rrf_weight", "search.ranker_blend_k",
    "search.ranker_max_per_file", "search.code_in_top", "search.code_in_top_p",
    "expand.top_n", "expand.edge_types", "expand.alpha", "expand.per_source",
    "expand.min_confidence", "expand.hub_degree", "expand.semantic_floor",
    "expand.mutual_support", "expand.degree_prior", "expand.pagerank_prior",
    "rerank.top_k", "rerank.blend", "rerank.blend_weight",
)  # fmt: skip


def _request(key: str) -> Bound:
    rule = QUERY_KEYS[key]
    return Bound(rule.lo, rule.hi, rule.choices)


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
    **{key: _request(key) for key in _QUERY_TIME},
    # ranking keys a request does not set (the file ranker, the question blend)
    "search.ranker_question_rrf_weight": Bound(0, 1),
    "search.file_bm25_weight": Bound(0, 100),
    "search.file_ranker": Bound(choices=("learned", "fusion")),
    # the graph of its own code
    "graph.enabled": ANY,
    "graph.max_file_size": Bound(1, 8 * MIB),
    "graph.name_fallback": ANY,
    "graph.deps_depth": Bound(1, 10),
}

_SECRETS = "would index and serve your own secret files"
_MODEL = "names a model or model file llmc would load"
_MODEL_INPUT = "changes what your embedding model is given (every span would be re-embedded)"
_MACHINE = "sets how llmc uses your machine (device, runtime, threads, memory)"
_LLM = "calls an LLM (perhaps a paid server) or sets how much it may spend"
_BUDGET = (
    "sets how long a query may take, and so whether LLM stages call your model server "
    "(0 switches the budget off)"
)
_DAEMON = "configures the daemon's network, limits or behaviour"
_REACH = "names a host, URL, variable or directory outside the repository"
_YOURS = "concerns your own data, labels or tuning, not the repository's"
_EVAL = "concerns your own evaluation runs, not the repository's"

# Whole sections that are the user's alone, and the reason (a key added there is the
# user's too; ``USER_KEYS`` may say more precisely why).
USER_SECTIONS: dict[str, str] = {
    "embedding": _MODEL + " or " + _MACHINE,
    "llm": _LLM,
    "llm_rerank": _LLM,
    "hyde": _LLM,
    "eval": _EVAL,
    "daemon": _DAEMON,
    "learn": _YOURS,
    "team": _REACH,  # a repository must never point publishing at its own server
}

# Single keys that are the user's alone, and the reason.
USER_KEYS: dict[str, str] = {
    "index.index_secrets": _SECRETS,
    "index.redact_secrets": _SECRETS,
    "index.lock_timeout": _MACHINE,
    "index.vectors": _MACHINE,
    "embedding.code_model": _MODEL,
    "embedding.docs_model": _MODEL,
    "embedding.device": _MACHINE,
    "embedding.precision": _MACHINE,
    "embedding.batch_size": _MACHINE,
    "embedding.max_seq_length": _MACHINE,
    "embedding.runtime": _MACHINE,
    "embedding.query_prefix": _MODEL_INPUT,
    "embedding.passage_prefix": _MODEL_INPUT,
    "embedding.base_url": _REACH,
    "embedding.api_key_env": _REACH,
    "search.hyde": _LLM,
    "search.llm_rerank": _LLM,
    "search.budget_ms": _BUDGET,
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
    "llm.ollama_host": _REACH,
    "llm.base_url": _REACH,
    "llm.api_key_env": _REACH,
    "llm.embedded_model": _MODEL,
    "eval.cache_dir": _REACH,
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


def why_ignored(key: str, typed: Callable[[], Any]) -> str | None:
    """Why a repository's ``llmc.toml`` may not set ``key`` (``typed()``: its value, typed;
    called only for an allowed key), or None when it may."""
    why = user_only_reason(key)
    if why is not None:
        return USER_ONLY + why
    bounds = out_of_bounds(key, typed())
    return None if bounds is None else OUT_OF_BOUNDS + bounds


def ignored_warning(path: str, ignored: Mapping[str, tuple[Any, str, str]], user: str) -> str:
    """The one warning a load gives for what ``path`` (a repository's llmc.toml) tried to set
    and may not: the user-only keys and where to set them, the values out of their bounds."""
    users = [key for key, (_, _, why) in ignored.items() if why.startswith(USER_ONLY)]
    parts = []
    if users:
        parts.append(
            f"{', '.join(users)} {'is' if len(users) == 1 else 'are'} user-only "
            f"(set {'it' if len(users) == 1 else 'them'} in {user} or LLMC_<SECTION>__<KEY>)"
        )
    for key, (value, _, why) in ignored.items():
        if why.startswith(OUT_OF_BOUNDS):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            bound = why[len(OUT_OF_BOUNDS) :].removesuffix(" in a repository's llmc.toml")
            parts.append(f"{key} = {shown} is out of bounds ({bound})")
    return (
        f"{path}: ignored: {'; '.join(parts)}. A repository's llmc.toml may set only how its "
        "own files are indexed and ranked (`llmc config` says why for each key)"
    )


def classified(key: str) -> bool:
    """Whether ``key`` is on one of the lists (the test that walks every key asks)."""
    section = key.split(".", 1)[0]
    return key in REPO_KEYS or key in USER_KEYS or section in USER_SECTIONS


__all__ = [
    "REPO_KEYS",
    "USER_KEYS",
    "USER_SECTIONS",
    "classified",
    "ignored_warning",
    "out_of_bounds",
    "user_only_reason",
    "why_ignored",
]
