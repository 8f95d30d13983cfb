"""Per-candidate features of one query's pool, for the learned ranker (``learned.py``).

The pool is the union of every ranked list the retrieve stage returned (each retriever
contributes its top ``search.ranker_depth``: BM25 and dense per category, exact symbol
and path lookups, HyDE when it ran), fused before anything is truncated. Each candidate
gets one row of ``FEATURES``, in that fixed order (the model file names them, and
``learned.py`` refuses a model whose names differ):

- per list (``POOL_LISTS``): its score, its rank (1-based) and its score relative to the
  list's best (BM25: ``score / top``; dense, HyDE: ``score - top``). A list that does not
  hold the candidate gives the sentinels ``MISSING_RANK``, ``MISSING_SCORE`` and
  ``MISSING_REL``, so "not retrieved" is a value the trees can split on;
- over lists: how many hold it, its RRF (k = 60) sum, its best rank, whether exact-symbol
  lookup pinned it;
- the query: the router's ``p_code`` and confidence, its intent as three flags, its word
  and identifier counts, whether it asks about tests (router probabilities are features,
  not a gate); and its shape (``SHAPE_FEATURES``, issue 28), worked out the same way for a
  5-word question and a 500-word report from the whole query read as ``report.read_query``
  reads it: read as a report or not, log characters, log code and traceback lines, log
  code-shaped names, paths and traceback frames it quotes (the other query columns read the
  router's focus, which for a report is its title and names);
- the span: code or doc, kind flags, log line count, part of a split span;
- its path: test file, docs directory or doc file, example, type stub, README, depth;
- overlap: the share of the query's content words in the span's symbol and qualified name,
  and in its path.

Span metadata (no text) is read with one SQL query per pool and cached by span id (ids are
never reused). Pure numpy and SQLite: nothing here imports training code.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmc.search.query import STOPWORDS, parse
from llmc.search.report import QueryParts, read_query
from llmc.search.router import is_test_path
from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, MIXED_ROUTE, RankedList, RouteDecision

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.store.db import Store

POOL_LISTS = ("bm25.code", "bm25.doc", "dense.code", "dense.doc", "exact", "hyde.code", "hyde.doc")
MISSING_RANK = 1000.0
MISSING_SCORE = -1.0  # below any cosine and any BM25 score
MISSING_REL = -2.0
RRF_K = 60
_KINDS = ("function", "method", "class", "module", "section")
_DOC_DIRS = frozenset({"doc", "docs", "documentation", "guide", "guides", "manual"})
_EXAMPLE_DIRS = frozenset({"example", "examples", "demo", "demos", "samples", "sample"})
_DOC_EXT = (".md", ".rst", ".txt", ".markdown", ".adoc")
_STUBS = (".pyi", ".d.ts", ".d.mts", ".d.cts")
_TEST_CUE = re.compile(r"\b(?:tests?|testing|tested|unittest|pytest|spec|specs|fixtures?)\b")
_WORD = re.compile(r"[A-Za-z][a-z0-9]*|[A-Z]+(?![a-z])|[0-9]+")


def _list_features() -> tuple[str, ...]:
    return tuple(f"{name}:{part}" for name in POOL_LISTS for part in ("score", "rank", "rel"))


FEATURES: tuple[str, ...] = (
    *_list_features(),
    "pool:n_lists",
    "pool:rrf",
    "pool:best_rank",
    "pool:pinned",
    "query:p_code",
    "query:confidence",
    "query:intent_code",
    "query:intent_docs",
    "query:intent_mixed",
    "query:words",
    "query:identifiers",
    "query:tests",
    "span:is_code",
    *(f"span:kind_{k}" for k in _KINDS),
    "span:lines",
    "span:part",
    "path:test",
    "path:docs",
    "path:example",
    "path:stub",
    "path:readme",
    "path:depth",
    "overlap:symbol",
    "overlap:path",
)
# The query's shape (issue 28): from the whole query, ``shape_row``. A pool cached without
# them gets them from its query's text (they read nothing else), see ``widen``.
SHAPE_FEATURES: tuple[str, ...] = (
    "query:long",
    "query:log_chars",
    "query:code_lines",
    "query:trace_lines",
    "query:log_names",
    "query:paths",
    "query:frames",
)
BASE_FEATURES = FEATURES
FEATURES = (*BASE_FEATURES, *SHAPE_FEATURES)
# Feature groups for the ablation (a group's columns are set to their missing values).
GROUPS: Mapping[str, tuple[str, ...]] = {
    "bm25": tuple(f for f in FEATURES if f.startswith("bm25.")),
    "dense": tuple(f for f in FEATURES if f.startswith(("dense.", "hyde."))),
    "exact": tuple(f for f in FEATURES if f.startswith("exact:")) + ("pool:pinned",),
    "router": tuple(f for f in FEATURES if f.startswith("query:") and f not in SHAPE_FEATURES),
    "shape": SHAPE_FEATURES,
    "span": tuple(f for f in FEATURES if f.startswith(("span:", "path:"))),
    "overlap": ("overlap:symbol", "overlap:path"),
}


@dataclass(frozen=True)
class SpanMeta:
    """What features need of a span: no text."""

    span_id: int
    path: str
    category: str
    kind: str
    symbol: str
    qualname: str
    start_line: int
    end_line: int
    part: int


@dataclass(frozen=True)
class QueryInfo:
    """The query's side of the features: its words and the router's decision."""

    text: str
    decision: RouteDecision
    pinned: tuple[int, ...] = ()
    parts: QueryParts | None = None  # the whole query, read; None: read ``text``

    @property
    def words(self) -> frozenset[str]:
        return content_words(self.text)


@dataclass(frozen=True)
class Pool:
    """One query's candidates (span ids) and their feature rows (``FEATURES`` order)."""

    span_ids: tuple[int, ...]
    matrix: np.ndarray  # float32, len(span_ids) x len(FEATURES)
    ranks: tuple[Mapping[str, int], ...]  # per candidate: list name -> rank
    scores: tuple[Mapping[str, float], ...]  # per candidate: list name -> score
    places: tuple[tuple[str, int], ...] = ()  # per candidate: (path, start line), for ties

    def __len__(self) -> int:
        return len(self.span_ids)


