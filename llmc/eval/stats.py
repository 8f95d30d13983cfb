"""Paired significance tests for two variants run on the same queries.

- ``wilcoxon``: two-sided Wilcoxon signed-rank test on paired scores (llmc uses the
  reciprocal ranks). Pairs with equal scores are dropped (Wilcoxon's original zero
  method); scipy chooses the exact distribution for small n without ties, else the
  normal approximation. scipy is imported when the test runs.
- ``mcnemar``: two-sided exact McNemar test on paired booleans (llmc uses hit@5): with
  b = pairs where only A hits and c = pairs where only B hits, p = min(1, 2 *
  P[X <= min(b, c)]) for X ~ Binomial(b + c, 1/2), by ``scipy.stats.binomtest``.
- ``sign_test_p``: one-sided sign test (wins against losses), also ``binomtest``.
- ``bootstrap_ci``: percentile bootstrap CI of a mean, optionally stratified (resampling
  within each stratum, e.g. queries within their project, so each keeps its size);
  ``paired_bootstrap_ci``: the same for the mean of paired differences. numpy, seeded.
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


@dataclass(frozen=True)
class BootstrapCI:
    """A mean, its percentile bootstrap interval at ``confidence``, and how it was drawn."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    n: int

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "n": self.n,
        }


def bootstrap_ci(
    values: Sequence[float],
    strata: Sequence[Any] | None = None,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapCI:
    """Percentile bootstrap CI of the mean of ``values``.

    Each resample draws, with replacement, as many values as there are from each stratum
    (``strata[i]`` names the stratum of ``values[i]``; None: one stratum), and takes the
    mean of all drawn values. The interval is the (1 - confidence) / 2 and (1 + confidence)
    / 2 percentiles of the resampled means (numpy's linear interpolation).
    """
    import numpy as np

    if not values:
        raise ValueError("bootstrap of no values")
    if strata is not None and len(strata) != len(values):
        raise ValueError(f"{len(values)} values but {len(strata)} strata")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be positive and confidence within (0, 1)")
    data = np.asarray(values, dtype=float)
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(strata if strata is not None else [0] * len(values)):
        groups.setdefault(s, []).append(i)
    rng = np.random.default_rng(seed)
    totals = np.zeros(resamples)
    for key in sorted(groups, key=str):
        part = data[groups[key]]
        picks = rng.integers(0, len(part), size=(resamples, len(part)))
        totals += part[picks].sum(axis=1)
    means = totals / len(data)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return BootstrapCI(
        float(data.mean()), float(low), float(high), confidence, resamples, len(data)
    )


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    strata: Sequence[Any] | None = None,
    *,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> BootstrapCI:
    """Bootstrap CI of the mean of a - b over paired values (the same pairs resampled)."""
    _check_paired(a, b)
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    return bootstrap_ci(diffs, strata, resamples=resamples, confidence=confidence, seed=seed)


__all__ = [
    "BootstrapCI",
    "TestResult",
    "binom_two_sided_p",
    "bootstrap_ci",
    "mcnemar",
    "paired_bootstrap_ci",
    "sign_test_p",
    "wilcoxon",
]
