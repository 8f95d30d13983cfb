"""Every kind of query in one run (docs/evaluation.md, "Every kind in one run"): tasks (a)
docstring, (b) hand-written questions, (c) commit subjects and (d) long reports, each run
by ``run.run_project`` for ``default`` and every baseline, then numbers per **kind** and
pooled, and a verdict per done-when row of issue 28.

Kinds: ``docstring``; ``questions-code``, ``questions-docs``, ``questions-mixed`` (task (b)
split by the question's intent); ``commits``; ``reports``. Metrics per query: MRR@10,
nDCG@10, Hit@5, Code@3 (code intent only) as each task defines them: span level for
docstring and questions, **file level** for commits and reports (a file counts once, at its
best span's rank; nDCG@10's gain is the file's grade); Acc@1/5/10 for reports.

Pooled over kinds (``pool``): every kind weighs the same, every query the same within its
kind (so a project weighs by its queries, as in a task's own pooled numbers). A span-level
kind's nDCG@10 and a file-level kind's enter as they are: each is a number in [0, 1] for
its own query. The estimate is the mean of the kinds' means; its CI is a percentile
bootstrap that resamples queries within each (kind, project) stratum, so each stratum keeps
its size (``stats.bootstrap_ci`` over values scaled by N / (K n_kind), whose plain mean is
that weighted mean). Paired: the same scaling of the per-query differences
(``stats.paired_bootstrap_ci``), and a two-sided Wilcoxon signed-rank test on the unscaled
per-query differences (``stats.wilcoxon``). Only systems run on every kind pool (so not
``bm25-file``, which ranks files and runs on the file kinds only).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.protocol.core import COMMITS, DEFAULT, GREP, QUESTIONS, REPORTS, ProjectRun
from lab.protocol.file_rank import BM25_FILE
from llmc.errors import EvalError
from llmc.eval.stats import BootstrapCI, TestResult

log = logging.getLogger(__name__)

DOCSTRING = "docstring"
TASK_LETTERS = {"a": DOCSTRING, "b": QUESTIONS, "c": COMMITS, "d": REPORTS}
KINDS = (
    DOCSTRING,
    "questions-code",
    "questions-docs",
    "questions-mixed",
    COMMITS,
    REPORTS,
)
FILE_KINDS = (COMMITS, REPORTS)
BASELINES = (GREP, "bm25-only", "dense-only", "rrf")
METRICS = ("mrr@10", "ndcg@10", "hit@5", "code@3", "acc@1", "acc@5", "acc@10")
ACC = ("acc@1", "acc@5", "acc@10")
LOSS_METRICS = ("ndcg@10", "mrr@10")  # a kind loses when either drops significantly
LOSS_ALPHA = 0.05
POOLED_ALPHA = 0.01
ACC5_MARGIN = 0.10
CODE3_MIN = 0.97
P50_MS = 30.0
PASS, FAIL, INCOMPLETE = "PASS", "FAIL", "INCOMPLETE"


def parse_tasks(spec: str) -> tuple[str, ...]:
    """``a,b,c,d`` (or task names) → task names, in the order given, each once."""
    out = []
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        task = TASK_LETTERS.get(part, part)
        if task not in TASK_LETTERS.values():
            known = ", ".join(f"{k} ({v})" for k, v in TASK_LETTERS.items())
            raise EvalError(f"unknown task {part!r} (known: {known})")
        out.append(task)
    if not out:
        raise EvalError("--tasks names no task (give e.g. a,b,c,d)")
    return tuple(dict.fromkeys(out))


def systems_for(task: str) -> tuple[str, ...]:
    """``default`` and the baselines run on ``task`` (``bm25-file`` on the file tasks)."""
    extra = (BM25_FILE,) if task in FILE_KINDS else ()
    return (DEFAULT, *BASELINES, *extra)


def kind_of(task: str, intent: str) -> str:
    return f"questions-{intent}" if task == QUESTIONS else task


# -- per-query records (what a run keeps, and what a resumed run reads back) ---------------
def records(run: ProjectRun) -> dict[str, Any]:
    """A finished project run as plain JSON: per system, per query, every metric."""
    systems: dict[str, list[dict[str, Any]]] = {}
    for system, scores in run.scores.items():
        acc = run.file_acc.get(system, [])
        rows = []
        for i, q in enumerate(scores):
            row: dict[str, Any] = {
                "query": q.query[:200],
                "intent": q.intent,
                "mrr@10": q.rr,
                "ndcg@10": q.ndcg,
                "hit@5": 1.0 if q.hit_5 else 0.0,
                "code@3": None if q.code_3 is None else (1.0 if q.code_3 else 0.0),
                "took_ms": round(q.took_ms, 3),
            }
            row.update(acc[i] if i < len(acc) else {})
            rows.append(row)
        systems[system] = rows
    return {
        "task": run.task,
        "project": run.project.name,
        "version": run.project.version,
        "split": run.split,
        "spans": run.spans,
        "seconds": round(run.seconds, 1),
        "warnings": run.warnings,
        "systems": systems,
    }


@dataclass
class Cell:
    """One kind on one project: every system's per-query values, aligned by query."""

    kind: str
    project: str
    values: dict[str, dict[str, list[float | None]]]  # system -> metric -> per query
    took_ms: dict[str, list[float]]

    @property
    def n(self) -> int:
        first = next(iter(self.values.values()), {})
        return len(first.get("mrr@10", []))