def split_words(text: str) -> list[str]:
    """Lowercase words of ``text``, identifiers split (``fooBar_baz`` → foo bar baz)."""
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in split_words(text) if len(w) > 1 and w not in STOPWORDS)


def path_class(path: str) -> dict[str, float]:
    """The path flags: test, docs, example, stub, readme, and depth (directories)."""
    low = path.lower()
    parts = low.split("/")
    dirs = set(parts[:-1])
    name = parts[-1]
    return {
        "path:test": float(is_test_path(path)),
        "path:docs": float(bool(dirs & _DOC_DIRS) or name.endswith(_DOC_EXT)),
        "path:example": float(bool(dirs & _EXAMPLE_DIRS)),
        "path:stub": float(low.endswith(_STUBS)),
        "path:readme": float(name.startswith("readme")),
        "path:depth": float(len(parts) - 1),
    }


class MetaCache:
    """Span id → ``SpanMeta``, read without texts, kept across queries (ids are never
    reused; a span that left the index is simply not found)."""

    def __init__(self, limit: int = 200_000):
        self._meta: dict[int, SpanMeta] = {}
        self._limit = limit

    def get(self, store: Store, ids: Iterable[int]) -> dict[int, SpanMeta]:
        want = list(dict.fromkeys(ids))
        missing = [i for i in want if i not in self._meta]
        if missing:
            if len(self._meta) + len(missing) > self._limit:
                self._meta.clear()
            self._meta.update(read_meta(store, missing))
        return {i: self._meta[i] for i in want if i in self._meta}


