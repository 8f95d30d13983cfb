"""The learned intent classifier at query time: features of a query and the saved model.

`llmc tune` (``llmc.learn.intent_model``) trains a multinomial logistic regression over
code / docs / mixed on router evidence, words and length, calibrates it by temperature and
gates it; what it saves is plain JSON (feature names, weights, temperature, gate, the
intents it may decide). This module turns a query into the same sparse features and applies
the saved model in pure Python, so search never imports scikit-learn or training code.

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

from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, TESTS, RouteDecision

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
        heuristic: RouteDecision,
        drop_confidence: float,
        min_weight: float,
    ) -> RouteDecision:
        """The RouteDecision to use: the heuristic's below the gate, the model's above."""
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
        """The model saved by ``to_json``; ValueError when it is not one search can use
        (classes other than ``CLASSES`` or repeated, lengths that differ, a number that is
        not finite: JSON's NaN would make every probability NaN)."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not an intent model of format {FORMAT}")
        classes = tuple(str(c) for c in data["classes"])
        if not classes or len(set(classes)) != len(classes) or not set(classes) <= set(CLASSES):
            raise ValueError(f"classes {list(classes)} are not distinct ones of {CLASSES}")
        weights = {str(k): _finite(v, len(classes), k) for k, v in data["weights"].items()}
        intercept = _finite(data["intercept"], len(classes), "intercept")
        temperature, gate = _finite([data.get("temperature", 1.0), data.get("gate", 0.5)], 2)
        return cls(
            classes=classes,
            weights=weights,
            intercept=intercept,
            temperature=temperature,
            gate=gate,
            allowed=tuple(str(c) for c in data.get("allowed", classes)),
            report=dict(data.get("report") or {}),
        )


def _finite(values: Any, n: int, what: str = "") -> tuple[float, ...]:
    """``values`` as ``n`` finite floats, else ValueError naming ``what``."""
    out = tuple(float(x) for x in values)
    if len(out) != n:
        raise ValueError(f"{what or 'values'} do not match the classes")
    if not all(math.isfinite(x) for x in out):
        raise ValueError(f"{what or 'values'} hold a number that is not finite")
    return out


__all__ = ["CLASSES", "FORMAT", "IntentModel", "features", "heuristic_intent"]
