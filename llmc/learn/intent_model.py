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

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CLASSES = ("code", "docs", "mixed")
FORMAT = "llmc-intent-v1"
_QUOTED = re.compile(r"`[^`]*`|'[^']*'")


def _family(reason: str) -> str:
    """A heuristic reason without its specifics: ``code cue`` for ``code cue 'calls'``."""
    return " ".join(_QUOTED.sub("", reason).split())


def features(query: str, defined: Sequence[str] = ()) -> dict[str, float]:
    """Sparse features of one query (see the module docstring)."""
    from llmc.search.router import evidence

    found = evidence(query, defined)
    out: dict[str, float] = Counter()
    total = 0.0
    for step, reason in found:
        out[f"cue:{_family(reason)}"] += step
        quoted = _QUOTED.findall(reason)
        if quoted and ("cue" in reason or reason.startswith("starts with")):
            out[f"cue:{_family(reason)}:{quoted[0].strip(chr(39) + '`')}"] += 1.0
        total += step
    out["heuristic:logodds"] = total
    words = re.findall(r"[a-z0-9_]+", query.lower())
    for w in set(words):
        out[f"w:{w}"] = 1.0
    if words:
        out[f"first:{words[0]}"] = 1.0
    out["len:words"] = math.log1p(len(words))
    out["len:question"] = 1.0 if query.rstrip().endswith("?") else 0.0
    return dict(out)


def heuristic_intent(query: str, defined: Sequence[str] = ()) -> str:
    from llmc.search.router import route_query

    return route_query(query, defined).intent


