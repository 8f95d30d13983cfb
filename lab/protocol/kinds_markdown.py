"""An ``EveryKindReport`` as Markdown: the verdicts first, then per kind and pooled (every
system with 95% CIs; ``default`` minus each baseline, paired), per project, Code@3 per
project, latency, and what failed. A cell is ``estimate [low, high]``."""

from __future__ import annotations

from lab.protocol.core import DEFAULT, REPORTS
from lab.protocol.kinds import ACC, FILE_KINDS, Cell, EveryKindReport, KindNumbers, cells
from lab.protocol.tables import ci_cell, p_cell

LABELS = {
    "mrr@10": "MRR@10",
    "ndcg@10": "nDCG@10",
    "hit@5": "Hit@5",
    "code@3": "Code@3",
    "acc@1": "Acc@1",
    "acc@5": "Acc@5",
    "acc@10": "Acc@10",
}


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _metrics_of(kind: str) -> tuple[str, ...]:
    base = ("mrr@10", "ndcg@10", "hit@5", "code@3")
    return base + ACC if kind == REPORTS else base


def numbers_section(title: str, nums: KindNumbers) -> list[str]:
    metrics = _metrics_of(nums.kind)
    out = [f"### {title}", ""]
    out.append(
        f"{nums.n} queries over {len(nums.projects)} project(s): {', '.join(nums.projects)}."
    )
    out.append("")
    rows = [(s, *(ci_cell(by.get(m)) for m in metrics)) for s, by in nums.metrics.items()]
    out += _table(("system", *(LABELS[m] for m in metrics)), rows)
    compared = ("ndcg@10", "mrr@10") + (("acc@5",) if nums.kind == REPORTS else ())
    prow = []
    for b, by in nums.paired.items():
        for m in compared:
            p = by.get(m)
            if p is None:
                continue
            loss = " (significant loss)" if p.significant_loss and m != "acc@5" else ""
            prow.append((b, LABELS[m], ci_cell(p.diff, signed=True) + loss,
                         p_cell(p.wilcoxon.p_value), str(p.wilcoxon.n)))  # fmt: skip
    if prow:
        out += [
            "",
            f"{DEFAULT} minus each baseline (95% paired bootstrap CI; Wilcoxon signed-rank):",
            "",
        ]
        out += _table(("baseline", "metric", "Δ", "p (Wilcoxon)", "n untied"), prow)
    return out + [""]


def per_project(report: EveryKindReport) -> list[str]:
    """nDCG@10 (file level for commits and reports) per kind and project, every system."""
    all_cells: list[Cell] = [c for r in report.runs for c in cells(r)]
    systems: list[str] = []
    for c in all_cells:
        systems += [s for s in c.values if s not in systems]
    systems.sort(key=lambda s: (s != DEFAULT, s))
    rows = []
    for c in all_cells:
        vals = []
        for s in systems:
            xs = [x for x in c.values.get(s, {}).get("ndcg@10", []) if x is not None]
            vals.append(f"{sum(xs) / len(xs):.3f}" if xs else "-")
        rows.append((c.kind, c.project, str(c.n), *vals))
    out = ["### nDCG@10 per kind and project (means; file level for commits and reports)", ""]
    return out + _table(("kind", "project", "n", *systems), rows) + [""]


def markdown(report: EveryKindReport) -> str:
    out = [
        f"## Every kind, {report.split} split: tasks {', '.join(report.tasks)}",
        "",
        f"At most {report.max_queries} queries a project and task (seed {report.seed}); 95% "
        f"bootstrap CIs, {report.resamples} resamples within (kind, project). Pooled: every "
        "kind weighs the same, every query the same within its kind "
        "(`lab/protocol/kinds.py`). Code: "
        + ", ".join(sorted({str(r.get("code", "?")) for r in report.runs}) or ["-"])
        + ".",
        "",
        "### Verdicts (issue 28, done when)",
        "",
    ]
    out += _table(
        ("row", "status", "evidence"), [(v.row, v.status, v.evidence) for v in report.verdicts]
    )
    out.append("")
    if report.failures:
        out += ["### Failed runs", ""]
        out += [f"- {f['task']}, {f['project']}: {f['error']}" for f in report.failures]
        out.append("")
    summary = []
    for kind, nums in report.kinds.items():
        best = nums.best_baseline()
        mine = nums.metrics.get(DEFAULT, {}).get("ndcg@10")
        theirs = nums.metrics.get(best or "", {}).get("ndcg@10")
        d = nums.paired.get(best or "", {}).get("ndcg@10")
        level = "file" if kind in FILE_KINDS else "span"
        summary.append((
            kind, level, str(nums.n), ci_cell(mine), best or "-", ci_cell(theirs),
            ci_cell(d.diff, signed=True) if d else "-", p_cell(d.wilcoxon.p_value) if d else "-",
        ))  # fmt: skip
    if report.pooled is not None:
        nums = report.pooled
        best = nums.best_baseline()
        d = nums.paired.get(best or "", {}).get("ndcg@10")
        summary.append((
            "**pooled (kinds equal)**", "both", str(nums.n),
            ci_cell(nums.metrics[DEFAULT]["ndcg@10"]), best or "-",
            ci_cell(nums.metrics.get(best or "", {}).get("ndcg@10")),
            ci_cell(d.diff, signed=True) if d else "-", p_cell(d.wilcoxon.p_value) if d else "-",
        ))  # fmt: skip
    out += ["### nDCG@10 per kind against its best baseline", ""]
    out += _table(
        ("kind", "level", "n", "default", "best baseline", "its nDCG@10", "Δ", "p (Wilcoxon)"),
        summary,
    )
    out.append("")
    for kind, nums in report.kinds.items():
        out += numbers_section(f"Kind: {kind}", nums)
    if report.pooled is not None:
        out += numbers_section("Pooled over kinds (every kind the same weight)", report.pooled)
    if report.pooled_by_query is not None:
        out += numbers_section("Pooled, every query the same weight (for comparison)",
                               report.pooled_by_query)  # fmt: skip
    out += per_project(report)
    out += ["### Code@3 of default per project (code-intent queries of every kind)", ""]
    out += _table(("project", "Code@3", "n"),
                  [(p, f"{v:.3f}", str(n)) for p, (v, n) in sorted(report.code3.items())])  # fmt: skip
    out += [
        "",
        "### Warm latency of default (ms, as timed by the run; the machine may be shared)",
        "",
    ]
    out += _table(("kind", "n", "p50", "p95"),
                  [(k, f"{v['n']:.0f}", f"{v['p50']:.1f}", f"{v['p95']:.1f}")
                   for k, v in report.latency.items()])  # fmt: skip
    out += ["", "### Runs", ""]
    out += _table(("task", "project", "version", "spans", "seconds", "warnings"), [
        (r["task"], r["project"], str(r.get("version", "")), str(r.get("spans", "")),
         f"{r.get('seconds', 0):.0f}", "; ".join(r.get("warnings", []))[:200])
        for r in report.runs
    ])  # fmt: skip
    return "\n".join(out) + "\n"


__all__ = ["markdown", "numbers_section", "per_project"]
