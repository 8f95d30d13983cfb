"""A learned intent classifier that replaces the heuristic router where it is better.

Features of a query (``features``): the heuristic router's own evidence grouped by kind
(identifier shapes, code and docs cues, paths, first person...) with its log-odds sum,
the words of the query and its first word, and its length. The model is a multinomial
logistic regression over code / docs / mixed (scikit-learn, L2, its strength chosen by
cross-validated log loss), then calibrated by temperature scaling on out-of-fold
probabilities (one scalar, so the saved model stays a plain linear model).

It replaces the heuristic only where it beats it: out of fold, the learned intent is
taken when its top probability reaches ``gate`` and the heuristic's otherwise; ``gate``
is the value that maximises out-of-fold route accuracy, and the model is kept at all only
when that beats the heuristic alone. Then, per intent, `llmc tune` checks retrieval: the
model may decide only the intents (``allowed``) for which its decisions raised nDCG@10
of the training queries over the heuristic's. The saved model is JSON (feature names, weights,
temperature, gate); prediction is pure Python, so search never imports scikit-learn.

Its decision feeds the same weights the heuristic's does: ``p_code = P(code) +
P(mixed) / 2``, the disfavoured route keeps ``max(min_weight, 1 - confidence**2)`` and is
dropped only at ``drop_confidence``; the heuristic's test-file weight is kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmc.search.intent import CLASSES, IntentModel, features, heuristic_intent

# The model and its features live in llmc.search.intent (query time); this module trains.


# -- training ---------------------------------------------------------------------------
@dataclass(frozen=True)
class IntentFit:
    """A trained model (None when it does not beat the heuristic) and what was measured."""

    model: IntentModel | None
    report: dict[str, Any]


def _nll(probs: Any, y: Any) -> float:
    import numpy as np

    return float(-np.mean(np.log(np.clip(probs[np.arange(len(y)), y], 1e-12, 1.0))))


def _scaled(logits: Any, t: float) -> Any:
    import numpy as np

    z = logits / t
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _ece(probs: Any, y: Any, bins: int = 10) -> float:
    """Expected calibration error of the top class, equal-width bins."""
    import numpy as np

    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == y).astype(float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mask = (conf > lo) & (conf <= hi)
        if mask.any():
            total += mask.mean() * abs(conf[mask].mean() - correct[mask].mean())
    return float(total)


def train_intent(
    queries: Sequence[str],
    defined: Sequence[Sequence[str]],
    labels: Sequence[str],
    seed: int = 0,
) -> IntentFit:
    """Fit, calibrate and gate the model on ``queries`` with their intent ``labels``."""
    import numpy as np
    from scipy.optimize import minimize_scalar
    from sklearn.model_selection import StratifiedKFold

    counts = Counter(labels)
    report: dict[str, Any] = {"n": len(labels), "classes": dict(counts)}
    rare = {c for c, n in counts.items() if n < 2}  # cannot be cross-validated: left out
    if rare:
        report["left_out"] = sorted(rare)
        keep = [i for i, lb in enumerate(labels) if lb not in rare]
        queries, defined, labels = (
            [queries[i] for i in keep], [defined[i] for i in keep], [labels[i] for i in keep]
        )  # fmt: skip
        counts = Counter(labels)
    classes = tuple(c for c in CLASSES if counts.get(c, 0) > 0)
    heur = [heuristic_intent(q, d) for q, d in zip(queries, defined, strict=True)]
    heur_acc = float(np.mean([h == y for h, y in zip(heur, labels, strict=True)])) if labels else 0
    report["heuristic_acc"] = heur_acc
    folds = min(5, min(counts.values())) if classes else 0
    if len(classes) < 2:
        report["kept"] = False
        report["why"] = "needs two intents with at least two queries each"
        return IntentFit(None, report)
    feats = [features(q, d) for q, d in zip(queries, defined, strict=True)]
    y = np.array([classes.index(lb) for lb in labels])
    cs = [0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    splits = list(cv.split(np.zeros(len(y)), y))

    scored = []
    for c in cs:
        logits = _oof_logits(feats, y, len(classes), splits, c)
        scored.append((_nll(_scaled(logits, 1.0), y), c, logits))
    _, best_c, logits = min(scored, key=lambda t: (t[0], -t[1]))
    res = minimize_scalar(
        lambda log_t: _nll(_scaled(logits, math.exp(log_t)), y), bounds=(-3, 3), method="bounded"
    )
    temperature = float(math.exp(res.x))
    raw, calibrated = _scaled(logits, 1.0), _scaled(logits, temperature)
    learned = [classes[i] for i in calibrated.argmax(axis=1)]
    top = calibrated.max(axis=1)
    best_gate, best_acc = _best_gate(learned, top, heur, labels, heur_acc)
    report.update(
        {
            "C": best_c,
            "folds": folds,
            "temperature": round(temperature, 4),
            "oof_model_acc": float(np.mean([a == b for a, b in zip(learned, labels, strict=True)])),
            "oof_combined_acc": best_acc,
            "oof_nll": {"raw": _nll(raw, y), "calibrated": _nll(calibrated, y)},
            "oof_ece": {"raw": _ece(raw, y), "calibrated": _ece(calibrated, y)},
            "gate": best_gate,
        }
    )
    if best_gate > 1.0:
        report["kept"] = False
        report["why"] = "out of fold it never beats the heuristic router"
        return IntentFit(None, report)
    weights, intercept = _fit_all(feats, y, best_c)
    report["kept"] = True
    report["features"] = len(weights)
    model = IntentModel(
        classes=classes,
        weights=weights,
        intercept=tuple(float(v) for v in intercept),
        temperature=temperature,
        gate=best_gate,
        report=report,
    )
    return IntentFit(model, report)


def _oof_logits(feats: list[dict], y: Any, n_classes: int, splits: list, c: float) -> Any:
    """Out-of-fold logits of a logistic regression with inverse regularisation ``c``
    (a class a fold's training part lacks gets -1e4)."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    out = np.zeros((len(y), n_classes))
    for train, test in splits:
        vec = DictVectorizer()
        x_train = vec.fit_transform([feats[i] for i in train])
        clf = LogisticRegression(C=c, max_iter=5000)
        clf.fit(x_train, y[train])
        logits = clf.decision_function(vec.transform([feats[i] for i in test]))
        if logits.ndim == 1:  # two classes: sklearn gives one column
            logits = np.stack([-logits / 2, logits / 2], axis=1)
        full = np.full((len(test), n_classes), -1e4)
        full[:, clf.classes_] = logits
        out[test] = full
    return out


def _best_gate(
    learned: Sequence[str], top: Any, heur: Sequence[str], labels: Sequence[str], heur_acc: float
) -> tuple[float, float]:
    """The confidence above which the model's intent replaces the heuristic's, chosen
    for out-of-fold accuracy; ``(1.01, heuristic accuracy)`` when no gate beats it."""
    import numpy as np

    best_gate, best_acc = 1.01, heur_acc
    for gate in (0.34, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        combined = [lr if p >= gate else h for lr, p, h in zip(learned, top, heur, strict=True)]
        acc = float(np.mean([c == t for c, t in zip(combined, labels, strict=True)]))
        if acc > best_acc + 1e-9:
            best_gate, best_acc = gate, acc
    return best_gate, best_acc


def _fit_all(feats: list[dict], y: Any, c: float) -> tuple[dict[str, tuple[float, ...]], Any]:
    """The model refitted on every query: its non-zero weights per feature (one per
    class; a binary fit's one row split into two) and its intercepts."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = DictVectorizer()
    x = vec.fit_transform(feats)
    clf = LogisticRegression(C=c, max_iter=5000).fit(x, y)
    coef, intercept = clf.coef_, clf.intercept_
    if coef.shape[0] == 1:  # binary: sklearn's one row is class 1 against class 0
        coef = np.vstack([-coef[0] / 2, coef[0] / 2])
        intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
    names = vec.get_feature_names_out()
    weights = {
        str(name): tuple(float(v) for v in coef[:, j])
        for j, name in enumerate(names)
        if np.any(np.abs(coef[:, j]) > 1e-6)
    }
    return weights, intercept


__all__ = ["CLASSES", "IntentFit", "IntentModel", "features", "heuristic_intent", "train_intent"]
