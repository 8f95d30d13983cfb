"""Greedy search over fusion and route weights: the part of `llmc tune` that picks values.

``search_weights`` is pure over its ``score`` function: steepest ascent over ``SPACE``
from the configured values, taking a move only when it is ``better`` (a mean gain *and*
more queries improved than worsened beyond chance), at most ``MAX_MOVES`` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llmc.config import Config

# key → candidate values. The search starts from the configured value (added when absent).
SPACE: dict[str, tuple[Any, ...]] = {
    "search.bm25_weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.dense_weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.exact_weight": (0.0, 0.25, 0.5, 1.0, 2.0),
    "search.rrf_k": (5, 10, 20, 40, 60, 100),
    "search.min_route_weight": (0.1, 0.25, 0.5, 0.75, 1.0),
    "search.route_drop_confidence": (0.6, 0.7, 0.8, 0.9, 1.01),
    "search.test_weight": (0.1, 0.25, 0.5, 0.75, 1.0),
    "hyde.weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.fusion": ("rrf", "weighted"),
    "search.rerank": (False, True),  # the cross-encoder stage, blended with the fused score
    "rerank.blend_weight": (0.3, 0.5, 0.7),
}
MIN_GAIN = 0.002  # mean nDCG@10 a change must add on the training queries
MAX_SIGN_P = 0.05  # ... and it improves more queries than it worsens, beyond chance
MAX_MOVES = 4  # changed keys at most (a key may move twice)
K = 10


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def sign_p(wins: int, losses: int) -> float:
    """One-sided sign test: P(at least ``wins`` of ``wins + losses`` fair coin flips)."""
    from llmc.eval.stats import sign_test_p

    return sign_test_p(wins, losses)


def better(new: Sequence[float], old: Sequence[float], min_gain: float = MIN_GAIN) -> bool:
    """A move worth taking: a mean per-query gain of at least ``min_gain``, *and* more
    queries improved than worsened beyond chance (one-sided sign test, p <= ``MAX_SIGN_P``).
    Picking the best of ~40 candidates on a few dozen queries otherwise mostly fits noise:
    a gain carried by two or three queries with large swings is not taken."""
    deltas = [a - b for a, b in zip(new, old, strict=True)]
    wins = sum(d > 1e-9 for d in deltas)
    losses = sum(d < -1e-9 for d in deltas)
    return _mean(deltas) >= min_gain and sign_p(wins, losses) <= MAX_SIGN_P


def search_weights(
    score: Callable[[dict[str, Any]], Sequence[float]],
    start: dict[str, Any],
    space: dict[str, tuple[Any, ...]],
    max_moves: int = MAX_MOVES,
    min_gain: float = MIN_GAIN,
    on_eval: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], float, int]:
    """Greedy steepest ascent from ``start``: (best params, their mean score, evaluations).

    ``score(params)`` gives one score per training query. Each round tries every other
    value of every key against the current setting and takes the single move with the
    best mean among those that are ``better``; it stops when none is, or after
    ``max_moves`` moves (few changes, each clearly earned: less to overfit). Ties go to
    the key listed first. Pure over ``score``."""
    memo: dict[tuple, list[float]] = {}

    def evaluate(params: dict[str, Any]) -> list[float]:
        key = tuple(sorted(params.items()))
        if key not in memo:
            memo[key] = list(score(params))
            if on_eval is not None:
                on_eval()
        return memo[key]

    best = dict(start)
    current = evaluate(best)
    for _ in range(max_moves):
        moves = []
        for key, values in space.items():
            for v in dict.fromkeys((*values, start[key])):
                if v == best[key]:
                    continue
                sc = evaluate({**best, key: v})
                if better(sc, current, min_gain):
                    moves.append((_mean(sc), -len(moves), key, v, sc))
        if not moves:
            break
        _, _, key, value, current = max(moves)
        best = {**best, key: value}
    return best, _mean(current), len(memo)


def space_for(cfg: Config) -> dict[str, tuple[Any, ...]]:
    """The search space, without keys this build lacks, the user pinned in config, or
    whose stage is switched off (``hyde.*`` without ``search.hyde``)."""
    off = {"hyde"} if not getattr(cfg.search, "hyde", False) else set()
    return {
        k: v
        for k, v in SPACE.items()
        if cfg.has(k) and k not in cfg.sources and k.split(".", 1)[0] not in off
    }


__all__ = [
    "MAX_MOVES",
    "MIN_GAIN",
    "SPACE",
    "better",
    "search_weights",
    "sign_p",
    "space_for",
]
