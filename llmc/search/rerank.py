"""Cross-encoder stage: rescore the top ``top_k`` candidates with a (query, span) model.

The model always reads the original user query (never a HyDE text), one batch of pairs
(``Reranker.score``), each span as ``path`` then its text (``span_passage``). Then:

- ``replace``: the top k are ordered by the reranker's score, which becomes their score;
- ``blend``: by ``w · ce + (1 - w) · fused / top fused`` (``rerank.blend_weight`` = w; the
  reranker's sigmoid probability against the fused score's share of the window's best).

Pinned candidates (exact-symbol definitions) stay first, scored just above the window;
candidates past the window keep their fused order, scored just below it, so scores still
descend down the list. Ties keep the fused order.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from llmc.errors import ConfigError, ModelError
from llmc.search.types import Candidate

BLENDS = ("replace", "blend")
RERANK = "rerank"  # the key of the reranker's score in ``Candidate.scores``
_STEP = 1e-6  # score gap below the window for candidates it did not rescore


@dataclass(frozen=True)
class Reranked:
    """The reranked candidates and the trace of it."""

    candidates: tuple[Candidate, ...]
    scored: int = 0  # pairs the model read
    moves: tuple[tuple[int, int, int], ...] = ()  # (span id, old rank, new rank), 1-based
    ms: float = 0.0


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def blended(ce: Sequence[float], fused: Sequence[float], w: float) -> list[float]:
    """``w · ce + (1 - w) · fused / top fused``: the reranker's probability and the fused
    score as a share of the window's best. A model whose scores are not probabilities
    (logits outside [0, 1]) has them min-max scaled over the window first, and so do
    fused scores below zero (the learned ranker's)."""
    probs = list(ce) if all(0.0 <= x <= 1.0 for x in ce) else _minmax(ce)
    top = max(fused, default=0.0)
    if min(fused, default=0.0) < 0:  # the learned ranker's scores: any sign, so min-max
        shares = _minmax(fused)
    else:
        shares = [f / top for f in fused] if top > 0 else [1.0] * len(fused)
    return [w * a + (1.0 - w) * b for a, b in zip(probs, shares, strict=True)]


def rerank(
    query: str,
    candidates: Sequence[Candidate],
    passages: Mapping[int, str],
    reranker: object,
    top_k: int,
    blend: str = "replace",
    blend_weight: float = 0.5,
) -> Reranked:
    """Rescore the first ``top_k`` candidates (pinned ones aside) that have a passage.

    ``passages``: span id → the text the model reads; a candidate without one (its span is
    gone from the store) moves to just below the window. ``reranker.score(query, texts)``
    gives one score per text, higher is better; its errors propagate (ModelError).
    """
    if blend not in BLENDS:
        raise ConfigError(f"rerank.blend must be one of {', '.join(BLENDS)}, got {blend!r}")
    if not 0.0 <= blend_weight <= 1.0:
        raise ConfigError(f"rerank.blend_weight must be within [0, 1], got {blend_weight}")
    cands = list(candidates)
    head = [c for c in cands[:top_k] if c.pinned]
    window = [c for c in cands[:top_k] if not c.pinned and c.span_id in passages]
    unscored = [c for c in cands[:top_k] if not c.pinned and c.span_id not in passages]
    rest = unscored + cands[top_k:]
    if len(window) < 2:
        return Reranked(tuple(cands))
    started = time.perf_counter()
    ce = [float(s) for s in reranker.score(query, [passages[c.span_id] for c in window])]  # type: ignore[attr-defined]
    ms = (time.perf_counter() - started) * 1000
    if len(ce) != len(window):
        raise ModelError(f"the reranker gave {len(ce)} scores for {len(window)} passages")
    new = ce if blend == "replace" else blended(ce, [c.score for c in window], blend_weight)
    order = sorted(range(len(window)), key=lambda i: (-new[i], i))
    before = {c.span_id: r for r, c in enumerate(cands, start=1)}
    ranked = [
        replace(window[i], score=new[i], scores={**window[i].scores, RERANK: ce[i]}) for i in order
    ]
    top, n = ranked[0].score, len(head)
    head = [
        replace(c, score=top * (1.0 + 0.01 * (n - i)) if top > 0 else top + (n - i))
        for i, c in enumerate(head)
    ]
    floor = ranked[-1].score
    rest = [replace(c, score=floor - _STEP * (j + 1)) for j, c in enumerate(rest)]
    out = head + ranked + rest
    moves = tuple(
        (c.span_id, before[c.span_id], r)
        for r, c in enumerate(out, start=1)
        if before[c.span_id] != r and r <= top_k
    )
    return Reranked(tuple(out), len(window), moves, ms)


__all__ = ["BLENDS", "RERANK", "Reranked", "rerank"]