def cells(rec: dict[str, Any]) -> list[Cell]:
    """The cells of one project run's records (task (b): one cell per intent)."""
    task, project = rec["task"], rec["project"]
    out: dict[str, Cell] = {}
    for system, rows in rec["systems"].items():
        for row in rows:
            kind = kind_of(task, row["intent"])
            cell = out.setdefault(kind, Cell(kind, project, {}, {}))
            by = cell.values.setdefault(system, {m: [] for m in METRICS})
            for m in METRICS:
                v = row.get(m)
                by[m].append(None if v is None else float(v))
            cell.took_ms.setdefault(system, []).append(float(row.get("took_ms", 0.0)))
    return [out[k] for k in KINDS if k in out]


# -- pooling -------------------------------------------------------------------------------
def _triples(
    group: Sequence[Cell], system: str, metric: str, other: str | None = None
) -> list[tuple[str, str, float]]:
    """(kind, project, value) of every query where ``system`` (and ``other``) has a value;
    with ``other``: the difference system - other."""
    out = []
    for c in group:
        a = c.values.get(system, {}).get(metric)
        if a is None:
            continue
        b = c.values.get(other, {}).get(metric) if other else None
        if other and b is None:
            continue
        for i, x in enumerate(a):
            y = b[i] if b is not None else 0.0
            if x is None or y is None:
                continue
            out.append((c.kind, c.project, x - y))
    return out


def _scaled(triples: Sequence[tuple[str, str, float]]) -> tuple[list[float], list[str]]:
    """Values scaled so that their plain mean is the mean of the kinds' means, and the
    (kind, project) stratum of each."""
    n_kind: dict[str, int] = {}
    for kind, _, _ in triples:
        n_kind[kind] = n_kind.get(kind, 0) + 1
    n, k = len(triples), len(n_kind)
    values = [v * n / (k * n_kind[kind]) for kind, _, v in triples]
    return values, [f"{kind}/{project}" for kind, project, _ in triples]


def pool(
    group: Sequence[Cell], system: str, metric: str, *, resamples: int = 2000, seed: int = 0
) -> BootstrapCI | None:
    """``system``'s ``metric`` over ``group``: kinds weigh the same (module docstring)."""
    from llmc.eval.stats import bootstrap_ci

    triples = _triples(group, system, metric)
    if not triples:
        return None
    values, strata = _scaled(triples)
    return bootstrap_ci(values, strata, resamples=resamples, seed=seed)


