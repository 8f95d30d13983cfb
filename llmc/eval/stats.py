"""Paired significance tests for two variants run on the same queries.

- ``wilcoxon``: two-sided Wilcoxon signed-rank test on paired scores (llmc uses the
  reciprocal ranks). Pairs with equal scores are dropped (Wilcoxon's original zero
  method); scipy chooses the exact distribution for small n without ties, else the
  normal approximation. scipy is imported when the test runs.
- ``mcnemar``: two-sided exact McNemar test on paired booleans (llmc uses hit@5): with
  b = pairs where only A hits and c = pairs where only B hits, p = min(1, 2 *
  P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2), by ``scipy.stats.binomtest``.
- ``sign_test_p``: one-sided sign test (wins against losses), also ``binomtest``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TestResult:
    """A test's statistic and two-sided p-value; ``n`` counts the informative pairs."""

    name: str
    statistic: float
    p_value: float
    n: int

    __test__ = False  # not a pytest test class

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.name,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "n": self.n,
        }


def _check_paired(a: Sequence[Any], b: Sequence[Any]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")


def wilcoxon(a: Sequence[float], b: Sequence[float]) -> TestResult:
    """Two-sided Wilcoxon signed-rank test of a - b; p = 1.0 when every pair is equal."""
    _check_paired(a, b)
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    nonzero = [d for d in diffs if d != 0.0]
    if not nonzero:
        return TestResult("wilcoxon", 0.0, 1.0, 0)
    from scipy import stats

    res = stats.wilcoxon(nonzero, zero_method="wilcox", alternative="two-sided")
    return TestResult("wilcoxon", float(res.statistic), float(res.pvalue), len(nonzero))


def binom_two_sided_p(successes: int, trials: int) -> float:
    """Exact two-sided p of ``successes`` in ``trials`` fair coin flips (``scipy.stats.binomtest``;
    for a fair coin its two-sided p is the doubled smaller tail, capped at 1)."""
    if trials == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(successes, trials, 0.5, alternative="two-sided").pvalue)


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided sign test: P(at least ``wins`` of ``wins + losses`` fair coin flips), by
    ``scipy.stats.binomtest``; 1.0 when there are no wins and no losses."""
    if wins + losses == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue)


def mcnemar(a: Sequence[bool], b: Sequence[bool]) -> TestResult:
    """Exact McNemar test; the statistic is b (pairs where only A is true)."""
    _check_paired(a, b)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return TestResult(
        "mcnemar", float(only_a), binom_two_sided_p(only_a, only_a + only_b), only_a + only_b
    )


__all__ = ["TestResult", "binom_two_sided_p", "mcnemar", "sign_test_p", "wilcoxon"]
