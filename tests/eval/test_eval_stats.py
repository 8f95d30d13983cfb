"""Paired tests against known values."""

from __future__ import annotations

import pytest

from llmc.eval.stats import binom_two_sided_p, mcnemar, wilcoxon


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