@dataclass(frozen=True)
class PairedDiff:
    """``a`` minus ``b`` on one metric over the same queries."""

    a: str
    b: str
    metric: str
    diff: BootstrapCI  # the (kind-weighted) mean difference, paired bootstrap CI
    wilcoxon: TestResult  # on the unscaled per-query differences
    raw_mean: float  # the unscaled per-query differences' mean (every query the same)

    @property
    def significant_loss(self) -> bool:
        """``a`` is worse: the CI lies below 0, or Wilcoxon p < 0.05 with a negative mean."""
        below = self.diff.high < 0
        return self.diff.estimate < 0 and (below or self.wilcoxon.p_value < LOSS_ALPHA)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "metric": self.metric,
            "diff": self.diff.to_json(),
            "wilcoxon": self.wilcoxon.to_json(),
            "raw_mean": self.raw_mean,
        }


def paired(
    group: Sequence[Cell], a: str, b: str, metric: str, *, resamples: int = 2000, seed: int = 0
) -> PairedDiff | None:
    from llmc.eval.stats import bootstrap_ci, wilcoxon

    triples = _triples(group, a, metric, other=b)
    if not triples:
        return None
    values, strata = _scaled(triples)
    diffs = [v for _, _, v in triples]
    return PairedDiff(
        a,
        b,
        metric,
        bootstrap_ci(values, strata, resamples=resamples, seed=seed),
        wilcoxon(diffs, [0.0] * len(diffs)),
        sum(diffs) / len(diffs),
    )


@dataclass
class KindNumbers:
    """One kind (or the pool of kinds): every system's metrics, default against each
    baseline."""

    kind: str
    n: int
    projects: list[str]
    metrics: dict[str, dict[str, BootstrapCI | None]]  # system -> metric -> CI
    paired: dict[str, dict[str, PairedDiff | None]]  # baseline -> metric -> default - it

    def best_baseline(self, metric: str = "ndcg@10") -> str | None:
        """The baseline with the highest estimate of ``metric`` (ties: the first)."""
        best, value = None, -math.inf
        for system, by in self.metrics.items():
            ci = by.get(metric)
            if system != DEFAULT and ci is not None and ci.estimate > value:
                best, value = system, ci.estimate
        return best

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "queries": self.n,
            "projects": self.projects,
            "systems": {
                s: {m: (ci.to_json() if ci else None) for m, ci in by.items()}
                for s, by in self.metrics.items()
            },
            "paired": {
                b: {m: (p.to_json() if p else None) for m, p in by.items()}
                for b, by in self.paired.items()
            },
        }