def _softmax(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    exp = [math.exp(x - top) for x in logits]
    s = sum(exp)
    return [e / s for e in exp]


@dataclass(frozen=True)
class IntentModel:
    classes: tuple[str, ...]
    weights: Mapping[str, tuple[float, ...]]  # feature → one weight per class
    intercept: tuple[float, ...]
    temperature: float = 1.0
    gate: float = 0.5  # take the model's intent when its top probability reaches this
    allowed: tuple[str, ...] = CLASSES  # intents it may decide; others stay heuristic
    report: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def proba(self, query: str, defined: Sequence[str] = ()) -> dict[str, float]:
        logits = list(self.intercept)
        for name, value in features(query, defined).items():
            w = self.weights.get(name)
            if w is not None and value:
                for i, wi in enumerate(w):
                    logits[i] += wi * value
        t = self.temperature if self.temperature > 0 else 1.0
        return dict(zip(self.classes, _softmax([x / t for x in logits]), strict=True))

    def predict(self, query: str, defined: Sequence[str] = ()) -> tuple[str, float]:
        probs = self.proba(query, defined)
        best = max(probs, key=lambda c: probs[c])
        return best, probs[best]

    def used(self, query: str, defined: Sequence[str] = ()) -> str | None:
        """The intent the model decides for ``query``, or None where the heuristic decides."""
        intent, p = self.predict(query, defined)
        return intent if p >= self.gate and intent in self.allowed else None

    def decide(
        self,
        query: str,
        defined: Sequence[str],
        heuristic: Any,
        drop_confidence: float,
        min_weight: float,
    ) -> Any:
        """The RouteDecision to use: the heuristic's below the gate, the model's above."""
        from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, TESTS

        probs = self.proba(query, defined)
        intent = max(probs, key=lambda c: probs[c])
        shown = ", ".join(f"{c} {probs[c]:.2f}" for c in self.classes)
        if probs[intent] < self.gate or intent not in self.allowed:
            why = (
                f"learned intent model unsure ({shown} < gate {self.gate:.2f})"
                if probs[intent] < self.gate
                else f"learned intent model says {intent}, where it does not beat the heuristic"
            )
            return dataclasses.replace(heuristic, reasons=(*heuristic.reasons, why + ": kept"))
        p_code = probs.get("code", 0.0) + 0.5 * probs.get("mixed", 0.0)
        confidence = abs(2.0 * p_code - 1.0)
        favoured, other = (CODE_ROUTE, DOCS_ROUTE) if p_code >= 0.5 else (DOCS_ROUTE, CODE_ROUTE)
        other_weight = 0.0 if confidence >= drop_confidence else max(min_weight, 1 - confidence**2)
        tests = heuristic.weights.get(TESTS, 1.0)
        reasons = (f"learned intent model ({shown}, gate {self.gate:.2f}): {intent}",)
        if other_weight == 0.0:
            reasons += (f"confidence {confidence:.2f} >= {drop_confidence:g}: {other} dropped",)
        return dataclasses.replace(
            heuristic,
            intent=intent,
            p_code=p_code,
            weights={favoured: 1.0, other: other_weight, TESTS: tests},
            confidence=confidence,
            reasons=reasons + tuple(r for r in heuristic.reasons if "test" in r),
            source="learned",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "classes": list(self.classes),
            "intercept": [round(x, 6) for x in self.intercept],
            "temperature": round(self.temperature, 6),
            "gate": self.gate,
            "allowed": list(self.allowed),
            "weights": {k: [round(x, 6) for x in v] for k, v in sorted(self.weights.items())},
            "report": dict(self.report),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IntentModel:
        if data.get("format") != FORMAT:
            raise ValueError(f"not an intent model of format {FORMAT}")
        classes = tuple(str(c) for c in data["classes"])
        weights = {str(k): tuple(float(x) for x in v) for k, v in data["weights"].items()}
        if any(len(v) != len(classes) for v in weights.values()):
            raise ValueError("weights do not match the classes")
        intercept = tuple(float(x) for x in data["intercept"])
        if len(intercept) != len(classes):
            raise ValueError("intercept does not match the classes")
        return cls(
            classes=classes,
            weights=weights,
            intercept=intercept,
            temperature=float(data.get("temperature", 1.0)),
            gate=float(data.get("gate", 0.5)),
            allowed=tuple(str(c) for c in data.get("allowed", classes)),
            report=dict(data.get("report") or {}),
        )


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
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
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

    def oof_logits(c: float) -> Any:
        out = np.zeros((len(y), len(classes)))
        for train, test in splits:
            vec = DictVectorizer()
            x_train = vec.fit_transform([feats[i] for i in train])
            clf = LogisticRegression(C=c, max_iter=5000)
            clf.fit(x_train, y[train])
            logits = clf.decision_function(vec.transform([feats[i] for i in test]))
            if logits.ndim == 1:  # two classes: sklearn gives one column
                logits = np.stack([-logits / 2, logits / 2], axis=1)
            full = np.full((len(test), len(classes)), -1e4)
            full[:, clf.classes_] = logits
            out[test] = full
        return out

    scored = []
    for c in cs:
        logits = oof_logits(c)
        scored.append((_nll(_scaled(logits, 1.0), y), c, logits))
    _, best_c, logits = min(scored, key=lambda t: (t[0], -t[1]))
    res = minimize_scalar(
        lambda log_t: _nll(_scaled(logits, math.exp(log_t)), y), bounds=(-3, 3), method="bounded"
    )
    temperature = float(math.exp(res.x))
    raw, calibrated = _scaled(logits, 1.0), _scaled(logits, temperature)
    learned = [classes[i] for i in calibrated.argmax(axis=1)]
    top = calibrated.max(axis=1)
    best_gate, best_acc = 1.01, heur_acc
    for gate in (0.34, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        combined = [lr if p >= gate else h for lr, p, h in zip(learned, top, heur, strict=True)]
        acc = float(np.mean([c == t for c, t in zip(combined, labels, strict=True)]))
        if acc > best_acc + 1e-9:
            best_gate, best_acc = gate, acc
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
    vec = DictVectorizer()
    x = vec.fit_transform(feats)
    clf = LogisticRegression(C=best_c, max_iter=5000).fit(x, y)
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


__all__ = ["CLASSES", "IntentFit", "IntentModel", "features", "heuristic_intent", "train_intent"]
