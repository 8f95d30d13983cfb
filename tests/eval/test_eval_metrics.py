"""Retrieval metrics against numbers worked out by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from llmc.eval.metrics import (
    code_at,
    credited_gains,
    dcg,
    file_recall,
    hit,
    is_code_result,
    matches,
    ndcg,
    percentile,
    reciprocal_rank,
    score_query,
    span_recall,
    summarize,
    summarize_by_intent,
)
from llmc.eval.queries import Judgment


@dataclass(frozen=True)
class R:
    path: str
    start_line: int
    end_line: int
    lang: str = "python"


A = Judgment("f.py", 3, 10, 20)
B = Judgment("f.py", 2, 50, 60)
C = Judgment("docs/x.md", 1)  # file level
JUDGED = [A, B, C]
RESULTS = [
    R("g.py", 1, 5),  # 1: miss
    R("f.py", 15, 25),  # 2: overlaps A -> 3
    R("f.py", 18, 30),  # 3: overlaps A again, already credited -> 0
    R("docs/x.md", 100, 110, "markdown"),  # 4: file-level C -> 1
    R("f.py", 61, 70),  # 5: just past B -> 0
    R("f.py", 60, 60),  # 6: touches B's last line -> 2
]


def test_matches_overlap_and_file_level():
    assert matches(R("f.py", 20, 30), A)  # shares line 20
    assert matches(R("f.py", 1, 10), A)  # shares line 10
    assert not matches(R("f.py", 21, 30), A)
    assert not matches(R("f.py", 1, 9), A)
    assert not matches(R("g.py", 10, 20), A)
    assert matches(R("docs/x.md", 1, 1), C)
    assert not matches(R("docs/y.md", 1, 1), C)


def test_each_judgment_is_credited_once():
    assert credited_gains(RESULTS, JUDGED, 10) == [0, 3, 0, 1, 0, 2]
    assert credited_gains(RESULTS, JUDGED, 3) == [0, 3, 0]


def test_a_result_takes_the_best_free_judgment():
    overlapping = [Judgment("f.py", 1, 1, 100), Judgment("f.py", 3, 10, 20)]
    assert credited_gains([R("f.py", 15, 16), R("f.py", 30, 31)], overlapping, 10) == [3, 1]


def test_reciprocal_rank_and_hit():
    assert reciprocal_rank(RESULTS, JUDGED) == 0.5
    assert reciprocal_rank(RESULTS, JUDGED, k=1) == 0.0
    assert reciprocal_rank(RESULTS[2:], [B]) == 1 / 4
    assert reciprocal_rank([], JUDGED) == 0.0
    assert hit(RESULTS, JUDGED, 5)
    assert not hit(RESULTS, JUDGED, 1)
    assert not hit(RESULTS, [B], 5)


def test_dcg_by_hand():
    assert dcg([3]) == 7.0
    assert dcg([0, 3]) == pytest.approx(7 / math.log2(3))
    assert dcg([2, 1]) == pytest.approx(3 + 1 / math.log2(3))


def test_ndcg_by_hand():
    got = 7 / math.log2(3) + 1 / math.log2(5) + 3 / math.log2(7)  # ranks 2, 4, 6
    ideal = 7 + 3 / math.log2(3) + 1 / math.log2(4)  # grades 3, 2, 1
    assert ndcg(RESULTS, JUDGED) == pytest.approx(got / ideal)
    assert ndcg(RESULTS, JUDGED) == pytest.approx(0.62982, abs=1e-5)
    perfect = [R("f.py", 10, 20), R("f.py", 50, 60), R("docs/x.md", 1, 2)]
    assert ndcg(perfect, JUDGED) == pytest.approx(1.0)
    # repeating the best span never beats the ideal ranking
    assert ndcg([R("f.py", 10, 20)] * 10, JUDGED) == pytest.approx(7 / ideal)
    assert ndcg([], JUDGED) == 0.0


def test_recall_span_and_file_level():
    assert span_recall(RESULTS, JUDGED, 5) == pytest.approx(2 / 3)  # A and C
    assert span_recall(RESULTS, JUDGED, 10) == 1.0
    assert span_recall(RESULTS, JUDGED, 1) == 0.0
    assert file_recall(RESULTS, JUDGED, 1) == 0.0
    assert file_recall(RESULTS, JUDGED, 2) == 0.5  # f.py of {f.py, docs/x.md}
    assert file_recall(RESULTS, JUDGED, 5) == 1.0
    # a file hit is not a span hit: right file, wrong function
    assert file_recall([R("f.py", 30, 40)], [A], 10) == 1.0
    assert span_recall([R("f.py", 30, 40)], [A], 10) == 0.0


def test_code_at_3():
    docs = [R("a.md", 1, 2, "markdown"), R("b.rst", 1, 2, "rst"), R("README", 1, 2, "text")]
    assert not code_at(docs, 3)
    assert code_at([*docs[:2], R("x.py", 1, 2)], 3)
    assert not code_at([*docs, R("x.py", 1, 2)], 3)  # 4th place is too late
    assert code_at([R("x.toml", 1, 2, "toml")], 3)


def test_is_code_result_prefers_lang_then_category_then_path():
    @dataclass
    class Bare:
        path: str
        start_line: int = 1
        end_line: int = 1
        lang: str = ""
        category: str = ""

    assert is_code_result(Bare("a.py"))
    assert not is_code_result(Bare("a.md"))
    assert is_code_result(Bare("a.weird", category="code"))
    # unknown files are indexed as "text" windows: not code
    assert not is_code_result(Bare("a.weird", lang="text", category="code"))


def test_percentile_linear_interpolation():
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert percentile([1, 2, 3, 4], 0) == 1
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([10.0], 95) == 10.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_score_and_summarize_by_intent():
    q1 = score_query("a", "code", RESULTS, JUDGED, took_ms=10)
    q2 = score_query("b", "docs", [R("docs/x.md", 1, 5, "markdown")], [C], took_ms=30)
    q3 = score_query("c", "code", [R("n.md", 1, 5, "markdown")], [A], took_ms=20)
    assert (q1.rr, q1.hit_5, q1.code_3) == (0.5, True, True)
    assert (q2.rr, q2.ndcg, q2.code_3) == (1.0, 1.0, None)
    assert (q3.rr, q3.code_3) == (0.0, False)
    s = summarize([q1, q2, q3])
    assert s.n == 3
    assert s.mrr == pytest.approx(0.5)
    assert s.hit_5 == pytest.approx(2 / 3)
    assert s.code_3 == 0.5 and s.n_code == 2
    assert (s.p50_ms, s.p95_ms) == (20, pytest.approx(29))
    buckets = summarize_by_intent([q1, q2, q3])
    assert sorted(buckets) == ["all", "code", "docs"]
    assert buckets["code"].mrr == 0.25
    assert buckets["docs"].code_3 is None
    assert buckets["all"].to_json()["mrr@10"] == 0.5
