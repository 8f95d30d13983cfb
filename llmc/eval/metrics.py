"""Retrieval metrics: pure functions over one ranked list and its judgments.

A *result* is anything with ``path``, ``start_line`` and ``end_line`` (and ``lang`` or
``category`` for Code@k); a *judgment* is anything with ``path``, ``start_line``,
``end_line`` (both None for a file-level judgment) and ``grade`` (1-3).

Matching (span level): a result matches a judgment when the paths are equal and the line
ranges overlap; a judgment without lines is matched by any result in its file. Each
judgment is credited at most once, to the best-ranked result that matches it, so ten
overlapping spans of one function count once, and nDCG stays within [0, 1].

Definitions (docs/evaluation.md has them in prose, with examples):

- ``reciprocal_rank``: 1 / rank of the first result (within ``k``) matching any judgment.
- ``ndcg``: sum over ranks i <= k of (2^gain_i - 1) / log2(i + 1), divided by the same sum
  for the ideal ranking (the judgments' grades, best first). gain_i is the grade of the
  judgment result i is credited with (0 when it matches none, or only judgments already
  credited to better-ranked results).
- ``span_recall``: share of judgments matched by the top k.
- ``file_recall``: share of the judged files (distinct paths) that appear in the top k.
- ``hit``: 1 when any of the top k matches a judgment (span level).
- ``code_at``: 1 when any of the top k results is in a code file (a known language other
  than markdown, rst and plain text). Reported for code-intent queries only.
- ``percentile``: linear interpolation between closest ranks (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from llmc.types import CODE


class ResultLike(Protocol):
    path: str
    start_line: int
    end_line: int


class JudgmentLike(Protocol):
    path: str
    start_line: int | None
    end_line: int | None
    grade: int


def matches(result: ResultLike, judgment: JudgmentLike) -> bool:
    """Same path, and overlapping lines (any line of the file for a file-level judgment)."""
    if result.path != judgment.path:
        return False
    if judgment.start_line is None or judgment.end_line is None:
        return True
    return result.start_line <= judgment.end_line and judgment.start_line <= result.end_line


def credited_gains(
    results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int
) -> list[int]:
    """The gain of each of the top ``k`` results, each judgment credited at most once.

    A result takes the highest-graded judgment it matches that no better-ranked result
    has taken yet; a result that only matches taken judgments gains 0.
    """
    taken = [False] * len(judgments)
    gains = []
    for result in results[:k]:
        best = -1
        for j, judgment in enumerate(judgments):
            if taken[j] or not matches(result, judgment):
                continue
            if best < 0 or judgment.grade > judgments[best].grade:
                best = j
        if best >= 0:
            taken[best] = True
            gains.append(int(judgments[best].grade))
        else:
            gains.append(0)
    return gains


def _first_match_rank(
    results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int
) -> int | None:
    for rank, result in enumerate(results[:k], start=1):
        if any(matches(result, j) for j in judgments):
            return rank
    return None


def reciprocal_rank(
    results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int = 10
) -> float:
    rank = _first_match_rank(results, judgments, k)
    return 1.0 / rank if rank else 0.0


def hit(results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int = 5) -> bool:
    return _first_match_rank(results, judgments, k) is not None


def dcg(gains: Iterable[float]) -> float:
    """Discounted cumulative gain with exponential gain: sum (2^g - 1) / log2(rank + 1)."""
    return sum((2.0**g - 1.0) / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def ndcg(results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int = 10) -> float:
    ideal = dcg(sorted((int(j.grade) for j in judgments), reverse=True)[:k])
    if ideal <= 0:
        return 0.0
    return dcg(credited_gains(results, judgments, k)) / ideal


def span_recall(
    results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int = 10
) -> float:
    if not judgments:
        return 0.0
    top = results[:k]
    found = sum(1 for j in judgments if any(matches(r, j) for r in top))
    return found / len(judgments)


def file_recall(
    results: Sequence[ResultLike], judgments: Sequence[JudgmentLike], k: int = 10
) -> float:
    wanted = {j.path for j in judgments}
    if not wanted:
        return 0.0
    seen = {r.path for r in results[:k]}
    return len(wanted & seen) / len(wanted)


def is_code_result(result: Any) -> bool:
    """Whether a result lies in a code file.

    Decided by its ``lang`` (markdown, rst and text are prose), else its ``category``,
    else its path. Files of unknown type, indexed as ``text`` windows, are not code.
    """
    from llmc.languages import detect_language, is_code_lang

    lang = getattr(result, "lang", "") or ""
    if lang:
        return is_code_lang(lang)
    category = getattr(result, "category", "") or ""
    if category:
        return category == CODE
    return detect_language(result.path)[1] == CODE


def code_at(results: Sequence[ResultLike], k: int = 3) -> bool:
    return any(is_code_result(r) for r in results[:k])


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within [0, 100], got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class QueryScores:
    """Every metric of one query under one variant."""

    query: str
    intent: str
    rr: float  # reciprocal rank @10
    ndcg: float  # nDCG@10
    span_recall_5: float
    span_recall_10: float
    file_recall_5: float
    file_recall_10: float
    hit_5: bool
    code_3: bool | None  # None unless the query's intent is code
    took_ms: float


def score_query(
    query: str,
    intent: str,
    results: Sequence[ResultLike],
    judgments: Sequence[JudgmentLike],
    took_ms: float = 0.0,
) -> QueryScores:
    return QueryScores(
        query=query,
        intent=intent,
        rr=reciprocal_rank(results, judgments, 10),
        ndcg=ndcg(results, judgments, 10),
        span_recall_5=span_recall(results, judgments, 5),
        span_recall_10=span_recall(results, judgments, 10),
        file_recall_5=file_recall(results, judgments, 5),
        file_recall_10=file_recall(results, judgments, 10),
        hit_5=hit(results, judgments, 5),
        code_3=code_at(results, 3) if intent == "code" else None,
        took_ms=took_ms,
    )


@dataclass(frozen=True)
class Summary:
    """Means over one bucket of queries (all, or one intent) and latency percentiles."""

    n: int
    mrr: float
    ndcg: float
    span_recall_5: float
    span_recall_10: float
    file_recall_5: float
    file_recall_10: float
    hit_5: float
    code_3: float | None  # None when the bucket has no code-intent query
    n_code: int
    p50_ms: float
    p95_ms: float

    def to_json(self) -> dict[str, Any]:
        out = {
            "n": self.n,
            "mrr@10": self.mrr,
            "ndcg@10": self.ndcg,
            "span_recall@5": self.span_recall_5,
            "span_recall@10": self.span_recall_10,
            "file_recall@5": self.file_recall_5,
            "file_recall@10": self.file_recall_10,
            "hit@5": self.hit_5,
            "code@3": self.code_3,
            "n_code": self.n_code,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
        }
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def summarize(scores: Sequence[QueryScores]) -> Summary:
    code = [s.code_3 for s in scores if s.code_3 is not None]
    took = [s.took_ms for s in scores]
    return Summary(
        n=len(scores),
        mrr=_mean([s.rr for s in scores]),
        ndcg=_mean([s.ndcg for s in scores]),
        span_recall_5=_mean([s.span_recall_5 for s in scores]),
        span_recall_10=_mean([s.span_recall_10 for s in scores]),
        file_recall_5=_mean([s.file_recall_5 for s in scores]),
        file_recall_10=_mean([s.file_recall_10 for s in scores]),
        hit_5=_mean([float(s.hit_5) for s in scores]),
        code_3=_mean([float(c) for c in code]) if code else None,
        n_code=len(code),
        p50_ms=percentile(took, 50),
        p95_ms=percentile(took, 95),
    )


def summarize_by_intent(scores: Sequence[QueryScores]) -> dict[str, Summary]:
    """``{"all": ..., "code": ..., "docs": ..., "mixed": ...}`` (only buckets with queries)."""
    out = {"all": summarize(scores)}
    for intent in sorted({s.intent for s in scores}):
        out[intent] = summarize([s for s in scores if s.intent == intent])
    return out


__all__ = [
    "QueryScores",
    "Summary",
    "code_at",
    "credited_gains",
    "dcg",
    "file_recall",
    "hit",
    "is_code_result",
    "matches",
    "ndcg",
    "percentile",
    "reciprocal_rank",
    "score_query",
    "span_recall",
    "summarize",
    "summarize_by_intent",
]
