"""What adaptive HyDE did for one query: its hypotheses, thresholds and BM25 terms.

The records of ``--explain`` and of the ``hyde`` object in ``--json``; the stage itself
is ``hyde.py``. Diagnostics only: no hypothesis is ever a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hypothesis:
    """One hypothetical answer: diagnostics only, never a result."""

    route: str
    seed: int
    text: str
    latency_ms: float
    cached: bool
    tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "seed": self.seed,
            "text": self.text,
            "latency_ms": round(self.latency_ms, 1),
            "cached": self.cached,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class ThresholdStep:
    """The adaptive threshold of one category's HyDE dense search."""

    category: str
    threshold: float | None  # effective; None: nothing reached min_threshold
    steps: int  # steps down from initial_threshold
    hits: int  # hits kept at the effective threshold
    best: float  # the best cosine of any hypothesis

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "threshold": self.threshold,
            "steps": self.steps,
            "hits": self.hits,
            "best": round(self.best, 4),
        }


@dataclass(frozen=True)
class HydeReport:
    """What HyDE did for one query (``--explain``, the ``hyde`` object of ``--json``)."""

    used: bool
    reason: str
    model: str = ""
    hypotheses: tuple[Hypothesis, ...] = ()
    thresholds: tuple[ThresholdStep, ...] = ()
    # BM25 terms the hypotheses added (weight < 1) or weighted up (query terms, > 1)
    expansion: dict[str, float] = field(default_factory=dict)
    llm_ms: float = 0.0  # generation time of this query (0 when all were cached)
    took_ms: float = 0.0  # the whole stage: LLM, embedding, searches
    dense_best: float | None = None  # the best raw dense cosine before HyDE (None: no dense)

    def to_json(self) -> dict[str, Any]:
        return {
            "used": self.used,
            "reason": self.reason,
            "model": self.model,
            "hypotheses": [h.to_json() for h in self.hypotheses],
            "thresholds": [t.to_json() for t in self.thresholds],
            "expansion": {t: round(w, 4) for t, w in self.expansion.items()},
            "llm_ms": round(self.llm_ms, 1),
            "took_ms": round(self.took_ms, 1),
            "dense_best": None if self.dense_best is None else round(self.dense_best, 4),
        }


__all__ = ["HydeReport", "Hypothesis", "ThresholdStep"]
