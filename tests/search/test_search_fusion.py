"""Fusion with hand numbers: RRF (k=60) of ranks 1 and 3 is 1/61 + 1/63."""

from __future__ import annotations

import pytest

from llmc.errors import ConfigError, LlmcError
from llmc.search.fusion import (
    diversify,
    fuse,
    fusion_method,
    max_score,
    merge_lists,
    pin_first,
    rrf,
    weighted,
)
from llmc.search.types import Candidate, Hit, RankedList


def ranked(name: str, *pairs: tuple[int, float]) -> RankedList:
    retriever, _, category = name.partition(".")
    return RankedList(retriever, category or None, tuple(Hit(i, s) for i, s in pairs))


A = ranked("bm25.code", (10, 9.0), (20, 5.0), (30, 1.0))
B = ranked("dense.code", (30, 0.9), (40, 0.6), (10, 0.3))
EQUAL = {"bm25.code": 1.0, "dense.code": 1.0}


def by_id(cands: list[Candidate]) -> dict[int, Candidate]:
    return {c.span_id: c for c in cands}


def test_rrf_ranks_1_and_3() -> None:
    out = by_id(rrf([A, B], EQUAL, k=60))
    assert out[10].score == pytest.approx(1 / 61 + 1 / 63)  # rank 1 in A, rank 3 in B
    assert out[30].score == pytest.approx(1 / 63 + 1 / 61)
    assert out[20].score == pytest.approx(1 / 62)
    assert out[40].score == pytest.approx(1 / 62)
    assert out[10].ranks == {"bm25.code": 1, "dense.code": 3}
    assert out[10].contributions == pytest.approx({"bm25.code": 1 / 61, "dense.code": 1 / 63})


def test_rrf_order_and_ties_are_deterministic() -> None:
    out = rrf([A, B], EQUAL, k=60)
    # 10 and 30 tie (both best rank 1): lower span id first; 20 and 40 tie the same way.
    assert [c.span_id for c in out] == [10, 30, 20, 40]


def test_rrf_weights_scale_each_list() -> None:
    out = by_id(rrf([A, B], {"bm25.code": 0.5, "dense.code": 2.0}, k=60))
    assert out[10].score == pytest.approx(0.5 / 61 + 2.0 / 63)
    assert out[40].score == pytest.approx(2.0 / 62)


def test_rrf_k_zero_and_negative() -> None:
    assert by_id(rrf([A], {"bm25.code": 1.0}, k=0))[20].score == pytest.approx(1 / 2)
    with pytest.raises(ConfigError):
        rrf([A], {"bm25.code": 1.0}, k=-1)


def test_zero_weight_and_unweighted_lists_contribute_nothing() -> None:
    out = by_id(rrf([A, B], {"bm25.code": 1.0, "dense.code": 0.0}, k=60))
    assert set(out) == {10, 20, 30}
    assert out[10].score == pytest.approx(1 / 61)
    assert rrf([A, B], {}, k=60) == []


def test_dedupe_by_span_within_a_list_keeps_best_rank() -> None:
    dup = ranked("bm25.code", (7, 3.0), (8, 2.0), (7, 1.0))
    out = rrf([dup], {"bm25.code": 1.0}, k=60)
    assert [c.span_id for c in out] == [7, 8]
    assert out[0].score == pytest.approx(1 / 61)


def test_weighted_min_max_normalises_each_list() -> None:
    # A: 9, 5, 1 → 1, 0.5, 0; B: 0.9, 0.6, 0.3 → 1, 0.5, 0
    out = by_id(weighted([A, B], {"bm25.code": 1.0, "dense.code": 2.0}))
    assert out[10].score == pytest.approx(1.0 * 1.0 + 2.0 * 0.0)
    assert out[20].score == pytest.approx(0.5)
    assert out[30].score == pytest.approx(0.0 + 2.0 * 1.0)
    assert out[40].score == pytest.approx(2.0 * 0.5)
    assert [c.span_id for c in weighted([A, B], {"bm25.code": 1.0, "dense.code": 2.0})] == [
        30, 10, 40, 20,
    ]  # fmt: skip


