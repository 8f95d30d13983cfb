"""Run the protocol: every system on every task of every project of a split, in one harness.

Per project: fetch the pinned archive, build the stripped corpus, generate (or reread) the
task's queries, index the corpus with llmc, anchor the judgments' symbols in that index,
then search every query with every system (``grep``: ``grep.GrepSearcher``; any other name:
an eval variant of ``llmc.eval.runner`` on llmc's ``Searcher``) and score it with
``llmc.eval.metrics``. Numbers per project and pooled over the split, each with a
percentile bootstrap CI (pooled: queries resampled within their project), and paired
tests of ``default`` against every other system: Wilcoxon on reciprocal ranks and a
bootstrap CI of the MRR@10 difference.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores
from llmc.eval.projects import Project
from llmc.eval.protocol.splits import SplitProject, select_projects
from llmc.eval.stats import BootstrapCI, TestResult

log = logging.getLogger(__name__)

GREP = "grep"
DEFAULT = "default"
SYSTEMS = (GREP, "bm25-only", "dense-only", "rrf", "learned", DEFAULT)
COMMITS = "commits"  # task (c): commit subject -> changed files (commits.py)
TASKS = ("docstring", COMMITS)
QUESTIONS = "questions"  # task (b): hand-written developer questions (questions.py)
TASKS += (QUESTIONS,)
METRICS = ("mrr@10", "ndcg@10", "hit@5", "code@3")

Fetch = Callable[[Project, Path], Path]


def metric_values(scores: Sequence[QueryScores], metric: str) -> list[float]:
    """One value per query (Code@3: only the code-intent queries)."""
    if metric == "mrr@10":
        return [s.rr for s in scores]
    if metric == "ndcg@10":
        return [s.ndcg for s in scores]
    if metric == "hit@5":
        return [1.0 if s.hit_5 else 0.0 for s in scores]
    if metric == "code@3":
        return [1.0 if s.code_3 else 0.0 for s in scores if s.code_3 is not None]
    raise EvalError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")


@dataclass(frozen=True)
class Paired:
    """``a`` against ``b`` on the same queries."""

    a: str
    b: str
    mrr_diff: BootstrapCI  # mean of rr(a) - rr(b), with its bootstrap CI
    wilcoxon_rr: TestResult

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "mrr@10_diff": self.mrr_diff.to_json(),
            "wilcoxon_rr": self.wilcoxon_rr.to_json(),
        }


@dataclass(frozen=True)
class Numbers:
    """Every system's metrics with CIs, and the paired tests, over one set of queries."""

    n: int
    metrics: dict[str, dict[str, BootstrapCI | None]]  # system -> metric -> CI
    paired: tuple[Paired, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "queries": self.n,
            "systems": {
                s: {m: (ci.to_json() if ci else None) for m, ci in by.items()}
                for s, by in self.metrics.items()
            },
            "paired": [p.to_json() for p in self.paired],
        }


@dataclass
class ProjectRun:
    """One project under one task: its queries' scores per system, and its numbers."""

    project: Project
    split: str
    task: str
    corpus: Path
    queries_path: Path
    spans: int
    scores: dict[str, list[QueryScores]]
    numbers: Numbers
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self, per_query: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "project": self.project.name,
            "version": self.project.version,
            "ecosystem": self.project.ecosystem,
            "sha256": self.project.sha256,
            "split": self.split,
            "task": self.task,
            "corpus": str(self.corpus),
            "queries_file": str(self.queries_path),
            "spans": self.spans,
            "seconds": round(self.seconds, 1),
            **self.numbers.to_json(),
            "warnings": self.warnings,
        }
        if per_query:
            out["per_query"] = {
                s: [{"query": q.query, "rr": q.rr, "ndcg@10": q.ndcg, "hit@5": q.hit_5} for q in qs]
                for s, qs in self.scores.items()
            }
        return out


@dataclass
class ProtocolReport:
    split: str
    tasks: tuple[str, ...]
    systems: tuple[str, ...]
    k: int
    max_queries: int
    seed: int
    resamples: int
    runs: list[ProjectRun]
    pooled: dict[str, Numbers]  # task -> numbers over every project of the split
    skipped_systems: list[str] = field(default_factory=list)

    def to_json(self, per_query: bool = False) -> dict[str, Any]:
        return {
            "split": self.split,
            "tasks": list(self.tasks),
            "systems": list(self.systems),
            "k": self.k,
            "max_queries": self.max_queries,
            "seed": self.seed,
            "resamples": self.resamples,
            "projects": [r.to_json(per_query) for r in self.runs],
            "pooled": {t: n.to_json() for t, n in self.pooled.items()},
            "skipped_systems": self.skipped_systems,
        }