def kind_numbers(
    kind: str,
    group: Sequence[Cell],
    systems: Sequence[str],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> KindNumbers:
    """``systems``' numbers over ``group`` (one kind's cells, or several kinds' to pool)."""
    metrics = {
        s: {m: pool(group, s, m, resamples=resamples, seed=seed) for m in METRICS} for s in systems
    }
    compared = ("ndcg@10", "mrr@10", "hit@5", "acc@5")
    diffs = {
        b: {m: paired(group, DEFAULT, b, m, resamples=resamples, seed=seed) for m in compared}
        for b in systems
        if b != DEFAULT and DEFAULT in systems
    }
    n = len(_triples(group, systems[0], "mrr@10")) if systems else 0
    projects = list(dict.fromkeys(c.project for c in group))
    return KindNumbers(kind, n, projects, metrics, diffs)


# -- verdicts ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    row: str  # the done-when row
    status: str  # PASS, FAIL, INCOMPLETE
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {"row": self.row, "status": self.status, "evidence": self.evidence}


def _f(x: float) -> str:
    return f"{x:.3f}"


def kind_verdict(numbers: KindNumbers) -> Verdict:
    """At least as good as the best baseline: no baseline beats ``default`` significantly
    on nDCG@10 or MRR@10 (``PairedDiff.significant_loss``)."""
    row = f"{numbers.kind}: at least as good as the best baseline (no significant loss)"
    best = numbers.best_baseline()
    if DEFAULT not in numbers.metrics or best is None:
        return Verdict(row, INCOMPLETE, "default or every baseline missing")
    losses = [
        f"{b} {m} {p.diff.estimate:+.3f} (p {p.wilcoxon.p_value:.3g})"
        for b, by in numbers.paired.items()
        for m in LOSS_METRICS
        if (p := by.get(m)) is not None and p.significant_loss
    ]
    d = numbers.paired[best]["ndcg@10"]
    mine = numbers.metrics[DEFAULT]["ndcg@10"]
    theirs = numbers.metrics[best]["ndcg@10"]
    assert d is not None and mine is not None and theirs is not None
    evidence = (
        f"n {numbers.n}; nDCG@10 default {_f(mine.estimate)}, best baseline {best} "
        f"{_f(theirs.estimate)}, Δ {d.diff.estimate:+.3f} [{d.diff.low:+.3f}, "
        f"{d.diff.high:+.3f}], p {d.wilcoxon.p_value:.3g}"
    )
    if losses:
        return Verdict(row, FAIL, evidence + "; significant loss: " + ", ".join(losses))
    if d.diff.estimate < 0:
        evidence += "; behind, not significantly"
    return Verdict(row, PASS, evidence)


def pooled_verdict(numbers: KindNumbers, kinds_missing: Sequence[str] = ()) -> Verdict:
    """Pooled nDCG@10 beats the best single baseline: Δ > 0 (kind-weighted), the unscaled
    per-query differences' mean > 0 too, and Wilcoxon p < 0.01."""
    row = "pooled nDCG@10 over all kinds beats the best single baseline, p < 0.01"
    best = numbers.best_baseline()
    if DEFAULT not in numbers.metrics or best is None:
        return Verdict(row, INCOMPLETE, "default or every baseline missing")
    d = numbers.paired[best]["ndcg@10"]
    assert d is not None
    evidence = (
        f"best baseline {best}: Δ nDCG@10 {d.diff.estimate:+.3f} "
        f"[{d.diff.low:+.3f}, {d.diff.high:+.3f}], Wilcoxon p {d.wilcoxon.p_value:.3g} "
        f"(n {d.wilcoxon.n} untied of {numbers.n})"
    )
    ok = d.diff.estimate > 0 and d.raw_mean > 0 and d.wilcoxon.p_value < POOLED_ALPHA
    status = PASS if ok else FAIL
    if kinds_missing:
        status = INCOMPLETE if ok else FAIL
        evidence += "; kinds missing: " + ", ".join(kinds_missing)
    return Verdict(row, status, evidence)


def acc5_verdict(numbers: KindNumbers | None) -> Verdict:
    """Long reports: default's file Acc@5 at least the best baseline's + 0.10."""
    row = f"reports: file Acc@5 ≥ best baseline's + {ACC5_MARGIN:.2f}"
    if numbers is None or DEFAULT not in numbers.metrics:
        return Verdict(row, INCOMPLETE, "reports not run")
    best = numbers.best_baseline("acc@5")
    mine = numbers.metrics[DEFAULT]["acc@5"]
    if best is None or mine is None:
        return Verdict(row, INCOMPLETE, "no Acc@5")
    theirs = numbers.metrics[best]["acc@5"]
    assert theirs is not None
    gap = mine.estimate - theirs.estimate
    d = numbers.paired[best]["acc@5"]
    ci = f" [{d.diff.low:+.3f}, {d.diff.high:+.3f}]" if d else ""
    evidence = (
        f"n {numbers.n}; default {_f(mine.estimate)}, best baseline {best} "
        f"{_f(theirs.estimate)}: Δ {gap:+.3f}{ci}"
    )
    return Verdict(row, PASS if gap >= ACC5_MARGIN - 1e-9 else FAIL, evidence)


def code3_by_project(
    all_cells: Sequence[Cell], system: str = DEFAULT
) -> dict[str, tuple[float, int]]:
    """Per project: ``system``'s Code@3 over its code-intent queries of every kind."""
    out: dict[str, list[float]] = {}
    for c in all_cells:
        for v in c.values.get(system, {}).get("code@3", []):
            if v is not None:
                out.setdefault(c.project, []).append(v)
    return {p: (sum(vs) / len(vs), len(vs)) for p, vs in out.items() if vs}


def code3_verdict(by_project: dict[str, tuple[float, int]]) -> Verdict:
    row = f"Code@3 ≥ {CODE3_MIN} for code intent on every project"
    if not by_project:
        return Verdict(row, INCOMPLETE, "no code-intent query")
    low = sorted(by_project.items(), key=lambda kv: (kv[1][0], kv[0]))
    below = [f"{p} {_f(v)} (n {n})" for p, (v, n) in low if v < CODE3_MIN]
    worst = low[0]
    evidence = f"lowest {worst[0]} {_f(worst[1][0])} (n {worst[1][1]}) of {len(low)} projects"
    if below:
        return Verdict(row, FAIL, evidence + "; below: " + ", ".join(below))
    return Verdict(row, PASS, evidence)


def latency(all_cells: Sequence[Cell], system: str = DEFAULT) -> dict[str, dict[str, float]]:
    """Warm p50 / p95 (ms) of ``system`` per kind and over every query ("all")."""
    from llmc.eval.metrics import percentile

    by_kind: dict[str, list[float]] = {}
    for c in all_cells:
        by_kind.setdefault(c.kind, []).extend(c.took_ms.get(system, []))
    by_kind["all"] = [t for k in list(by_kind) for t in by_kind[k]]
    return {
        k: {"n": len(ts), "p50": percentile(ts, 50), "p95": percentile(ts, 95)}
        for k, ts in by_kind.items()
        if ts
    }


def latency_verdict(lat: dict[str, dict[str, float]], budget_ms: float) -> Verdict:
    row = f"warm p50 ≤ {P50_MS:.0f} ms and p95 ≤ {budget_ms:.0f} ms (search.budget_ms)"
    if "all" not in lat:
        return Verdict(row, INCOMPLETE, "no timings")
    a = lat["all"]
    evidence = f"default over {a['n']:.0f} queries: p50 {a['p50']:.1f} ms, p95 {a['p95']:.1f} ms"
    ok = a["p50"] <= P50_MS and a["p95"] <= budget_ms
    return Verdict(row, PASS if ok else FAIL, evidence)


# -- the whole report ----------------------------------------------------------------------
@dataclass
class EveryKindReport:
    split: str
    tasks: tuple[str, ...]
    max_queries: int
    seed: int
    resamples: int
    budget_ms: float
    runs: list[dict[str, Any]]  # records() of every project run
    kinds: dict[str, KindNumbers]
    pooled: KindNumbers | None
    pooled_by_query: KindNumbers | None  # every query the same weight (shown beside)
    code3: dict[str, tuple[float, int]]
    latency: dict[str, dict[str, float]]
    verdicts: list[Verdict]
    failures: list[dict[str, str]] = field(default_factory=list)

    def to_json(self, per_query: bool = False) -> dict[str, Any]:
        runs = [{k: v for k, v in r.items() if per_query or k != "systems"} for r in self.runs]
        return {
            "split": self.split,
            "tasks": list(self.tasks),
            "max_queries": self.max_queries,
            "seed": self.seed,
            "resamples": self.resamples,
            "budget_ms": self.budget_ms,
            "verdicts": [v.to_json() for v in self.verdicts],
            "kinds": {k: n.to_json() for k, n in self.kinds.items()},
            "pooled": self.pooled.to_json() if self.pooled else None,
            "pooled_by_query": self.pooled_by_query.to_json() if self.pooled_by_query else None,
            "code@3_by_project": {p: {"code@3": v, "n": n} for p, (v, n) in self.code3.items()},
            "latency_ms": self.latency,
            "failures": self.failures,
            "runs": runs,
        }


def summarize(
    runs: Sequence[dict[str, Any]],
    *,
    split: str,
    tasks: Sequence[str],
    max_queries: int = 60,
    seed: int = 0,
    resamples: int = 2000,
    budget_ms: float = 150.0,
    failures: Sequence[dict[str, str]] = (),
) -> EveryKindReport:
    """Numbers per kind, pooled, and the verdicts, from the records of every run."""
    all_cells = [c for r in runs for c in cells(r)]
    kinds: dict[str, KindNumbers] = {}
    for kind in KINDS:
        group = [c for c in all_cells if c.kind == kind]
        if not group:
            continue
        systems = [s for s in group[0].values if all(s in c.values for c in group)]
        systems.sort(key=lambda s: (s != DEFAULT, s))
        kinds[kind] = kind_numbers(kind, group, systems, resamples=resamples, seed=seed)
    everywhere = [
        s for s in (DEFAULT, *BASELINES) if all(s in c.values for c in all_cells) and all_cells
    ]
    pooled = (
        kind_numbers("pooled", all_cells, everywhere, resamples=resamples, seed=seed)
        if everywhere
        else None
    )
    by_query = None
    if everywhere:  # the same numbers with every query weighing the same: one "kind"
        flat = [Cell("all", f"{c.kind}/{c.project}", c.values, c.took_ms) for c in all_cells]
        by_query = kind_numbers("pooled, per query", flat, everywhere, resamples=resamples,
                                seed=seed)  # fmt: skip
    expected = _expected_kinds(tasks)
    missing = [k for k in expected if k not in kinds]
    verdicts = [kind_verdict(kinds[k]) for k in KINDS if k in kinds]
    verdicts += [
        Verdict(f"{k}: at least as good as the best baseline", INCOMPLETE, "not run")
        for k in missing
    ]
    verdicts.append(
        pooled_verdict(pooled, missing)
        if pooled
        else Verdict("pooled nDCG@10 beats the best single baseline", INCOMPLETE, "nothing run")
    )
    verdicts.append(acc5_verdict(kinds.get(REPORTS)))
    code3 = code3_by_project(all_cells)
    verdicts.append(code3_verdict(code3))
    lat = latency(all_cells)
    verdicts.append(latency_verdict(lat, budget_ms))
    if failures:  # a verdict that saw fewer projects than asked for is not a pass
        failed = {f["task"] for f in failures}
        verdicts = [
            Verdict(v.row, INCOMPLETE, v.evidence + " (a run failed)")
            if v.status == PASS and _touched(v.row, failed)
            else v
            for v in verdicts
        ]
    return EveryKindReport(
        split, tuple(tasks), max_queries, seed, resamples, budget_ms, list(runs), kinds,
        pooled, by_query, code3, lat, verdicts, list(failures),
    )  # fmt: skip


def _touched(row: str, failed_tasks: set[str]) -> bool:
    kind = row.split(":", 1)[0]
    if kind in KINDS:
        return (QUESTIONS if kind.startswith("questions-") else kind) in failed_tasks
    return True


def _expected_kinds(tasks: Sequence[str]) -> list[str]:
    out = []
    for t in tasks:
        out += [k for k in KINDS if k.startswith("questions-")] if t == QUESTIONS else [t]
    return out


__all__ = [
    "BASELINES",
    "KINDS",
    "TASK_LETTERS",
    "Cell",
    "EveryKindReport",
    "KindNumbers",
    "PairedDiff",
    "Verdict",
    "cells",
    "code3_verdict",
    "kind_numbers",
    "kind_verdict",
    "parse_tasks",
    "pool",
    "pooled_verdict",
    "records",
    "summarize",
    "systems_for",
]