def read_meta(store: Store, ids: Sequence[int]) -> dict[int, SpanMeta]:
    out: dict[int, SpanMeta] = {}
    for row in store.span_rows(ids):
        out[int(row[0])] = SpanMeta(
            int(row[0]), row[1], row[2], row[3], row[4] or "", row[5] or "",
            int(row[6]), int(row[7]), int(row[8] or 0),
        )  # fmt: skip
    return out


def query_row(query: QueryInfo) -> dict[str, float]:
    d = query.decision
    words = split_words(query.text)
    return {
        "query:p_code": d.p_code,
        "query:confidence": d.confidence,
        "query:intent_code": float(d.intent == CODE_ROUTE),
        "query:intent_docs": float(d.intent == DOCS_ROUTE),
        "query:intent_mixed": float(d.intent == MIXED_ROUTE),
        "query:words": float(len(words)),
        "query:identifiers": float(sum(1 for i in parse(query.text).identifiers if i.code_shaped)),
        "query:tests": float(bool(_TEST_CUE.search(query.text.lower()))),
    }


def shape_row(parts: QueryParts) -> dict[str, float]:
    """The query's shape (``SHAPE_FEATURES``) from the whole query read into ``parts``: the
    same arithmetic for a short query (``long`` 0, no code or traceback lines) and a report."""
    text = parts.text
    names = sum(1 for i in parse(text).all_identifiers if i.code_shaped)
    return {
        "query:long": float(parts.long),
        "query:log_chars": math.log1p(len(text)),
        "query:code_lines": math.log1p(len(parts.code)),
        "query:trace_lines": math.log1p(len(parts.traceback)),
        "query:log_names": math.log1p(names),
        "query:paths": math.log1p(len(parse(text).named_paths)),
        "query:frames": math.log1p(len(parse(text).frames)),
    }


def query_shape(raw: str, max_chars: int = 2000) -> dict[str, float]:
    """``shape_row`` of a raw query (as the pipeline reads it, ``search.max_query_chars``)."""
    return shape_row(read_query(raw, max_chars))


def widen(matrix: np.ndarray, names: Sequence[str], queries: Sequence[str],
          groups: Sequence[int], max_chars: int = 2000) -> np.ndarray:  # fmt: skip
    """A pool matrix with columns ``names`` (every feature but shape ones, possibly) as a
    ``FEATURES`` matrix: the shape columns worked out from each query's text (``groups``:
    rows per query, in the order of ``queries``). ValueError when another column is missing."""
    import numpy as np

    at = {n: i for i, n in enumerate(names)}
    missing = [f for f in FEATURES if f not in at and f not in SHAPE_FEATURES]
    if missing:
        raise ValueError(f"pool lacks features {missing}")
    out = np.zeros((matrix.shape[0], len(FEATURES)), dtype=np.float32)
    for j, f in enumerate(FEATURES):
        if f in at:
            out[:, j] = matrix[:, at[f]]
    start = 0
    for q, g in zip(queries, groups, strict=True):
        for f, v in query_shape(q, max_chars).items():
            if f not in at:
                out[start : start + g, FEATURES.index(f)] = v
        start += g
    return out


def span_row(meta: SpanMeta | None, words: frozenset[str]) -> dict[str, float]:
    if meta is None:
        return {}
    row = {f"span:kind_{k}": float(meta.kind == k) for k in _KINDS}
    row["span:is_code"] = float(meta.category == "code")
    row["span:lines"] = math.log1p(max(0, meta.end_line - meta.start_line + 1))
    row["span:part"] = float(meta.part)
    row.update(path_class(meta.path))
    if words:
        sym = set(split_words(f"{meta.symbol} {meta.qualname}"))
        path = set(split_words(meta.path))
        row["overlap:symbol"] = len(words & sym) / len(words)
        row["overlap:path"] = len(words & path) / len(words)
    return row