def numbers(
    scores: dict[str, list[QueryScores]],
    strata: Sequence[str] | None,
    *,
    resamples: int,
    seed: int,
    baseline_of: str = DEFAULT,
) -> Numbers:
    """CIs of every metric per system and the paired tests of ``baseline_of`` against the
    others (strata: the project of each query, for pooled numbers)."""
    from llmc.eval.stats import bootstrap_ci, paired_bootstrap_ci, wilcoxon

    metrics: dict[str, dict[str, BootstrapCI | None]] = {}
    n = 0
    for system, qs in scores.items():
        n = len(qs)
        by: dict[str, BootstrapCI | None] = {}
        for metric in METRICS:
            values = metric_values(qs, metric)
            keep = strata
            if metric == "code@3" and strata is not None:
                keep = [s for s, q in zip(strata, qs, strict=True) if q.code_3 is not None]
            by[metric] = (
                bootstrap_ci(values, keep, resamples=resamples, seed=seed) if values else None
            )
        metrics[system] = by
    paired = []
    if baseline_of in scores:
        a = [q.rr for q in scores[baseline_of]]
        for system, qs in scores.items():
            if system == baseline_of or not qs:
                continue
            b = [q.rr for q in qs]
            paired.append(
                Paired(
                    baseline_of,
                    system,
                    paired_bootstrap_ci(a, b, strata, resamples=resamples, seed=seed),
                    wilcoxon(a, b),
                )
            )
    return Numbers(n, metrics, tuple(paired))


def _count_spans(root: Path) -> int:
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(root), readonly=True)
    try:
        return sum(1 for _ in store.iter_spans())
    finally:
        store.close()


def run_project(
    sp: SplitProject,
    task: str,
    systems: Sequence[str],
    *,
    cache_dir: Path,
    max_queries: int,
    seed: int,
    k: int,
    resamples: int,
    fetch: Fetch,
    searcher_factory: Any = None,
    progress: Any = None,
) -> ProjectRun:
    """One project under one task (see the module docstring)."""
    if task == QUESTIONS:  # the unstripped archive, pooled labels (questions.py)
        from llmc.eval.protocol import questions

        return questions.run_project(
            sp, systems, cache_dir=cache_dir, k=k, resamples=resamples, seed=seed,
            fetch=fetch, searcher_factory=searcher_factory, progress=progress,
        )  # fmt: skip
    from llmc.config import load_config
    from llmc.eval.protocol.corpus import build_corpus
    from llmc.eval.protocol.docstring import docstring_queries
    from llmc.eval.protocol.grep import GrepSearcher
    from llmc.eval.runner import anchor_symbols, ensure_index, run_variant, variant_config

    if task not in TASKS:
        raise EvalError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    started = time.perf_counter()
    project = sp.project
    if task == COMMITS:  # a git snapshot of a local mirror, pinned queries (commits.py)
        import dataclasses

        from llmc.eval.protocol.commits import prepare

        pin, corpus, queries = prepare(project.name, cache_dir, max_queries)
        queries_path = pin.queries_path
        version = pin.base_ref or pin.base[:12]
        project = dataclasses.replace(project, version=version, ecosystem="git")
    else:
        original = fetch(project, cache_dir)
        work = cache_dir / "protocol" / project.set_name
        corpus = build_corpus(original, work / "corpus", project.sha256)
        queries, queries_path = docstring_queries(original, work, project.name, max_queries, seed)
    if not queries:
        raise EvalError(f"{project.set_name}: no documented definition gave a query")
    cfg = load_config(corpus)
    if progress is not None:
        progress.note(f"{project.set_name}: indexing the stripped corpus")
    ensure_index(corpus, cfg, progress)
    queries, warnings = anchor_symbols(queries, corpus)
    for w in warnings:
        log.warning("%s", w)
    if searcher_factory is None:
        from llmc.search import Searcher

        searcher_factory = Searcher
    scores: dict[str, list[QueryScores]] = {}
    for system in systems:
        if progress is not None:
            progress.phase(f"{project.name} {system}", len(queries))
        searcher = (
            GrepSearcher(corpus)
            if system == GREP
            else searcher_factory(corpus, variant_config(cfg, system))
        )
        if task == COMMITS:  # results are files: each file once, at its best span's rank
            from llmc.eval.protocol.commits import FileLevelSearcher

            searcher = FileLevelSearcher(searcher)
        try:
            run = run_variant(
                system,
                searcher,
                queries,
                k,
                warmup=0 if system == GREP else cfg.eval.warmup,
                on_query=(lambda: progress.advance(1)) if progress is not None else None,
            )
        finally:
            close = getattr(searcher, "close", None)
            if callable(close):
                close()
        scores[system] = run.scores
    seconds = time.perf_counter() - started
    log.info(
        "%s: %d queries, %d systems in %.0f s",
        project.set_name,
        len(queries),
        len(systems),
        seconds,
    )
    return ProjectRun(
        project,
        sp.split,
        task,
        corpus,
        queries_path,
        _count_spans(corpus),
        scores,
        numbers(scores, None, resamples=resamples, seed=seed),
        warnings,
        seconds,
    )


