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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.protocol.core import (
    COMMITS,
    DEFAULT,
    FILE_TASKS,
    GREP,
    METRICS,
    QUESTIONS,
    REPORTS,
    SYSTEMS,
    TASKS,
    Fetch,
    Numbers,
    Paired,
    ProjectRun,
    ProtocolReport,
    _count_spans,
    metric_values,
    numbers,
    pooled_numbers,
)
from lab.protocol.splits import SplitProject, select_projects
from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores

log = logging.getLogger(__name__)


def _task_inputs(
    sp: SplitProject, task: str, cache_dir: Path, max_queries: int, seed: int, fetch: Fetch
) -> tuple[Any, Path, list, Path]:
    """``(project, corpus, queries, queries_path)`` of one project under a span task
    (docstring: the fetched archive stripped of docstrings, its sampled summaries) or a
    file task (a git snapshot of a local mirror at the pinned base, its pinned commits or
    mined reports; the project's version becomes the base's)."""
    project = sp.project
    if task in FILE_TASKS:  # a git snapshot of a local mirror, pinned queries (commits.py)
        import dataclasses

        from lab.protocol import reports
        from lab.protocol.commits import prepare

        pin, corpus, queries = prepare(project.name, cache_dir, max_queries)
        queries_path = pin.queries_path
        if task == REPORTS:  # task (c)'s base and mirror, the mined reports
            queries = reports.load_report_queries(project.name, max_queries)
            queries_path = reports.queries_path(project.name)
        version = pin.base_ref or pin.base[:12]
        return (
            dataclasses.replace(project, version=version, ecosystem="git"),
            corpus,
            queries,
            queries_path,
        )
    from lab.protocol.corpus import build_corpus
    from lab.protocol.docstring import docstring_queries

    original = fetch(project, cache_dir)
    work = cache_dir / "protocol" / project.set_name
    corpus = build_corpus(original, work / "corpus", project.sha256)
    queries, queries_path = docstring_queries(original, work, project.name, max_queries, seed)
    return project, corpus, queries, queries_path


def _searcher(system: str, task: str, corpus: Path, cfg: Any, factory: Any) -> Any:
    """The searcher a system runs as (grep, whole-file BM25, or the product's Searcher
    under the system's config); under a file task its spans grouped into files as
    ``--files`` ranks them (a file once, at its best span's rank, the whole-file list
    fused in where the config says)."""
    from lab.protocol import reports
    from lab.protocol.file_rank import BM25_FILE, FileBM25Searcher
    from lab.protocol.grep import GrepSearcher
    from llmc.eval.runner import variant_config

    if system == GREP:
        searcher: Any = GrepSearcher(corpus)
    elif system == BM25_FILE:
        searcher = FileBM25Searcher(corpus)
    else:
        searcher = factory(corpus, variant_config(cfg, system))
    if task == COMMITS:
        from lab.protocol.commits import SPANS_PER_QUERY

        return reports.GroupedFileSearcher(searcher, SPANS_PER_QUERY)
    if task == REPORTS:  # reports.py
        return reports.GroupedFileSearcher(searcher)
    return searcher


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
    from lab.protocol.file_rank import BM25_FILE, file_scores

    if BM25_FILE in systems and task not in FILE_TASKS:
        raise EvalError(f"{BM25_FILE} ranks whole files: tasks {', '.join(FILE_TASKS)} only")
    if task == QUESTIONS:  # the unstripped archive, pooled labels (questions.py)
        from lab.protocol import questions

        return questions.run_project(
            sp, systems, cache_dir=cache_dir, k=k, resamples=resamples, seed=seed,
            fetch=fetch, searcher_factory=searcher_factory, progress=progress,
        )  # fmt: skip
    from llmc.config import load_config
    from llmc.eval.runner import anchor_symbols, ensure_index, run_variant

    if task not in TASKS:
        raise EvalError(f"unknown task {task!r} (known: {', '.join(TASKS)})")
    started = time.perf_counter()
    project, corpus, queries, queries_path = _task_inputs(
        sp, task, cache_dir, max_queries, seed, fetch
    )
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
    file_acc: dict[str, list[dict[str, float]]] = {}
    for system in systems:
        if progress is not None:
            progress.phase(f"{project.name} {system}", len(queries))
        searcher = _searcher(system, task, corpus, cfg, searcher_factory)
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
        if task == REPORTS:
            file_acc[system] = [
                _acc(file_scores([r.path for r in qr.results], [j.path for j in qr.query.relevant]))
                for qr in run.runs
            ]
    seconds = time.perf_counter() - started
    log.info(
        "%s: %d queries, %d systems in %.0f s", project.set_name, len(queries), len(systems),
        seconds,
    )  # fmt: skip
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
        file_acc,
    )


