"""Fuse ranked lists into one ranking of candidates, deduplicated by span.

Each method is a small pure function over ranked lists and per-list weights, picked by
name with ``fusion_method`` (which raises on an unknown name):

- ``rrf``: reciprocal rank fusion, sum over lists of ``w / (k + rank)`` (ranks 1-based).
- ``weighted``: sum over lists of ``w * s'``, with ``s'`` the list's scores min-max
  normalised to [0, 1] (a list of one hit, or of equal scores, gives 1).
- ``max``: the largest ``w * s'`` over lists.

``w`` is the list's weight times the span's own weight in ``item_weights`` (default 1):
that is how the router weighs a category (code, docs) once each retriever's code and docs
hits are merged into one list by score (``merge_lists``). A list or span with weight 0
contributes nothing. Ties are broken by best rank in any list, then by span id, so results
are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from llmc.errors import ConfigError
from llmc.search.types import Candidate, Hit, RankedList

FusionFn = Callable[..., list[Candidate]]


def _normalized(ranked: RankedList) -> list[float]:
    scores = [h.score for h in ranked.hits]
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def _collect(
    lists: Sequence[RankedList],
    weights: Mapping[str, float],
    item_weights: Mapping[int, float] | None,
    contribution: Callable[[int, float, float], float],
) -> dict[int, tuple[dict[str, int], dict[str, float], dict[str, float]]]:
    """span id → (ranks, raw scores, contributions) over the lists with a weight > 0."""
    acc: dict[int, tuple[dict[str, int], dict[str, float], dict[str, float]]] = {}
    for ranked in lists:
        weight = float(weights.get(ranked.name, 0.0))
        if weight <= 0.0 or not ranked.hits:
            continue
        norm = _normalized(ranked)
        for rank, (hit, n) in enumerate(zip(ranked.hits, norm, strict=True), start=1):
            w = weight * (1.0 if item_weights is None else item_weights.get(hit.span_id, 1.0))
            if w <= 0.0:
                continue
            ranks, scores, contribs = acc.setdefault(hit.span_id, ({}, {}, {}))
            if ranked.name in ranks:  # a span twice in one list: keep its best rank
                continue
            ranks[ranked.name] = rank
            scores[ranked.name] = hit.score
            contribs[ranked.name] = contribution(rank, n, w)
    return acc


def _ordered(
    acc: dict[int, tuple[dict[str, int], dict[str, float], dict[str, float]]],
    combine: Callable[[Sequence[float]], float],
) -> list[Candidate]:
    out = [
        Candidate(
            span_id=span_id,
            score=combine(list(contribs.values())),
            ranks=ranks,
            scores=scores,
            contributions=contribs,
        )
        for span_id, (ranks, scores, contribs) in acc.items()
    ]
    out.sort(key=lambda c: (-c.score, c.best_rank, c.span_id))
    return out


def rrf(
    lists: Sequence[RankedList],
    weights: Mapping[str, float],
    k: int = 60,
    item_weights: Mapping[int, float] | None = None,
) -> list[Candidate]:
    """Reciprocal rank fusion: RRF(k=60) of ranks 1 and 3 at weight 1 is 1/61 + 1/63."""
    if k < 0:
        raise ConfigError(f"search.rrf_k must be >= 0, got {k}")
    acc = _collect(lists, weights, item_weights, lambda rank, _n, w: w / (k + rank))
    return _ordered(acc, sum)


def weighted(
    lists: Sequence[RankedList],
    weights: Mapping[str, float],
    k: int = 60,
    item_weights: Mapping[int, float] | None = None,
) -> list[Candidate]:
    """Weighted sum of per-list min-max normalised scores."""
    acc = _collect(lists, weights, item_weights, lambda _rank, n, w: w * n)
    return _ordered(acc, sum)


def max_score(
    lists: Sequence[RankedList],
    weights: Mapping[str, float],
    k: int = 60,
    item_weights: Mapping[int, float] | None = None,
) -> list[Candidate]:
    """The best weighted, normalised score of a span in any list."""
    acc = _collect(lists, weights, item_weights, lambda _rank, n, w: w * n)
    return _ordered(acc, max)


def merge_lists(
    retriever: str, lists: Sequence[RankedList], category: str | None = None
) -> RankedList:
    """All hits of ``lists`` as one list by descending score, a repeated span at its best.

    For one retriever's code and docs lists, whose scores are comparable (one BM25 index,
    one embedding space)."""
    best: dict[int, float] = {}
    for ranked in lists:
        for hit in ranked.hits:
            if hit.span_id not in best or hit.score > best[hit.span_id]:
                best[hit.span_id] = hit.score
    order = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    hits = tuple(Hit(i, s) for i, s in order)
    return RankedList(retriever, category, hits, sum(r.ms for r in lists))


FUSIONS: dict[str, FusionFn] = {"rrf": rrf, "weighted": weighted, "max": max_score}


def fusion_method(name: str) -> FusionFn:
    """The fusion function called ``name``; ConfigError for an unknown one."""
    try:
        return FUSIONS[name]
    except KeyError:
        raise ConfigError(
            f"unknown fusion method {name!r} (expected one of: {', '.join(FUSIONS)})"
        ) from None


def fuse(
    name: str,
    lists: Sequence[RankedList],
    weights: Mapping[str, float],
    k: int = 60,
    item_weights: Mapping[int, float] | None = None,
) -> list[Candidate]:
    """Fuse ``lists`` with the method called ``name``, best candidate first."""
    return fusion_method(name)(lists, weights, k=k, item_weights=item_weights)


def pin_first(candidates: Sequence[Candidate], pinned: Sequence[int]) -> list[Candidate]:
    """Move the ``pinned`` span ids (in that order) to the top, scored above the rest.

    A pinned span keeps its lists' ranks and shares; it gets the ``exact`` source.
    """
    if not pinned:
        return list(candidates)
    by_id = {c.span_id: c for c in candidates}
    top = max((c.score for c in candidates), default=0.0)
    base = top if top > 0 else 1.0
    head: list[Candidate] = []
    for i, span_id in enumerate(dict.fromkeys(pinned)):
        old = by_id.get(span_id) or Candidate(span_id=span_id, score=0.0)
        head.append(
            Candidate(
                span_id=span_id,
                score=base * (1.0 + 0.01 * (len(pinned) - i)),
                ranks={**old.ranks, "exact": i + 1},
                scores={**old.scores, "exact": 1.0},
                contributions=dict(old.contributions),
                pinned=True,
            )
        )
    pinned_ids = {c.span_id for c in head}
    return head + [c for c in candidates if c.span_id not in pinned_ids]


def diversify(
    candidates: Sequence[Candidate], path_of: Mapping[int, str], max_per_file: int
) -> tuple[list[Candidate], list[Candidate]]:
    """Keep at most ``max_per_file`` candidates of one file, in order; ``(kept, held back)``.

    The held-back ones are still good: callers append them when too few remain. Pinned
    candidates are always kept. ``max_per_file`` 0 keeps everything.
    """
    if max_per_file <= 0:
        return list(candidates), []
    kept: list[Candidate] = []
    held: list[Candidate] = []
    per_file: dict[str, int] = {}
    for c in candidates:
        path = path_of.get(c.span_id, "")
        if not c.pinned and per_file.get(path, 0) >= max_per_file:
            held.append(c)
            continue
        per_file[path] = per_file.get(path, 0) + 1
        kept.append(c)
    return kept, held


__all__ = [
    "FUSIONS",
    "diversify",
    "fuse",
    "fusion_method",
    "max_score",
    "merge_lists",
    "pin_first",
    "rrf",
    "weighted",
]