# The span's own columns, the same for every query: worked out once per span and path.
_PATH_COLUMNS = tuple(f for f in FEATURES if f.startswith("path:"))
_SPAN_COLUMNS = ("span:is_code", *(f"span:kind_{k}" for k in _KINDS), "span:lines", "span:part")
assert _SPAN_COLUMNS + _PATH_COLUMNS == tuple(
    f for f in FEATURES if f.startswith(("span:", "path:"))
)
_SPAN_SIDE: dict[SpanMeta, tuple[tuple[float, ...], frozenset[str], frozenset[str]]] = {}
_SPAN_SIDE_LIMIT = 50_000


@functools.lru_cache(maxsize=8192)
def _path_side(path: str) -> tuple[tuple[float, ...], frozenset[str]]:
    classes = path_class(path)
    return tuple(classes[f] for f in _PATH_COLUMNS), frozenset(split_words(path))


def _span_side(meta: SpanMeta) -> tuple[tuple[float, ...], frozenset[str], frozenset[str]]:
    """``meta``'s values of the span and path columns (as ``span_row`` has them), and the
    words of its symbol and qualified name and of its path, for the overlaps; remembered
    per span (``SpanMeta`` is a value: an edited span is another key)."""
    side = _SPAN_SIDE.get(meta)
    if side is None:
        path_values, path_words = _path_side(meta.path)
        values = (
            float(meta.category == "code"),
            *(float(meta.kind == k) for k in _KINDS),
            math.log1p(max(0, meta.end_line - meta.start_line + 1)),
            float(meta.part),
            *path_values,
        )
        side = (values, frozenset(split_words(f"{meta.symbol} {meta.qualname}")), path_words)
        if len(_SPAN_SIDE) >= _SPAN_SIDE_LIMIT:
            _SPAN_SIDE.clear()
        _SPAN_SIDE[meta] = side
    return side


Filled = tuple[str, float, list[int], list[int], list[float]]  # list, top, rows, ranks, scores


def build_pool(
    lists: Sequence[RankedList],
    query: QueryInfo,
    meta: Mapping[int, SpanMeta],
) -> Pool:
    """Every candidate of ``lists`` (deduplicated, first-seen order) with its features.

    Column by column: each list's hits fill its three columns at once, the query's values
    fill theirs, each span's own columns come from ``_span_side``; only the overlaps are
    worked out per candidate. The same numbers as ``span_row`` and ``query_row`` give,
    summed in the same order (``pool:rrf`` adds the lists in the order they come)."""
    import numpy as np

    index = {name: i for i, name in enumerate(FEATURES)}
    ranks, scores, filled = _gather(lists, query.pinned)
    ids = tuple(ranks)
    matrix = np.zeros((len(ids), len(FEATURES)), dtype=np.float32)
    _list_columns(matrix, index, filled)
    pinned = set(query.pinned)
    matrix[:, index["pool:pinned"]] = [float(i in pinned) for i in ids]
    for name, value in query_row(query).items():
        matrix[:, index[name]] = value
    parts = query.parts if query.parts is not None else read_query(query.text)
    for name, value in shape_row(parts).items():
        matrix[:, index[name]] = value
    _span_columns(matrix, index, ids, meta, query.words)
    return Pool(
        ids,
        matrix,
        tuple(ranks[i] for i in ids),
        tuple(scores.get(i, {}) for i in ids),
        tuple((m.path, m.start_line) if (m := meta.get(i)) else ("", 0) for i in ids),
    )


def _gather(
    lists: Sequence[RankedList], pinned: Sequence[int]
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, float]], list[Filled]]:
    """Each candidate's rank and score in every pooled list (candidates in first-seen
    order, the pinned ones last), and each list's hits as rows of the matrix."""
    ranks: dict[int, dict[str, int]] = {}
    scores: dict[int, dict[str, float]] = {}
    row_of: dict[int, int] = {}
    filled: list[Filled] = []
    tops: dict[str, float] = {}
    for ranked in lists:
        name = ranked.name
        if name not in POOL_LISTS or not ranked.hits:
            continue
        top = tops.setdefault(name, ranked.hits[0].score)
        rows: list[int] = []
        at: list[int] = []
        got: list[float] = []
        for rank, hit in enumerate(ranked.hits, start=1):
            span_id = hit.span_id
            r = ranks.get(span_id)
            if r is None:
                r = ranks[span_id] = {}
                row_of[span_id] = len(row_of)
            if name not in r:
                r[name] = rank
                scores.setdefault(span_id, {})[name] = hit.score
                rows.append(row_of[span_id])
                at.append(rank)
                got.append(hit.score)
        filled.append((name, top, rows, at, got))
    for span_id in pinned:
        if span_id not in ranks:
            ranks[span_id] = {}
            row_of[span_id] = len(row_of)
        scores.setdefault(span_id, {})
    return ranks, scores, filled


