"""BM25 on the team store, scored as the local tantivy index scores it.

Why not PostgreSQL's own full text: ``ts_rank`` is not BM25 (no idf, no length
normalisation of that kind), and the learned rankers read BM25 scores as features, trained
on tantivy's. So a shard keeps BM25's statistics instead: each span's analysed terms per
field (the same code-aware tokens and English stemming as ``store/lexical.py``, analysed
by tantivy's own analyser at publish), and the server folds them into one posting list per
(field, term) when a version is built. A query fetches the posting lists of its terms (one
round trip) and scores them here with tantivy's formula: ``idf = ln(1 + (N - df + 0.5) /
(df + 0.5))``, ``k1`` 1.2, ``b`` 0.75, the document length quantised as tantivy stores it
(Lucene's one-byte length code: exact up to 39 tokens, then 3 significant bits), the
average length exact, each field boosted as ``FIELD_BOOSTS``. On a freshly built local
index the scores agree to float rounding (tests/team/test_team_search.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import lru_cache

import numpy as np

from llmc.store.file_lexical import MAX_QUERY_TERMS as FILE_QUERY_TERMS
from llmc.store.lexical import FIELD_BOOSTS, analysed_query_terms, span_fields
from llmc.store.tokens import code_tokens
from llmc.types import Span

K1 = 1.2
B = 0.75
FIELDS = tuple(FIELD_BOOSTS)  # symbol, path, header, text: a field's number is its place here
TEXT_FIELD = FIELDS.index("text")
HEADER_FIELD = FIELDS.index("header")


@lru_cache(maxsize=1)
def _analyzer():
    from llmc.store.lexical import _analyzer as tantivy_analyzer

    return tantivy_analyzer()


def analyse(tokens: Iterable[str]) -> list[str]:
    """``tokens`` (code-aware) as the local index analyses them: lower-cased, stemmed, long
    tokens dropped."""
    joined = " ".join(tokens)
    return [t for t in analyze(joined) if t] if joined else []


@dataclass(frozen=True)
class SpanTerms:
    """A span's analysed terms as a shard stores them: parallel arrays (field, term, tf)
    and its length in tokens per field."""

    fields: list[int]
    terms: list[str]
    tfs: list[int]
    lens: list[int]


def span_terms(span: Span) -> SpanTerms:
    path, symbol, header, text = span_fields(span)
    by_field = {"symbol": symbol, "path": path, "header": header, "text": text}
    fields: list[int] = []
    terms: list[str] = []
    tfs: list[int] = []
    lens: list[int] = []
    for number, name in enumerate(FIELDS):
        analysed = analyse(by_field[name].split())
        lens.append(len(analysed))
        for term, tf in Counter(analysed).items():
            fields.append(number)
            terms.append(term)
            tfs.append(tf)
    return SpanTerms(fields, terms, tfs, lens)


def file_terms(text: str) -> tuple[list[str], list[int], int]:
    """A whole file's analysed terms, their counts and its length (the whole-file index)."""
    analysed = analyse(code_tokens(text))
    counts = Counter(analysed)
    return list(counts), list(counts.values()), len(analysed)


def analyze(text: str) -> list[str]:
    """``text`` through the local index's analyser (``LexicalIndex``'s ``analyze``)."""
    return _analyzer().analyze(text)


def query_terms(query: str) -> list[str]:
    """Analysed, de-duplicated query terms in first-seen order (``LexicalIndex.query_terms``)."""
    return analysed_query_terms(analyze, query)


def file_query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(analyse(code_tokens(query))))[:FILE_QUERY_TERMS]


# -- tantivy's document length code ---------------------------------------------------------
def _length_table() -> np.ndarray:
    """Code → decoded length: Lucene's ``SmallFloat.byte4ToInt`` (24 exact values, then a
    3-bit mantissa with an exponent), the table tantivy's fieldnorms decode through."""
    out = []
    for code in range(256):
        if code < 24:
            out.append(code)
            continue
        small = code - 24
        bits, shift = small & 7, (small >> 3) - 1
        out.append(24 + (bits if shift < 0 else (bits | 8) << shift))
    return np.asarray(out, dtype=np.float64)


LENGTHS = _length_table()


def quantised(lengths: np.ndarray) -> np.ndarray:
    """Each length as tantivy stores it: the largest table value not above it."""
    codes = np.searchsorted(LENGTHS, lengths, side="right") - 1
    return LENGTHS[np.clip(codes, 0, 255)]


def idf(df: int | np.ndarray, n: int) -> np.ndarray:
    return np.log1p((n - np.asarray(df, dtype=np.float64) + 0.5) / (np.asarray(df) + 0.5))