def test_weighted_single_hit_or_equal_scores_normalise_to_one() -> None:
    one = ranked("dense.doc", (5, 0.42))
    flat = ranked("bm25.doc", (6, 2.0), (7, 2.0))
    out = by_id(weighted([one, flat], {"dense.doc": 1.0, "bm25.doc": 1.0}))
    assert out[5].score == out[6].score == out[7].score == pytest.approx(1.0)


def test_max_takes_the_best_weighted_list() -> None:
    out = by_id(max_score([A, B], {"bm25.code": 1.0, "dense.code": 0.8}))
    assert out[10].score == pytest.approx(1.0)  # max(1 * 1.0, 0.8 * 0.0)
    assert out[30].score == pytest.approx(0.8)  # max(1 * 0.0, 0.8 * 1.0)
    assert out[40].score == pytest.approx(0.4)


def test_methods_by_name_and_unknown_name_raises() -> None:
    assert fusion_method("rrf") is rrf
    assert fusion_method("weighted") is weighted
    assert fusion_method("max") is max_score
    assert fuse("rrf", [A], {"bm25.code": 1.0}, k=60)[0].span_id == 10
    with pytest.raises(LlmcError, match="unknown fusion method 'borda'"):
        fusion_method("borda")


def test_diversify_caps_spans_per_file_and_holds_the_rest() -> None:
    cands = [Candidate(i, 1.0 / i) for i in range(1, 7)]
    path_of = {1: "a.py", 2: "a.py", 3: "a.py", 4: "b.py", 5: "a.py", 6: "c.py"}
    kept, held = diversify(cands, path_of, max_per_file=2)
    assert [c.span_id for c in kept] == [1, 2, 4, 6]
    assert [c.span_id for c in held] == [3, 5]
    kept, held = diversify(cands, path_of, max_per_file=0)
    assert len(kept) == 6 and held == []


def test_pin_first_puts_exact_definitions_on_top() -> None:
    fused = rrf([A, B], EQUAL, k=60)
    out = pin_first(fused, [40, 99])
    assert [c.span_id for c in out][:2] == [40, 99]
    assert out[0].pinned and out[1].pinned
    assert out[0].score > out[1].score > out[2].score
    assert out[0].ranks == {"dense.code": 2, "exact": 1}
    assert out[1].ranks == {"exact": 2}
    assert [c.span_id for c in out[2:]] == [10, 30, 20]
    assert pin_first(fused, []) == fused


def test_item_weights_scale_single_spans() -> None:
    out = by_id(rrf([A, B], EQUAL, k=60, item_weights={10: 0.5, 40: 0.0}))
    assert out[10].score == pytest.approx(0.5 / 61 + 0.5 / 63)
    assert out[30].score == pytest.approx(1 / 63 + 1 / 61)  # default weight 1
    assert 40 not in out  # weight 0: no contribution, no candidate
    weighted_out = by_id(weighted([A], {"bm25.code": 2.0}, item_weights={20: 0.5}))
    assert weighted_out[20].score == pytest.approx(2.0 * 0.5 * 0.5)


def test_merge_lists_ranks_both_categories_by_score() -> None:
    code = ranked("bm25.code", (1, 9.0), (2, 4.0))
    docs = ranked("bm25.doc", (3, 6.0), (1, 2.0))
    merged = merge_lists("bm25", [code, docs])
    assert merged.name == "bm25"
    assert [(h.span_id, h.score) for h in merged.hits] == [(1, 9.0), (3, 6.0), (2, 4.0)]
    # fused with per-category weights: doc span 3 at rank 2, weight 0.5
    out = by_id(rrf([merged], {"bm25": 1.0}, k=60, item_weights={1: 1.0, 2: 1.0, 3: 0.5}))
    assert out[3].score == pytest.approx(0.5 / 62)
    assert out[2].score == pytest.approx(1 / 63)