def pooled_numbers(runs: Sequence[ProjectRun], *, resamples: int, seed: int) -> Numbers:
    """Every project's queries together, resampled within their project."""
    systems = list(runs[0].scores) if runs else []
    scores = {s: [q for r in runs for q in r.scores[s]] for s in systems}
    strata = [r.project.name for r in runs for _ in r.scores[systems[0]]] if systems else []
    return numbers(scores, strata, resamples=resamples, seed=seed)


def _has_commit_set(name: str) -> bool:
    from llmc.eval.protocol.commits import commit_projects

    return name.lower() in commit_projects()


def _task_projects(task: str, chosen: Sequence[SplitProject]) -> Sequence[SplitProject]:
    """The projects a task runs on (questions: those with a question file)."""
    if task == QUESTIONS:
        from llmc.eval.protocol.questions import with_questions

        return with_questions(chosen)
    return chosen


def run_protocol(
    split: str = "test",
    tasks: Sequence[str] = ("docstring",),  # commits needs local mirrors: asked for by name
    systems: Sequence[str] = SYSTEMS,
    max_queries: int = 60,
    projects: Sequence[str | SplitProject] | None = None,
    *,
    seed: int = 0,
    k: int = 10,
    resamples: int = 2000,
    cache_dir: Path | None = None,
    fetch: Fetch | None = None,
    searcher_factory: Any = None,
    progress: Any = None,
) -> ProtocolReport:
    """`llmc eval --protocol`: every system on every task over the projects of ``split``
    (or those named; a ``SplitProject`` is used as given). ``fetch(project, cache_dir)``
    returns the unpacked archive (default: ``llmc.eval.projects.fetch_project``)."""
    from llmc.config import Config, load_config
    from llmc.eval.projects import default_cache_dir, fetch_project
    from llmc.eval.runner import VARIANTS, available_variants

    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise EvalError(f"unknown task(s) {', '.join(unknown)} (known: {', '.join(TASKS)})")
    names = list(dict.fromkeys(systems))
    bad = [s for s in names if s != GREP and s not in VARIANTS]
    if bad:
        raise EvalError(f"unknown system(s) {', '.join(bad)} (known: grep, {', '.join(VARIANTS)})")
    available = set(available_variants(Config())) | {GREP}
    skipped = [s for s in names if s not in available]
    names = [s for s in names if s in available]
    if max_queries < 1 or k < 1:
        raise EvalError("--max-queries and -k must be at least 1")
    named = [p for p in projects or () if isinstance(p, str)]
    chosen = select_projects(split, named) if named or not projects else []
    chosen += [p for p in projects or () if isinstance(p, SplitProject)]
    if not chosen:
        raise EvalError(f"no projects in the {split} split")
    base = cache_dir or default_cache_dir(load_config(None).eval.cache_dir)
    runs: list[ProjectRun] = []
    for task in tasks:
        for sp in _task_projects(task, chosen):
            if task == COMMITS and not _has_commit_set(sp.name):
                log.info("%s: no pinned git history, so no commits task", sp.name)
                continue
            if progress is not None:
                progress.note(f"{sp.project.set_name} ({sp.split}): task {task}")
            runs.append(
                run_project(
                    sp,
                    task,
                    names,
                    cache_dir=base,
                    max_queries=max_queries,
                    seed=seed,
                    k=k,
                    resamples=resamples,
                    fetch=fetch or fetch_project,
                    searcher_factory=searcher_factory,
                    progress=progress,
                )
            )
    pooled = {
        t: pooled_numbers([r for r in runs if r.task == t], resamples=resamples, seed=seed)
        for t in tasks
    }
    return ProtocolReport(
        split, tuple(tasks), tuple(names), k, max_queries, seed, resamples, runs, pooled, skipped
    )


__all__ = [
    "COMMITS",
    "DEFAULT",
    "GREP",
    "METRICS",
    "QUESTIONS",
    "SYSTEMS",
    "TASKS",
    "Numbers",
    "Paired",
    "ProjectRun",
    "ProtocolReport",
    "metric_values",
    "numbers",
    "pooled_numbers",
    "run_project",
    "run_protocol",
]
