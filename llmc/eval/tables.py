"""An EvalReport as plain rows of text: the CLI draws them with rich, scripts as markdown."""

from __future__ import annotations

from llmc.eval.runner import DEFAULT, EvalReport

SUMMARY_COLUMNS = (
    "variant",
    "n",
    "MRR@10",
    "nDCG@10",
    "R@5 span",
    "R@10 span",
    "R@5 file",
    "R@10 file",
    "Hit@5",
    "Code@3",
    "p50 ms",
    "p95 ms",
    "p RR",
    "p hit@5",
)
# The same numbers in two narrower tables for a terminal.
_QUALITY = (0, 2, 3, 4, 5, 8, 9)
_MORE = (0, 6, 7, 10, 11, 12, 13)
QUALITY_COLUMNS = tuple(SUMMARY_COLUMNS[i] for i in _QUALITY)
LATENCY_COLUMNS = tuple(SUMMARY_COLUMNS[i] for i in _MORE)
INTENT_COLUMNS = ("variant", "intent", "n", "MRR@10", "nDCG@10", "R@10 span", "Code@3")
COMPARE_COLUMNS = ("A", "B", "n", "MRR A", "MRR B", "nDCG A", "nDCG B", "p RR", "p hit@5")


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _p(x: float | None) -> str:
    if x is None:
        return "-"
    return "<0.001" if x < 0.001 else f"{x:.3f}"


def summary_rows(report: EvalReport) -> list[tuple[str, ...]]:
    """One row per variant over all queries; p-values test it against ``default``."""
    rows = []
    for name, run in report.variants.items():
        s = run.summary["all"]
        c = report.comparison(DEFAULT, name) if name != DEFAULT else None
        rows.append(
            (
                name,
                str(s.n),
                _f(s.mrr),
                _f(s.ndcg),
                _f(s.span_recall_5),
                _f(s.span_recall_10),
                _f(s.file_recall_5),
                _f(s.file_recall_10),
                _f(s.hit_5),
                _f(s.code_3),
                _f(s.p50_ms, 1),
                _f(s.p95_ms, 1),
                _p(c.wilcoxon_rr.p_value) if c else "-",
                _p(c.mcnemar_hit5.p_value) if c else "-",
            )
        )
    return rows


def quality_rows(report: EvalReport) -> list[tuple[str, ...]]:
    """Ranking quality: variant, MRR, nDCG, span recall, Hit@5, Code@3."""
    return [tuple(r[i] for i in _QUALITY) for r in summary_rows(report)]


def latency_rows(report: EvalReport) -> list[tuple[str, ...]]:
    """File recall, latency and the p-values against default."""
    return [tuple(r[i] for i in _MORE) for r in summary_rows(report)]


def intent_rows(report: EvalReport) -> list[tuple[str, ...]]:
    rows = []
    for name, run in report.variants.items():
        for bucket, s in run.summary.items():
            if bucket == "all":
                continue
            rows.append(
                (name, bucket, str(s.n), _f(s.mrr), _f(s.ndcg), _f(s.span_recall_10),
                 _f(s.code_3))
            )  # fmt: skip
    return rows


def comparison_rows(report: EvalReport) -> list[tuple[str, ...]]:
    return [
        (
            c.a,
            c.b,
            str(c.n),
            _f(c.mrr_a),
            _f(c.mrr_b),
            _f(c.ndcg_a),
            _f(c.ndcg_b),
            _p(c.wilcoxon_rr.p_value),
            _p(c.mcnemar_hit5.p_value),
        )
        for c in report.comparisons
    ]


def markdown_table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(report: EvalReport) -> str:
    """The whole report as markdown: summary, per intent."""
    parts = [
        f"### {report.set_name} ({report.n_queries} queries, k={report.k})",
        "",
        markdown_table(SUMMARY_COLUMNS, summary_rows(report)),
        "",
        markdown_table(INTENT_COLUMNS, intent_rows(report)),
    ]
    if report.skipped_variants:
        parts += ["", f"Skipped (stage not built): {', '.join(report.skipped_variants)}"]
    return "\n".join(parts) + "\n"


__all__ = [
    "COMPARE_COLUMNS",
    "INTENT_COLUMNS",
    "LATENCY_COLUMNS",
    "QUALITY_COLUMNS",
    "SUMMARY_COLUMNS",
    "comparison_rows",
    "intent_rows",
    "latency_rows",
    "markdown",
    "markdown_table",
    "quality_rows",
    "summary_rows",
]
