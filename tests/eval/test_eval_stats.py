"""Paired tests against known values."""

from __future__ import annotations

import pytest

from llmc.eval.stats import (
    binom_two_sided_p,
    bootstrap_ci,
    mcnemar,
    paired_bootstrap_ci,
    wilcoxon,
)


def test_wilcoxon_known_value():
    # scipy.stats.wilcoxon's documented example: 15 differences, W = 24, exact p.
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    res = wilcoxon(d, [0] * len(d))
    assert res.statistic == 24
    assert res.p_value == pytest.approx(0.041259765625)
    assert res.n == 15


def test_wilcoxon_by_hand():
    # three positive differences: W- = 0, P = 2 * (1/2)^3
    res = wilcoxon([1.0, 0.5, 1 / 3], [0.0, 0.0, 0.0])
    assert res.p_value == pytest.approx(0.25)


def test_wilcoxon_drops_ties_and_handles_all_equal():
    a = [1.0, 0.5, 1 / 3, 0.2, 0.2]
    b = [0.0, 0.0, 0.0, 0.2, 0.2]
    assert wilcoxon(a, b).p_value == pytest.approx(0.25)
    assert wilcoxon(a, b).n == 3
    same = wilcoxon([0.5, 1.0], [0.5, 1.0])
    assert (same.p_value, same.n) == (1.0, 0)


def test_mcnemar_exact():
    a = [True] * 1 + [False] * 9 + [True] * 20 + [False] * 5
    b = [False] * 1 + [True] * 9 + [True] * 20 + [False] * 5
    res = mcnemar(a, b)
    # b = 1, c = 9: p = 2 * (C(10,0) + C(10,1)) / 2^10
    assert res.p_value == pytest.approx(22 / 1024)
    assert (res.statistic, res.n) == (1, 10)
    assert mcnemar(b, a).p_value == pytest.approx(22 / 1024)


def test_mcnemar_edges():
    assert mcnemar([True, False], [True, False]).p_value == 1.0
    assert mcnemar([False] * 5, [True] * 5).p_value == pytest.approx(2 / 32)
    assert binom_two_sided_p(5, 10) == 1.0  # capped
    assert binom_two_sided_p(0, 0) == 1.0


def test_paired_lengths_must_match():
    with pytest.raises(ValueError):
        mcnemar([True], [True, False])
    with pytest.raises(ValueError):
        wilcoxon([1.0], [])


def test_bootstrap_ci_hand_checked():
    # [0, 0, 0, 1]: a resample's mean is K/4 with K ~ Binomial(4, 1/4); P(K = 0) = 81/256,
    # P(K <= 2) = 243/256 = 0.949 < 0.975 <= P(K <= 3) = 255/256: the 95% interval is
    # [0, 0.75] (2.5th and 97.5th percentiles of the resampled means).
    ci = bootstrap_ci([0.0, 0.0, 0.0, 1.0], resamples=20000, seed=1)
    assert (ci.estimate, ci.low, ci.high) == (0.25, 0.0, 0.75)
    assert (ci.resamples, ci.n, ci.confidence) == (20000, 4, 0.95)
    assert bootstrap_ci([0.0, 0.0, 0.0, 1.0], resamples=500, seed=7) == bootstrap_ci(
        [0.0, 0.0, 0.0, 1.0], resamples=500, seed=7
    )  # seeded
    const = bootstrap_ci([0.5] * 5)
    assert (const.low, const.estimate, const.high) == (0.5, 0.5, 0.5)


def test_bootstrap_ci_stratified_resamples_within_strata():
    # Strata keep their sizes: stratum a = [0, 1] sums to 0, 1 or 2 (p 1/4, 1/2, 1/4),
    # stratum b = [5, 5] always to 10, so the pooled mean is 2.5, 2.75 or 3.0.
    values, strata = [0.0, 1.0, 5.0, 5.0], ["a", "a", "b", "b"]
    ci = bootstrap_ci(values, strata, resamples=4000, seed=3)
    assert (ci.estimate, ci.low, ci.high) == (2.75, 2.5, 3.0)
    # Unstratified, a resample may draw 5 four times (mean 5) or 0 four times.
    wide = bootstrap_ci(values, resamples=4000, seed=3)
    assert wide.low < 2.5 and wide.high > 3.0
    # Constant within each stratum: every resample is the pooled mean 2/6.
    fixed = bootstrap_ci([1.0, 1.0, 0.0, 0.0, 0.0, 0.0], list("aabbbb"))
    assert fixed.low == fixed.high == pytest.approx(1 / 3)


def test_paired_bootstrap_ci():
    ci = paired_bootstrap_ci([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    assert (ci.estimate, ci.low, ci.high) == (1.0, 1.0, 1.0)
    ci = paired_bootstrap_ci([1.0, 0.0, 0.0, 0.0], [0.0] * 4, resamples=20000, seed=1)
    assert (ci.estimate, ci.low, ci.high) == (0.25, 0.0, 0.75)  # as in the hand check above
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0], [])
    with pytest.raises(ValueError):
        bootstrap_ci([])
