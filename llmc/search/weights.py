"""The fusion weights of one query: per ranked list, and per span.

A list's weight is its retriever's (``search.bm25_weight``, ``dense_weight``,
``hyde.weight``, ``exact_weight``) times its route's weight from the router's decision.
With ``search.merge_routes`` a retriever's code and docs lists are merged into one list
by score, and each span carries its route's weight instead. Either way, a test file's span
is weighted by the decision's ``tests`` weight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from llmc.config import Config
from llmc.search import fusion, router
from llmc.search.types import (
    BM25,
    CATEGORY_ROUTE,
    DENSE,
    EXACT,
    HYDE,
    TESTS,
    RankedList,
    RouteDecision,
)

PathsOf = Callable[[Sequence[int]], Mapping[int, str]]  # span ids → their file paths


def tests_weight(decision: RouteDecision) -> float:
    return decision.weight(TESTS) if TESTS in decision.weights else 1.0


def fusion_lists(
    cfg: Config, decision: RouteDecision, lists: Sequence[RankedList], paths_of: PathsOf
) -> tuple[list[RankedList], dict[int, float]]:
    """The lists to fuse and each span's own weight (see the module docstring)."""
    merge = cfg.search.merge_routes
    item_weights: dict[int, float] = {}
    for ranked in lists:
        category = ranked.category
        w = decision.weight(CATEGORY_ROUTE[category]) if merge and category else 1.0
        item_weights.update((h.span_id, w) for h in ranked.hits if h.span_id not in item_weights)
    tests = tests_weight(decision)
    if tests != 1.0:
        for span_id, path in paths_of(list(item_weights)).items():
            if router.is_test_path(path):
                item_weights[span_id] *= tests
    if not merge:
        return list(lists), item_weights
    merged: list[RankedList] = []
    for retriever in (BM25, DENSE, HYDE):
        parts = [r for r in lists if r.retriever == retriever]
        if parts:
            merged.append(fusion.merge_lists(retriever, parts))
    merged += [r for r in lists if r.retriever == EXACT]
    return merged, item_weights


def list_weights(
    cfg: Config, decision: RouteDecision, lists: Sequence[RankedList]
) -> RouteDecision:
    """``decision`` with its per-list fusion weights filled in."""
    scfg = cfg.search
    retriever = {BM25: scfg.bm25_weight, DENSE: scfg.dense_weight, HYDE: cfg.hyde.weight}
    weights: dict[str, float] = {}
    for ranked in lists:
        if ranked.retriever == EXACT:
            weights[ranked.name] = scfg.exact_weight
            continue
        category = ranked.category
        route_weight = decision.weight(CATEGORY_ROUTE[category]) if category else 1.0
        weights[ranked.name] = route_weight * retriever[ranked.retriever]
    return dataclasses.replace(decision, list_weights=weights)


__all__ = ["fusion_lists", "list_weights", "tests_weight"]
