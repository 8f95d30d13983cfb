"""The protocol's shared ground: system and task names, the numbers (metrics with bootstrap
CIs, paired tests) and the report types every task's runner returns (``run.py`` runs the
docstring, commits and reports tasks, ``questions.py`` the questions task; both build on this)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores
from llmc.eval.projects import Project
from llmc.eval.stats import BootstrapCI, TestResult

GREP = "grep"
DEFAULT = "default"
SYSTEMS = (GREP, "bm25-only", "dense-only", "rrf", "learned", DEFAULT)
COMMITS = "commits"  # task (c): commit subject -> changed files (commits.py)
TASKS = ("docstring", COMMITS)
QUESTIONS = "questions"  # task (b): hand-written developer questions (questions.py)
TASKS += (QUESTIONS,)
REPORTS = "reports"  # task (d): long report -> changed files (reports.py)
TASKS += (REPORTS,)
FILE_TASKS = (COMMITS, REPORTS)  # scored over files: each file once, at its best span's rank
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
    # task (d): per system, per query, Acc@1/5/10 (every answer file within the first k)
    file_acc: dict[str, list[dict[str, float]]] = field(default_factory=dict)

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


def pooled_numbers(runs: Sequence[ProjectRun], *, resamples: int, seed: int) -> Numbers:
    """Every project's queries together, resampled within their project."""
    systems = list(runs[0].scores) if runs else []
    scores = {s: [q for r in runs for q in r.scores[s]] for s in systems}
    strata = [r.project.name for r in runs for _ in r.scores[systems[0]]] if systems else []
    return numbers(scores, strata, resamples=resamples, seed=seed)


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
    "Fetch",
    "Numbers",
    "Paired",
    "ProjectRun",
    "ProtocolReport",
    "metric_values",
    "numbers",
    "pooled_numbers",
]
