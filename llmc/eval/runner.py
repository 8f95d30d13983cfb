"""Run an eval set against a repository, under one or more named pipeline variants
(``llmc.eval.variants``).

Every variant shares one index; the runner indexes the repository first (incrementally)
unless told not to. Latency is wall time around ``Searcher.search`` after ``eval.warmup`` untimed queries.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llmc.config import Config
from llmc.errors import EvalError
from llmc.eval.compare import Comparison, compare_scores
from llmc.eval.metrics import QueryScores, Summary, score_query, summarize_by_intent
from llmc.eval.queries import EvalQuery, check_against_repo
from llmc.eval.variants import (
    DEFAULT,
    VARIANTS,
    Variant,
    available_variants,
    register_variant,
    variant_config,
)

log = logging.getLogger(__name__)


class SearcherLike(Protocol):
    def search(self, query: str, k: int | None = None) -> Any: ...


def ask(searcher: SearcherLike, query: str, k: int) -> Any:
    """``searcher``'s span answer to ``query``: the product's own (``Searcher.answer``, what
    the CLI, the daemon and MCP give) when it has one, else its ``search`` (a baseline)."""
    answer = getattr(searcher, "answer", None)
    return answer(query, k=k).response if callable(answer) else searcher.search(query, k=k)


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
    return compare_scores(a, report.variants[a].scores, b, report.variants[b].scores)


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
    deep = k + len(ignore_paths) * 3 if ignore_paths else k
    warm = getattr(searcher, "warm", None)
    if callable(warm):
        warm()  # load models and indexes before anything is timed
    for q in list(queries)[: max(0, warmup)]:
        ask(searcher, q.query, deep)
    runs: list[QueryRun] = []
    for q in queries:
        started = time.perf_counter()
        response = ask(searcher, q.query, deep)
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
