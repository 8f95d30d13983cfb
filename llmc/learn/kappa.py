"""Inter-annotator agreement: Cohen's kappa over items two labelers both graded.

``cohen_kappa(a, b)`` is (p_o - p_e) / (1 - p_e): p_o the share of items on which the
two agree, p_e the agreement expected by chance from each labeler's own grade
frequencies. With ``weights="linear"`` or ``"quadratic"`` disagreements are penalised by
their distance on the ordinal 0-3 scale (|i - j| / 3, or its square), which suits graded
relevance: 3 against 2 is a smaller disagreement than 3 against 0. When chance agreement
is already perfect (both labelers used one and the same grade throughout) kappa is
undefined; it is reported as 1.0 then (they agree on everything).

Hand numbers: 50 items, both say yes on 20, both no on 15, A yes/B no on 5, A no/B yes
on 10: p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from llmc.learn.judgments import GRADES, Label, latest


def cohen_kappa(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    categories: Sequence[Hashable] | None = None,
    weights: str | None = None,
) -> float:
    """Cohen's kappa of two paired label sequences (see the module docstring), computed by
    ``sklearn.metrics.cohen_kappa_score``; ``categories`` fixes the order weights use."""
    if len(a) != len(b):
        raise ValueError(f"paired labels differ in length: {len(a)} and {len(b)}")
    if not a:
        raise ValueError("no paired labels")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, linear or quadratic, got {weights!r}")
    cats = list(categories) if categories is not None else sorted(set(a) | set(b), key=str)
    unknown = (set(a) | set(b)) - set(cats)
    if unknown:
        raise ValueError(f"labels not among the categories: {sorted(unknown, key=str)}")
    if len(set(a) | set(b)) == 1:
        return 1.0  # one and the same grade throughout: chance agreement is already perfect
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(list(a), list(b), labels=cats, weights=weights))


@dataclass(frozen=True)
class Agreement:
    """Two labelers on the items both graded."""

    a: str
    b: str
    n: int
    observed: float  # share of items with the same grade
    kappa: float  # unweighted, on the four grades
    weighted_kappa: float  # quadratic weights on the 0-3 scale
    relevant_kappa: float  # on relevant (grade >= 2) or not
    confusion: tuple[tuple[int, ...], ...]  # rows: a's grade 0-3, columns: b's

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "n": self.n,
            "observed": round(self.observed, 4),
            "kappa": round(self.kappa, 4),
            "weighted_kappa": round(self.weighted_kappa, 4),
            "relevant_kappa": round(self.relevant_kappa, 4),
            "confusion": [list(r) for r in self.confusion],
        }


def agreement(labels: Sequence[Label], include_feedback: bool = False) -> list[Agreement]:
    """Kappa for every pair of labelers with items in common (latest label each)."""
    grades: dict[str, dict[tuple, int]] = {}
    for label in latest(labels):
        if label.source == "feedback" and not include_feedback:
            continue
        grades.setdefault(label.labeler, {})[label.item] = label.grade
    out = []
    for a, b in combinations(sorted(grades), 2):
        shared = sorted(set(grades[a]) & set(grades[b]))
        if not shared:
            continue
        ga = [grades[a][i] for i in shared]
        gb = [grades[b][i] for i in shared]
        confusion = [[0] * len(GRADES) for _ in GRADES]
        for x, y in zip(ga, gb, strict=True):
            confusion[x][y] += 1
        out.append(
            Agreement(
                a=a,
                b=b,
                n=len(shared),
                observed=sum(x == y for x, y in zip(ga, gb, strict=True)) / len(shared),
                kappa=cohen_kappa(ga, gb, GRADES),
                weighted_kappa=cohen_kappa(ga, gb, GRADES, weights="quadratic"),
                relevant_kappa=cohen_kappa(
                    [x >= 2 for x in ga], [y >= 2 for y in gb], (False, True)
                ),
                confusion=tuple(tuple(r) for r in confusion),
            )
        )
    return out


__all__ = ["Agreement", "agreement", "cohen_kappa"]
