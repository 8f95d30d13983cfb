"""Run an eval set against a repository, under one or more named pipeline variants.

A variant is a function from a (deep-copied) Config to the Config to search with, plus
the config keys it needs: a variant whose keys do not exist (a stage not built yet) is
skipped with a note, so the registry can name later stages ahead of time. Every variant
shares one index; the runner indexes the repository first (incrementally) unless told not
to. Latency is wall time around ``Searcher.search`` after ``eval.warmup`` untimed queries.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llmc.config import Config
from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores, Summary, score_query, summarize_by_intent
from llmc.eval.queries import EvalQuery, check_against_repo
from llmc.eval.stats import TestResult, mcnemar, wilcoxon

log = logging.getLogger(__name__)

DEFAULT = "default"


# -- variants -----------------------------------------------------------------------------
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
EXTRA_STAGES = (
    "search.exact_symbol",
    "search.graph",
    "search.hyde",
    "search.rerank",
    "search.llm_rerank",
)


def has_key(cfg: Config, key: str) -> bool:
    section_name, _, name = key.partition(".")
    section = getattr(cfg, section_name, None)
    if section is None or not dataclasses.is_dataclass(section):
        return False
    return name in {f.name for f in dataclasses.fields(section)}


def set_key(cfg: Config, key: str, value: Any) -> None:
    section_name, _, name = key.partition(".")
    setattr(getattr(cfg, section_name), name, value)
    cfg.sources[key] = "eval variant"


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
        if has_key(cfg, key):
            set_key(cfg, key, False)
    return cfg


@register_variant(DEFAULT, description="the configured pipeline")
def _default(cfg: Config) -> Config:
    return cfg


@register_variant("bm25-only", ("search.bm25", "search.dense"), "BM25 alone, no other stage")
def _bm25_only(cfg: Config) -> Config:
    set_key(cfg, "search.bm25", True)
    return _stages_off(cfg, "search.dense", "search.routing", *EXTRA_STAGES)


@register_variant("dense-only", ("search.bm25", "search.dense"), "dense alone, no other stage")
def _dense_only(cfg: Config) -> Config:
    set_key(cfg, "search.dense", True)
    return _stages_off(cfg, "search.bm25", "search.routing", *EXTRA_STAGES)


# What a user would build from the same parts: BM25 and dense, top 100 of each over every
# span, fused by RRF (k = 60); no routing, exact-symbol pinning, test-file weighting,
# per-file cap, learned weights or second stage.
RRF_BASELINE = {
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
        set_key(cfg, key, value)
    return _stages_off(cfg, *EXTRA_STAGES)


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

# Second-stage trials: each stage on (as default where the default has it on), and each
# graph prior on at a trial weight, so `--ablate` measures what the defaults leave off.
PRIOR_TRIALS = {"mutual_support": 0.1, "degree_prior": 0.1, "pagerank_prior": 0.2}


def _register_stage_on(name: str, keys: dict[str, Any], description: str) -> None:
    def apply(cfg: Config) -> Config:
        for key, value in keys.items():
            set_key(cfg, key, value)
        return cfg

    register_variant(name, tuple(keys), description)(apply)


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
    set_key(cfg, "search.hyde", True)
    set_key(cfg, "hyde.mode", "auto")
    set_key(cfg, "hyde.intents", ["code", "docs", "mixed"])
    return cfg


@register_variant("hyde-always", ("search.hyde", "hyde.mode"), "HyDE for every query, ungated")
def _hyde_always(cfg: Config) -> Config:
    set_key(cfg, "search.hyde", True)
    set_key(cfg, "hyde.mode", "always")
    return cfg


def available_variants(cfg: Config) -> list[str]:
    """Registered variants whose config keys all exist, in registration order."""
    return [n for n, v in VARIANTS.items() if all(has_key(cfg, k) for k in v.requires)]


def variant_config(cfg: Config, name: str) -> Config:
    if name not in VARIANTS:
        raise EvalError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})")
    variant = VARIANTS[name]
    missing = [k for k in variant.requires if not has_key(cfg, k)]
    if missing:
        raise EvalError(f"variant {name!r} needs config key(s) {', '.join(missing)}")
    return variant(copy.deepcopy(cfg))


# -- running ------------------------------------------------------------------------------
class SearcherLike(Protocol):
    def search(self, query: str, k: int | None = None) -> Any: ...


SearcherFactory = Callable[[Path, Config], SearcherLike]


def _default_searcher(root: Path, cfg: Config) -> SearcherLike:
    from llmc.search import Searcher

    return Searcher(root, cfg)


@dataclass(frozen=True)
class ResultRef:
    """What the metrics need of one search result."""

    path: str
    start_line: int
    end_line: int
    lang: str = ""
    category: str = ""
    score: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "score": round(self.score, 6),
        }


@dataclass(frozen=True)
class QueryRun:
    query: EvalQuery
    results: tuple[ResultRef, ...]
    took_ms: float
    route: str = ""


@dataclass
class VariantRun:
    name: str
    runs: list[QueryRun]
    scores: list[QueryScores]
    summary: dict[str, Summary]


@dataclass(frozen=True)
class Comparison:
    """Paired tests of variant ``a`` against ``b`` over the same queries."""

    a: str
    b: str
    n: int
    mrr_a: float
    mrr_b: float
    ndcg_a: float
    ndcg_b: float
    wilcoxon_rr: TestResult
    mcnemar_hit5: TestResult

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "n": self.n,
            "mrr@10": {"a": round(self.mrr_a, 4), "b": round(self.mrr_b, 4)},
            "ndcg@10": {"a": round(self.ndcg_a, 4), "b": round(self.ndcg_b, 4)},
            "wilcoxon_rr": self.wilcoxon_rr.to_json(),
            "mcnemar_hit@5": self.mcnemar_hit5.to_json(),
        }


@dataclass
class EvalReport:
    set_name: str
    root: Path
    k: int
    n_queries: int
    variants: dict[str, VariantRun]
    comparisons: list[Comparison] = field(default_factory=list)
    skipped_variants: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def comparison(self, a: str, b: str) -> Comparison | None:
        return next((c for c in self.comparisons if (c.a, c.b) == (a, b)), None)

    def to_json(self, per_query: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "set": self.set_name,
            "repo": str(self.root),
            "k": self.k,
            "queries": self.n_queries,
            "variants": {
                name: {b: s.to_json() for b, s in run.summary.items()}
                for name, run in self.variants.items()
            },
            "comparisons": [c.to_json() for c in self.comparisons],
            "skipped_variants": self.skipped_variants,
            "warnings": self.warnings,
        }
        if per_query:
            out["per_query"] = {
                name: [
                    {
                        "query": r.query.query,
                        "intent": r.query.intent,
                        "source": r.query.source,
                        "route": r.route,
                        "rr": round(s.rr, 4),
                        "ndcg@10": round(s.ndcg, 4),
                        "hit@5": s.hit_5,
                        "took_ms": round(r.took_ms, 3),
                        "results": [x.to_json() for x in r.results],
                    }
                    for r, s in zip(run.runs, run.scores, strict=True)
                ]
                for name, run in self.variants.items()
            }
        return out


def compare(report: EvalReport, a: str, b: str) -> Comparison:
    """Paired Wilcoxon on reciprocal ranks and exact McNemar on hit@5, ``a`` vs ``b``."""
    for name in (a, b):
        if name not in report.variants:
            raise EvalError(f"variant {name!r} was not run (ran: {', '.join(report.variants)})")
    sa, sb = report.variants[a].scores, report.variants[b].scores
    ma, mb = report.variants[a].summary["all"], report.variants[b].summary["all"]
    return Comparison(
        a=a,
        b=b,
        n=len(sa),
        mrr_a=ma.mrr,
        mrr_b=mb.mrr,
        ndcg_a=ma.ndcg,
        ndcg_b=mb.ndcg,
        wilcoxon_rr=wilcoxon([s.rr for s in sa], [s.rr for s in sb]),
        mcnemar_hit5=mcnemar([s.hit_5 for s in sa], [s.hit_5 for s in sb]),
    )


def ensure_index(root: Path, cfg: Config, progress: Any = None) -> None:
    """Bring the index of ``root`` up to date (incremental: unchanged files cost a stat)."""
    from llmc.index.indexer import index_repo

    index_repo(root, cfg, progress=progress)


def _within(qualname: str, symbol: str) -> bool:
    """``qualname`` is ``symbol`` or nested in it (a method of a class, a subsection)."""
    return qualname == symbol or qualname.startswith((symbol + ".", symbol + " > "))


def anchor_symbols(queries: Sequence[EvalQuery], root: Path) -> tuple[list[EvalQuery], list[str]]:
    """Give judgments that name a ``symbol`` the lines the index has for it.

    The judgment covers the spans of its file with that qualified name and those nested in
    it (a class's methods, a section's subsections), from the first line of the first to
    the last line of the last, like a line range drawn around the definition; failing that,
    spans whose plain symbol equals it. A symbol the index lacks keeps the judgment's own
    lines, or becomes file level; each is reported.
    """
    paths = sorted({j.path for q in queries for j in q.relevant if j.symbol})
    if not paths:
        return list(queries), []
    from llmc.paths import db_path
    from llmc.store.db import Store

    if not db_path(root).exists():
        return list(queries), [f"{root}: no index, so symbol judgments cannot be anchored"]
    store = Store(db_path(root), readonly=True)
    try:
        spans = {p: [s.span for s in store.spans_for_path(p)] for p in paths}
    finally:
        store.close()
    out, problems = [], []
    for q in queries:
        judged = []
        for j in q.relevant:
            if j.symbol:
                found = [s for s in spans[j.path] if _within(s.qualname, j.symbol)] or [
                    s for s in spans[j.path] if s.symbol == j.symbol
                ]
                if found:
                    start = min(s.start_line for s in found)
                    end = max(s.end_line for s in found)
                    j = dataclasses.replace(j, start_line=start, end_line=end)
                else:
                    how = "its own lines" if j.start_line is not None else "file level"
                    problems.append(
                        f"{q.source}: {j.path}: symbol {j.symbol!r} is not in the index; "
                        f"judged at {how}"
                    )
            judged.append(j)
        out.append(dataclasses.replace(q, relevant=tuple(judged)))
    return out, problems


def _refs(response: Any, ignore: frozenset[str], k: int) -> tuple[ResultRef, ...]:
    out = []
    for r in response.results:
        if r.path in ignore:
            continue
        out.append(
            ResultRef(
                path=r.path,
                start_line=int(r.start_line),
                end_line=int(r.end_line),
                lang=getattr(r, "lang", "") or "",
                category=getattr(r, "category", "") or "",
                score=float(getattr(r, "score", 0.0)),
            )
        )
    return tuple(out[:k])


def _route_of(response: Any) -> str:
    route = getattr(response, "route", None)
    return getattr(route, "intent", "") if route is not None else ""


def run_variant(
    name: str,
    searcher: SearcherLike,
    queries: Sequence[EvalQuery],
    k: int,
    warmup: int = 1,
    ignore_paths: frozenset[str] = frozenset(),
    on_query: Callable[[], None] | None = None,
) -> VariantRun:
    ask = k + len(ignore_paths) * 3 if ignore_paths else k
    warm = getattr(searcher, "warm", None)
    if callable(warm):
        warm()  # load models and indexes before anything is timed
    for q in list(queries)[: max(0, warmup)]:
        searcher.search(q.query, k=ask)
    runs: list[QueryRun] = []
    for q in queries:
        started = time.perf_counter()
        response = searcher.search(q.query, k=ask)
        took = (time.perf_counter() - started) * 1000.0
        runs.append(QueryRun(q, _refs(response, ignore_paths, k), took, _route_of(response)))
        if on_query is not None:
            on_query()
    scores = [
        score_query(r.query.query, r.query.intent, r.results, r.query.relevant, r.took_ms)
        for r in runs
    ]
    return VariantRun(name, runs, scores, summarize_by_intent(scores))


def run_eval(
    queries: Sequence[EvalQuery],
    root: Path,
    cfg: Config,
    variants: Sequence[str] = (DEFAULT,),
    *,
    set_name: str = "",
    k: int | None = None,
    index: bool = True,
    compare_pairs: Sequence[tuple[str, str]] = (),
    ignore_paths: Sequence[str] = (),
    searcher_factory: SearcherFactory | None = None,
    progress: Any = None,
) -> EvalReport:
    """Search every query under every variant; metrics per variant and intent; tests.

    ``ignore_paths`` (repo-relative) are dropped from results: the query file itself when
    it lies inside the repository, where it would trivially match its own questions.
    ``progress`` follows the indexer's Progress protocol (phase, advance, note).
    """
    root = root.resolve()
    k = cfg.search.k if k is None else k
    if k < 1:
        raise EvalError(f"-k must be at least 1, got {k}")
    names = list(dict.fromkeys(variants))
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise EvalError(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    for a, b in compare_pairs:
        for n in (a, b):
            if n not in VARIANTS:
                raise EvalError(f"unknown variant {n!r} (known: {', '.join(VARIANTS)})")
            if n not in names:
                names.append(n)
    available = set(available_variants(cfg))
    skipped = [n for n in names if n not in available]
    names = [n for n in names if n in available]
    for n in skipped:
        log.info("variant %s skipped: config key(s) %s do not exist", n, VARIANTS[n].requires)
    warnings = check_against_repo(queries, root)
    for w in warnings:
        log.info("judgment does not fit the repo: %s", w)
    if index:
        ensure_index(root, cfg, progress)
    queries, unanchored = anchor_symbols(queries, root)
    for w in unanchored:
        log.warning("%s", w)
    warnings += unanchored
    factory = searcher_factory or _default_searcher
    runs: dict[str, VariantRun] = {}
    ignore = frozenset(ignore_paths)
    for name in names:
        if progress is not None:
            progress.phase(f"eval {name}", len(queries))
        searcher = factory(root, variant_config(cfg, name))
        try:
            runs[name] = run_variant(
                name,
                searcher,
                queries,
                k,
                warmup=cfg.eval.warmup if hasattr(cfg, "eval") else 1,
                ignore_paths=ignore,
                on_query=(lambda: progress.advance(1)) if progress is not None else None,
            )
        finally:
            close = getattr(searcher, "close", None)
            if callable(close):
                close()
    report = EvalReport(
        set_name=set_name,
        root=root,
        k=k,
        n_queries=len(queries),
        variants=runs,
        skipped_variants=skipped,
        warnings=warnings,
    )
    pairs = list(compare_pairs)
    if not pairs and DEFAULT in runs:
        pairs = [(DEFAULT, n) for n in runs if n != DEFAULT]
    report.comparisons = [compare(report, a, b) for a, b in pairs if a in runs and b in runs]
    return report


def evaluate_set(
    spec: str,
    repo: Path | None = None,
    *,
    ablate: bool = False,
    compare_pair: tuple[str, str] | None = None,
    variants: Sequence[str] = (),
    k: int | None = None,
    index: bool = True,
    cache_dir: Path | None = None,
    progress: Any = None,
    searcher_factory: SearcherFactory | None = None,
) -> EvalReport:
    """`llmc eval`: resolve a query file or shipped set, fetch and index its repo, run it.

    Variants: ``variants`` if given, else every available one with ``ablate``, else the
    two of ``compare_pair``, else ``default``.
    """
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir, fetch_project, resolve_set
    from llmc.eval.queries import load_queries

    chosen = resolve_set(spec, repo)
    queries = load_queries(chosen.queries_path)
    root = chosen.root
    if root is None and chosen.project is not None:
        base = cache_dir or default_cache_dir(load_config(None).eval.cache_dir)
        root = fetch_project(
            chosen.project, base, note=progress.note if progress is not None else None
        )
    if root is None:
        from llmc.paths import find_repo_root

        root = find_repo_root(None)
    root = root.resolve()
    if not root.is_dir():
        raise EvalError(f"{root}: no such directory")
    cfg = load_config(root)
    if variants:
        names = list(variants)
    elif ablate:
        names = available_variants(cfg)
    elif compare_pair:
        names = list(compare_pair)
    else:
        names = [DEFAULT]
    ignore = []
    try:
        ignore.append(chosen.queries_path.resolve().relative_to(root).as_posix())
    except ValueError:
        pass
    return run_eval(
        queries,
        root,
        cfg,
        names,
        set_name=chosen.name,
        k=k,
        index=index,
        compare_pairs=[compare_pair] if compare_pair else (),
        ignore_paths=ignore,
        searcher_factory=searcher_factory,
        progress=progress,
    )


__all__ = [
    "DEFAULT",
    "VARIANTS",
    "Comparison",
    "EvalReport",
    "QueryRun",
    "ResultRef",
    "Variant",
    "VariantRun",
    "anchor_symbols",
    "available_variants",
    "compare",
    "ensure_index",
    "evaluate_set",
    "register_variant",
    "run_eval",
    "run_variant",
    "variant_config",
]
