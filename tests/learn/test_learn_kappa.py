"""Cohen's kappa with hand-computed numbers, and agreement between labelers."""

from __future__ import annotations

import math

import pytest

from llmc.learn.judgments import Label
from llmc.learn.kappa import agreement, cohen_kappa


def _pairs(counts: dict[tuple[str, str], int]) -> tuple[list[str], list[str]]:
    a, b = [], []
    for (x, y), n in counts.items():
        a += [x] * n
        b += [y] * n
    return a, b


def test_kappa_two_categories_by_hand():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 35/50 = 0.7; A says yes 25/50, B says yes 30/50;
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    a, b = _pairs({("y", "y"): 20, ("y", "n"): 5, ("n", "y"): 10, ("n", "n"): 15})
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_weighted_kappa_by_hand():
    # a = 0 1 2, b = 0 2 2 on categories 0..2, linear weights |i - j| / 2.
    # observed disagreement: item 2 (1 vs 2) weighs 0.5 -> 0.5 / 3 = 1/6.
    # A's marginals 1/3 each; B's 1/3, 0, 2/3. Expected disagreement:
    # (1/3) * [(0 + 1 * 2/3) + (0.5 * 1/3 + 0.5 * 2/3) + (1 * 1/3 + 0)] = 0.5.
    # kappa = 1 - (1/6) / 0.5 = 2/3.
    assert cohen_kappa([0, 1, 2], [0, 2, 2], [0, 1, 2], "linear") == pytest.approx(2 / 3)
    # Quadratic weights: 1 vs 2 costs 0.25; expected (1/3) * [2/3 + (1/12 + 1/6) + 1/3] = 5/12.
    assert cohen_kappa([0, 1, 2], [0, 2, 2], [0, 1, 2], "quadratic") == pytest.approx(
        1 - (0.25 / 3) / (5 / 12)
    )


def test_kappa_matches_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    a = [3, 2, 2, 0, 1, 3, 0, 0, 2, 1, 3, 3]
    b = [3, 1, 2, 0, 2, 3, 1, 0, 2, 0, 2, 3]
    for weights in (None, "linear", "quadratic"):
        expected = cohen_kappa_score(a, b, labels=[0, 1, 2, 3], weights=weights)
        assert cohen_kappa(a, b, [0, 1, 2, 3], weights) == pytest.approx(expected)


def test_kappa_edge_cases():
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) == 1.0  # chance agreement is already perfect
    assert cohen_kappa([0, 1], [1, 0]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError):
        cohen_kappa([], [])
    with pytest.raises(ValueError):
        cohen_kappa([1], [1], weights="cubic")


def _label(labeler: str, path: str, grade: int, query: str = "q", source: str = "label"):
    return Label(query, path, 1, 5, grade, "code", labeler, source)


def test_agreement_pairs_labelers_on_shared_items_latest_label_wins():
    labels = [
        _label("ana", "a.py", 3),
        _label("ana", "b.py", 0),
        _label("ana", "c.py", 2),
        _label("bo", "a.py", 1),
        _label("bo", "a.py", 3),  # bo changed their mind: the latest label counts
        _label("bo", "b.py", 0),
        _label("bo", "c.py", 1),
        _label("bo", "only-bo.py", 3),  # not shared: not compared
        _label("feedback", "a.py", 0, source="feedback"),  # thumbs are not a labeler
    ]
    (pair,) = agreement(labels)
    assert (pair.a, pair.b, pair.n) == ("ana", "bo", 3)
    assert pair.observed == pytest.approx(2 / 3)
    assert pair.confusion[2][1] == 1 and pair.confusion[3][3] == 1 and pair.confusion[0][0] == 1
    assert pair.kappa == pytest.approx(cohen_kappa([3, 0, 2], [3, 0, 1], [0, 1, 2, 3]))
    # relevant (>= 2) or not: ana T F T, bo T F F -> p_o 2/3, p_e 2/3*1/3 + 1/3*2/3 = 4/9
    assert pair.relevant_kappa == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
    assert not math.isnan(pair.weighted_kappa)
    assert agreement(labels, include_feedback=True)[0].a == "ana"
    assert len(agreement(labels, include_feedback=True)) == 3