@dataclass
class DocStats:
    """A shard's documents, by position: ids ascending, quantised lengths per field, the
    average length per field (exact, as tantivy's) and each document's category."""

    ids: np.ndarray  # int64, ascending
    lengths: np.ndarray  # float64, (fields, docs): quantised
    averages: np.ndarray  # float64, (fields,)
    categories: np.ndarray  # object: category per document
    _masks: dict[str, np.ndarray] = dataclass_field(default_factory=dict)
    _norms: np.ndarray | None = None

    def norms(self) -> np.ndarray:
        """BM25's length normalisation per field and document, ``k1 (1 - b + b dl / avgdl)``
        (computed once)."""
        if self._norms is None:
            averages = np.where(self.averages > 0, self.averages, 1.0)[:, None]
            self._norms = K1 * (1 - B + B * self.lengths / averages)
        return self._norms

    def mask(self, category: str) -> np.ndarray:
        """Which documents are of ``category`` (computed once)."""
        if category not in self._masks:
            self._masks[category] = self.categories == category
        return self._masks[category]

    @classmethod
    def of(cls, ids: Sequence[int], lens: Sequence[Sequence[int]], cats: Sequence[str]):
        order = np.argsort(np.asarray(ids, dtype=np.int64), kind="stable")
        raw = np.asarray(lens, dtype=np.float64).reshape(len(ids), -1)[order].T
        n = max(len(ids), 1)
        return cls(
            ids=np.asarray(ids, dtype=np.int64)[order],
            lengths=quantised(raw),
            averages=raw.sum(axis=1) / n,
            categories=np.asarray(cats, dtype=object)[order],
        )

    @classmethod
    def empty(cls) -> DocStats:
        fields = len(FIELDS)
        return cls(
            ids=np.zeros(0, dtype=np.int64), lengths=np.zeros((fields, 0)),
            averages=np.zeros(fields), categories=np.zeros(0, dtype=object),
        )  # fmt: skip

    @classmethod
    def joined(cls, parts: Sequence[tuple[np.ndarray, DocStats]]) -> DocStats:
        """Several shards' documents as one index's, side by side in ``parts``' order:
        (each part's ids in the joined index, ascending across parts; its statistics). The
        average lengths are the union's, as one index over every document counts them."""
        total = sum(len(s) for _, s in parts)
        averages = sum(s.averages * len(s) for _, s in parts) / max(total, 1)
        return cls(
            ids=np.concatenate([ids for ids, _ in parts]).astype(np.int64),
            lengths=np.concatenate([s.lengths for _, s in parts], axis=1),
            averages=np.asarray(averages, dtype=np.float64).reshape(-1),
            categories=np.concatenate([s.categories for _, s in parts]),
        )

    def __len__(self) -> int:
        return len(self.ids)


Posting = tuple[np.ndarray, np.ndarray]  # (document positions ascending, term frequencies)


def bm25(
    stats: DocStats,
    postings: Mapping[tuple[int, str], Posting],
    weights: Mapping[str, float],
    boosts: Mapping[int, float],
    mask: np.ndarray | None = None,
    constant: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of every document that holds a term: (positions, scores). ``weights`` is the
    query's term → weight, ``boosts`` field number → boost; ``mask`` keeps documents (a
    category); ``constant`` is added to each score (the category clause's own score)."""
    n = len(stats)
    norms = stats.norms()
    scores = np.zeros(n, dtype=np.float64)
    hit = np.zeros(n, dtype=bool)
    for (field, term), (pos, tfs) in postings.items():
        boost = boosts.get(field)
        weight = weights.get(term)
        if not boost or not weight or not len(pos):
            continue
        tf = tfs.astype(np.float64)
        scale = boost * weight * float(idf(len(pos), n)) * (1 + K1)
        scores[pos] += scale * tf / (tf + norms[field][pos])
        hit[pos] = True
    if mask is not None:
        hit &= mask
    found = np.flatnonzero(hit)
    return found, scores[found] + constant


def top(positions: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best (position, score), best first; ties by position (tantivy's
    order for equal scores is by document address, which follows the ids here)."""
    if not len(positions) or limit <= 0:
        return []
    if len(scores) > 4 * limit:  # only what can make the cut is sorted (ties at it kept)
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        kept = scores >= cut
        positions, scores = positions[kept], scores[kept]
    order = np.lexsort((positions, -scores))[:limit]
    return [(int(positions[i]), float(scores[i])) for i in order]


__all__ = [
    "FIELDS",
    "DocStats",
    "SpanTerms",
    "bm25",
    "file_query_terms",
    "file_terms",
    "idf",
    "query_terms",
    "quantised",
    "span_terms",
    "top",
]