def _list_columns(matrix: np.ndarray, index: Mapping[str, int], filled: Sequence[Filled]) -> None:
    """Every list's score, rank and relative score columns, and the pool's columns
    (how many lists, their RRF sum in list order, the best rank)."""
    import numpy as np

    n = matrix.shape[0]
    for name in POOL_LISTS:
        matrix[:, index[f"{name}:score"]] = MISSING_SCORE
        matrix[:, index[f"{name}:rank"]] = MISSING_RANK
        matrix[:, index[f"{name}:rel"]] = MISSING_REL
    n_lists = np.zeros(n, dtype=np.int64)
    rrf = np.zeros(n, dtype=np.float64)
    best = np.full(n, np.inf)
    for name, top, rows, at, got in filled:
        where = np.array(rows, dtype=np.intp)
        rank_of = np.array(at, dtype=np.int64)
        score = np.array(got, dtype=np.float64)
        matrix[where, index[f"{name}:score"]] = score
        matrix[where, index[f"{name}:rank"]] = rank_of
        if name.startswith("bm25."):
            rel = score / top if top > 0 else np.zeros_like(score)
        else:
            rel = score - top
        matrix[where, index[f"{name}:rel"]] = rel
        n_lists[where] += 1
        rrf[where] += 1.0 / (RRF_K + rank_of)
        best[where] = np.minimum(best[where], rank_of)
    matrix[:, index["pool:n_lists"]] = n_lists
    matrix[:, index["pool:rrf"]] = rrf
    matrix[:, index["pool:best_rank"]] = np.where(np.isinf(best), MISSING_RANK, best)


def _span_columns(
    matrix: np.ndarray, index: Mapping[str, int], ids: Sequence[int],
    meta: Mapping[int, SpanMeta], words: frozenset[str],
) -> None:  # fmt: skip
    """Each span's own columns (``_span_side``; all 0 for a span no longer indexed) and
    its symbol and path overlap with the query's words."""
    import numpy as np

    gone = (0.0,) * (len(_SPAN_COLUMNS) + len(_PATH_COLUMNS))
    span_values: list[tuple[float, ...]] = []
    overlaps: list[tuple[float, float]] = []
    for span_id in ids:
        m = meta.get(span_id)
        if m is None:
            span_values.append(gone)
            overlaps.append((0.0, 0.0))
            continue
        values, sym, path = _span_side(m)
        span_values.append(values)
        if words:
            overlaps.append((len(words & sym) / len(words), len(words & path) / len(words)))
        else:
            overlaps.append((0.0, 0.0))
    if ids:
        span_cols = [index[f] for f in (*_SPAN_COLUMNS, *_PATH_COLUMNS)]
        matrix[:, span_cols] = np.array(span_values, dtype=np.float64)
        matrix[:, [index["overlap:symbol"], index["overlap:path"]]] = np.array(overlaps)


__all__ = [
    "BASE_FEATURES",
    "FEATURES",
    "SHAPE_FEATURES",
    "GROUPS",
    "MISSING_RANK",
    "MISSING_REL",
    "MISSING_SCORE",
    "POOL_LISTS",
    "MetaCache",
    "Pool",
    "QueryInfo",
    "SpanMeta",
    "build_pool",
    "content_words",
    "path_class",
    "query_shape",
    "read_meta",
    "shape_row",
    "widen",
    "split_words",
]
