"""One variant against another over the same queries: means and paired tests.

``compare_scores`` is the one comparison llmc makes of two runs, whoever ran them:
``llmc eval --compare`` (two pipeline variants) and ``llmc tune`` (untuned against tuned,
on held-out queries). Paired two-sided Wilcoxon signed-rank on nDCG@10 and on reciprocal
rank, exact McNemar on hit@5 (``llmc.eval.stats``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores
from llmc.eval.stats import TestResult, mcnemar, wilcoxon


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


@dataclass(frozen=True)
class Comparison:
    """Paired tests of run ``a`` against run ``b`` over the same queries."""

    a: str
    b: str
    n: int
    mrr_a: float
    mrr_b: float
    ndcg_a: float
    ndcg_b: float
    wilcoxon_rr: TestResult
    mcnemar_hit5: TestResult
    wilcoxon_ndcg: TestResult

    @property
    def delta_ndcg(self) -> float:
        """Mean nDCG@10 of ``b`` minus ``a``."""
        return self.ndcg_b - self.ndcg_a

    @property
    def p_ndcg(self) -> float:
        return self.wilcoxon_ndcg.p_value

    @property
    def p_rr(self) -> float:
        return self.wilcoxon_rr.p_value

    @property
    def p_hit5(self) -> float:
        return self.mcnemar_hit5.p_value

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "n": self.n,
            "mrr@10": {"a": round(self.mrr_a, 4), "b": round(self.mrr_b, 4)},
            "ndcg@10": {"a": round(self.ndcg_a, 4), "b": round(self.ndcg_b, 4)},
            "wilcoxon_ndcg": self.wilcoxon_ndcg.to_json(),
            "wilcoxon_rr": self.wilcoxon_rr.to_json(),
            "mcnemar_hit@5": self.mcnemar_hit5.to_json(),
            "delta_ndcg": round(self.delta_ndcg, 4),
            "p_ndcg": round(self.p_ndcg, 4),
            "p_rr": round(self.p_rr, 4),
            "p_hit5": round(self.p_hit5, 4),
        }


def compare_scores(
    a: str, a_scores: Sequence[QueryScores], b: str, b_scores: Sequence[QueryScores]
) -> Comparison:
    """Compare two runs' per-query scores (same queries, same order)."""
    if len(a_scores) != len(b_scores):
        raise EvalError(f"{a} and {b} ran different queries ({len(a_scores)} vs {len(b_scores)})")
    return Comparison(
        a=a,
        b=b,
        n=len(a_scores),
        mrr_a=_mean([s.rr for s in a_scores]),
        mrr_b=_mean([s.rr for s in b_scores]),
        ndcg_a=_mean([s.ndcg for s in a_scores]),
        ndcg_b=_mean([s.ndcg for s in b_scores]),
        wilcoxon_rr=wilcoxon([s.rr for s in a_scores], [s.rr for s in b_scores]),
        mcnemar_hit5=mcnemar([s.hit_5 for s in a_scores], [s.hit_5 for s in b_scores]),
        wilcoxon_ndcg=wilcoxon([s.ndcg for s in a_scores], [s.ndcg for s in b_scores]),
    )


__all__ = ["Comparison", "compare_scores"]