def _acc(s: Any) -> dict[str, float]:
    return {"acc@1": s.acc_1, "acc@5": s.acc_5, "acc@10": s.acc_10}


def _has_commit_set(name: str) -> bool:
    from lab.protocol.commits import commit_projects

    return name.lower() in commit_projects()


def _task_projects(task: str, chosen: Sequence[SplitProject]) -> Sequence[SplitProject]:
    """The projects a task runs on (questions: those with a question file; commits: with a
    pinned history; reports: with mined reports)."""
    if task == QUESTIONS:
        from lab.protocol.question_pool import with_questions

        return with_questions(chosen)
    if task == COMMITS:
        return [sp for sp in chosen if _has_commit_set(sp.name)]
    if task == REPORTS:
        from lab.protocol.reports import has_reports

        return [sp for sp in chosen if _has_commit_set(sp.name) and has_reports(sp.name)]
    return chosen


def chosen_projects(split: str, projects: Sequence[str | SplitProject]) -> list[SplitProject]:
    """The projects of ``split`` (or those named; a ``SplitProject`` is used as given)."""
    named = [p for p in projects if isinstance(p, str)]
    chosen = select_projects(split, named) if named or not projects else []
    chosen += [p for p in projects if isinstance(p, SplitProject)]
    if not chosen:
        raise EvalError(f"no projects in the {split} split")
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
    """`python -m lab protocol`: every system on every task over the projects of ``split``
    (or those named; a ``SplitProject`` is used as given). ``fetch(project, cache_dir)``
    returns the unpacked archive (default: ``llmc.eval.projects.fetch_project``)."""
    from lab.protocol.file_rank import BM25_FILE
    from llmc.config import Config, load_config
    from llmc.eval.projects import default_cache_dir, fetch_project
    from llmc.eval.runner import VARIANTS, available_variants

    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise EvalError(f"unknown task(s) {', '.join(unknown)} (known: {', '.join(TASKS)})")
    names = list(dict.fromkeys(systems))
    bad = [s for s in names if s not in (GREP, BM25_FILE) and s not in VARIANTS]
    if bad:
        raise EvalError(f"unknown system(s) {', '.join(bad)} (known: grep, {', '.join(VARIANTS)})")
    available = set(available_variants(Config())) | {GREP, BM25_FILE}
    skipped = [s for s in names if s not in available]
    names = [s for s in names if s in available]
    if max_queries < 1 or k < 1:
        raise EvalError("--max-queries and -k must be at least 1")
    chosen = chosen_projects(split, projects or ())
    base = cache_dir or default_cache_dir(load_config(None).eval.cache_dir)
    runs: list[ProjectRun] = []
    for task in tasks:
        for sp in _task_projects(task, chosen):
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
    "FILE_TASKS",
    "GREP",
    "METRICS",
    "QUESTIONS",
    "REPORTS",
    "SYSTEMS",
    "TASKS",
    "Numbers",
    "Paired",
    "ProjectRun",
    "ProtocolReport",
    "chosen_projects",
    "metric_values",
    "numbers",
    "pooled_numbers",
    "run_project",
    "run_protocol",
]
