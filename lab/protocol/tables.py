"""A ProtocolReport as tables: plain rows (title, header, rows) the CLI draws with rich and
``markdown`` writes for docs. A cell is ``estimate [low, high]``."""

from __future__ import annotations

from lab.protocol.core import DEFAULT, METRICS, Numbers, ProtocolReport
from llmc.eval.stats import BootstrapCI

Table = tuple[str, tuple[str, ...], list[tuple[str, ...]]]
LABELS = {"mrr@10": "MRR@10", "ndcg@10": "nDCG@10", "hit@5": "Hit@5", "code@3": "Code@3"}


def ci_cell(ci: BootstrapCI | None, signed: bool = False) -> str:
    if ci is None:
        return "-"
    f = "+.3f" if signed else ".3f"
    return f"{ci.estimate:{f}} [{ci.low:{f}}, {ci.high:{f}}]"


def p_cell(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def pooled_table(report: ProtocolReport, task: str) -> Table:
    pooled = report.pooled[task]
    n_projects = sum(1 for r in report.runs if r.task == task)
    title = (
        f"{report.split} split, task {task}: {pooled.n} queries over {n_projects} projects, "
        f"pooled (95% bootstrap CI, {report.resamples} resamples within projects)"
    )
    header = ("system", *(LABELS[m] for m in METRICS))
    rows = [(system, *(ci_cell(by[m]) for m in METRICS)) for system, by in pooled.metrics.items()]
    return title, header, rows


def paired_rows(label: str, numbers: Numbers) -> list[tuple[str, ...]]:
    return [
        (
            label,
            p.b,
            ci_cell(p.mrr_diff, signed=True),
            p_cell(p.wilcoxon_rr.p_value),
            str(p.wilcoxon_rr.n),
        )
        for p in numbers.paired
    ]


def paired_table(report: ProtocolReport, task: str) -> Table:
    title = (
        f"{DEFAULT} against each baseline, task {task}: MRR@10 difference (default minus "
        "baseline, 95% paired bootstrap CI) and Wilcoxon signed-rank p on reciprocal ranks"
    )
    header = ("projects", "baseline", "ΔMRR@10", "p (Wilcoxon)", "n untied")
    rows = paired_rows("pooled", report.pooled[task])
    for r in report.runs:
        if r.task == task:
            rows += paired_rows(r.project.name, r.numbers)
    return title, header, rows


def metric_table(report: ProtocolReport, task: str, metric: str) -> Table:
    title = f"{LABELS[metric]} per project, task {task} (95% bootstrap CI)"
    header = ("project", "n", "spans", *report.systems)
    rows = []
    for r in report.runs:
        if r.task != task:
            continue
        name = f"{r.project.name} {r.project.version} ({r.project.ecosystem})"
        cells = tuple(ci_cell(r.numbers.metrics[s][metric]) for s in report.systems)
        rows.append((name, str(r.numbers.n), str(r.spans), *cells))
    pooled = report.pooled[task]
    rows.append(
        (
            "pooled",
            str(pooled.n),
            str(sum(r.spans for r in report.runs if r.task == task)),
            *(ci_cell(pooled.metrics[s][metric]) for s in report.systems),
        )
    )
    return title, header, rows


def tables(report: ProtocolReport) -> list[Table]:
    out: list[Table] = []
    for task in report.tasks:
        out.append(pooled_table(report, task))
        out.append(paired_table(report, task))
        out += [metric_table(report, task, m) for m in METRICS]
    return out


def markdown(report: ProtocolReport) -> str:
    parts = []
    for title, header, rows in tables(report):
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        parts.append("\n".join(lines))
    if report.skipped_systems:
        parts.append("Skipped (config keys missing): " + ", ".join(report.skipped_systems))
    return "\n\n".join(parts) + "\n"


__all__ = ["ci_cell", "markdown", "metric_table", "paired_table", "pooled_table", "tables"]
