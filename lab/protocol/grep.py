"""The ``grep`` baseline: what ``rg -i`` with the query's words would give, ranked.

Over the spans of an llmc index (their text, as the file holds it: no context header):
the query's terms are its lowercased words (letters, digits, ``_``) of two characters or
more, English stopwords dropped, each once. A span's score is the number of distinct terms
that occur in its lowercased text as substrings (as ``rg -i -F`` matches), ties broken by
the total number of occurrences, then by the shorter span, then by path and line. Spans
with no term do not appear. It is a ``SearcherLike`` for the eval runner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

STOPWORDS = frozenset(
    """
    a an and are as at be been being but by can could did do does doing for from had has
    have having he her here hers him his how i if in into is it its itself just may me
    might more most must my no nor not of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they
    this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours
    """.split()
)
_WORD = re.compile(r"[A-Za-z0-9_]+")


def query_terms(query: str) -> list[str]:
    """The distinct lowercased words of ``query`` (two characters or more, no stopwords),
    in order of first appearance."""
    terms = [w.lower() for w in _WORD.findall(query)]
    return list(dict.fromkeys(t for t in terms if len(t) >= 2 and t not in STOPWORDS))


@dataclass(frozen=True)
class GrepSpan:
    path: str
    start_line: int
    end_line: int
    text: str  # lowercased
    lang: str = ""
    category: str = ""


@dataclass(frozen=True)
class GrepResult:
    path: str
    start_line: int
    end_line: int
    lang: str
    category: str
    score: float
    distinct: int
    occurrences: int


@dataclass(frozen=True)
class GrepResponse:
    results: tuple[GrepResult, ...]


def grep_rank(query: str, spans: Sequence[GrepSpan], k: int) -> list[GrepResult]:
    """The top ``k`` spans for ``query`` (see the module docstring)."""
    terms = query_terms(query)
    if not terms:
        return []
    scored = []
    for i, s in enumerate(spans):
        counts = [s.text.count(t) for t in terms]
        distinct = sum(1 for c in counts if c)
        if distinct:
            length = s.end_line - s.start_line + 1
            scored.append((-distinct, -sum(counts), length, s.path, s.start_line, i))
    scored.sort()
    out = []
    for neg_distinct, neg_total, _length, _path, _start, i in scored[:k]:
        s = spans[i]
        out.append(
            GrepResult(
                s.path,
                s.start_line,
                s.end_line,
                s.lang,
                s.category,
                score=float(-neg_distinct),
                distinct=-neg_distinct,
                occurrences=-neg_total,
            )
        )
    return out


class GrepSearcher:
    """Term-matching search over the spans of the index at ``root`` (loaded once)."""

    def __init__(self, root: Path, spans: Iterable[GrepSpan] | None = None):
        self.root = Path(root)
        self._spans: list[GrepSpan] | None = list(spans) if spans is not None else None

    def _load(self) -> list[GrepSpan]:
        if self._spans is None:
            from llmc.paths import db_path
            from llmc.store.db import Store

            store = Store(db_path(self.root), readonly=True)
            try:
                self._spans = [
                    GrepSpan(
                        s.span.path,
                        s.span.start_line,
                        s.span.end_line,
                        s.span.text.lower(),
                        s.span.lang,
                        s.span.category,
                    )
                    for s in store.iter_spans()
                ]
            finally:
                store.close()
        return self._spans

    def warm(self) -> None:
        self._load()

    def search(self, query: str, k: int | None = None) -> GrepResponse:
        return GrepResponse(tuple(grep_rank(query, self._load(), k or 10)))

    def close(self) -> None:
        self._spans = None


__all__ = [
    "STOPWORDS",
    "GrepResponse",
    "GrepResult",
    "GrepSearcher",
    "GrepSpan",
    "grep_rank",
    "query_terms",
]
