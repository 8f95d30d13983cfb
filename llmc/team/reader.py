"""Reading one repository's current version in the team store, as search reads an index.

``ShardReader`` answers the ``Store`` methods the query path calls (spans by id, path or
symbol, the rankers' span rows, vector spaces and counts, KNN over pgvector's HNSW) from
the repository's shard, and ``ShardLexical`` / ``ShardFiles`` answer ``LexicalIndex``'s and
the whole-file index's, with BM25 scored from the shard's posting lists
(``llmc/team/terms.py``). So the one search pipeline runs over the store unchanged.

A reader follows the repository's current version: ``follow()`` (once per query) re-reads
its row, and a new version moves the reader to the new shard. A publish drops the old shard
right after switching, so a query that began on it can find it gone; that raises
``ShardGone``, and the caller asks again on the new version (``llmc/team/search.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmc.errors import TeamError
from llmc.store.file_lexical import FileMatch
from llmc.store.lexical import FIELD_BOOSTS, LexicalHit, term_weights
from llmc.store.vector_tables import VectorSpace
from llmc.team import terms
from llmc.team.schema import CATEGORIES, checked_shard
from llmc.types import Span, StoredSpan

SPAN_SELECT = (
    "id, path, lang, category, kind, symbol, qualname, start_line, end_line, text, header, "
    "part, signature, docstring"
)
EF_SEARCH_MIN = 100  # HNSW candidates per KNN search; at least 2k (pgvector's default is 40)
POSTINGS_CACHE_BYTES = 64_000_000  # posting lists kept across queries, per reader


class ShardGone(Exception):  # noqa: N818 - not an error to show: the caller retries
    """The shard a query was reading was dropped by a newer publish."""


@dataclass(frozen=True)
class Version:
    """A repository's current version in the store (its ``llmc.repos`` row)."""

    repo: str
    shard: str
    generation: int
    commit: str
    spaces: dict[str, Any]


def current_version(conn: Any, repo: str) -> Version:
    row = conn.execute(
        "SELECT shard, generation, commit, spaces FROM llmc.repos WHERE name = %s", (repo,)
    ).fetchone()
    if row is None:
        raise TeamError(f"no repository {repo!r} in the team store (`llmc team list`)")
    return Version(repo, checked_shard(row[0]), int(row[1]), row[2] or "", dict(row[3] or {}))


def _unpack(data: bytes | None, dtype: str) -> np.ndarray:
    """An integer array as PostgreSQL's ``array_send`` writes it (no nulls): header, then
    (length, big-endian value) per element. Far faster than a list of Python ints."""
    if not data:
        return np.zeros(0, dtype=dtype)
    ndim = int.from_bytes(data[0:4], "big")
    if ndim == 0:
        return np.zeros(0, dtype=dtype)
    record = np.dtype([("n", ">i4"), ("v", ">" + np.dtype(dtype).str[1:])])
    return np.frombuffer(data, dtype=record, offset=12 + 8 * ndim)["v"].astype(dtype)


def _row_to_span(row: Sequence[Any]) -> StoredSpan:
    return StoredSpan(
        id=int(row[0]),
        span=Span(
            path=row[1], lang=row[2], category=row[3], kind=row[4], symbol=row[5] or "",
            qualname=row[6] or "", start_line=row[7], end_line=row[8], text=row[9] or "",
            header=row[10] or "", part=row[11] or 0, signature=row[12] or "",
            docstring=row[13] or "",
        ),
    )  # fmt: skip


class ShardReader:
    """The ``Store`` methods search calls, over one repository's current shard."""

    def __init__(self, conn: Any, repo: str):
        self.conn = conn
        self.lock = threading.RLock()  # one connection: one statement at a time
        self.version = current_version(conn, repo)
        self._counts: dict[str, int] | None = None
        self._ef_search = 0

    # -- the version ------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.version.generation

    def follow(self) -> bool:
        """Move to the repository's current version; True when it changed."""
        with self.lock:
            now = current_version(self.conn, self.version.repo)
        if now == self.version:
            return False
        self.version, self._counts = now, None
        return True

    def data_version(self) -> int:
        return self.version.generation

    def q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """``sql`` with ``{s}`` the shard's schema: its rows (``ShardGone`` when dropped)."""
        import psycopg

        with self.lock:
            try:
                return self.conn.execute(sql.format(s=self.version.shard), params).fetchall()
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as e:
                raise ShardGone(str(e)) from None
            except psycopg.OperationalError as e:
                raise TeamError(f"the team store stopped answering: {_first(e)}") from None

    # -- spans ------------------------------------------------------------------------
    def spans_by_ids(self, ids: Sequence[int]) -> dict[int, StoredSpan]:
        rows = self.q(f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE id = ANY(%s)", (list(ids),))
        return {int(r[0]): _row_to_span(r) for r in rows}

    def paths_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        rows = self.q("SELECT id, path FROM {s}.spans WHERE id = ANY(%s)", (list(ids),))
        return {int(i): p for i, p in rows}

    def spans_for_path(self, path: str) -> list[StoredSpan]:
        rows = self.q(
            f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE path = %s ORDER BY start_line, part",
            (path,),
        )
        return [_row_to_span(r) for r in rows]

    def spans_by_symbol(self, name: str, limit: int = 20) -> list[StoredSpan]:
        rows = self.q(
            f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE (symbol = %s OR qualname = %s) "
            "AND kind NOT IN ('block', 'window', 'paragraph') ORDER BY part, id LIMIT %s",
            (name, name, limit),
        )
        return [_row_to_span(r) for r in rows]

    def has_file(self, path: str) -> bool:
        return bool(self.q("SELECT 1 FROM {s}.files WHERE path = %s LIMIT 1", (path,)))

    def paths_ending(self, tail: str, limit: int = 2) -> list[str]:
        rows = self.q(
            "SELECT path FROM {s}.files WHERE right(path, %s) = %s ORDER BY path LIMIT %s",
            (len(tail) + 1, "/" + tail, limit),
        )
        return [r[0] for r in rows]

    def span_rows(self, ids: Sequence[int]) -> list[tuple]:
        return self.q(
            "SELECT id, path, category, kind, symbol, qualname, start_line, end_line, part "
            "FROM {s}.spans WHERE id = ANY(%s)",
            (list(ids),),
        )

    def code_languages(self) -> list[tuple[str, int]]:
        return self.q(
            "SELECT lang, count(*) FROM {s}.spans WHERE category = 'code' AND lang IS NOT NULL "
            "GROUP BY lang ORDER BY 2 DESC, 1"
        )

    def text_lengths(self, category: str) -> list[int]:
        rows = self.q("SELECT length(text) FROM {s}.spans WHERE category = %s", (category,))
        return [int(r[0] or 0) for r in rows]

    def counts(self) -> dict[str, int]:
        if self._counts is None:
            rows = dict(self.q("SELECT category, count(*) FROM {s}.spans GROUP BY category"))
            files = self.q("SELECT count(*) FROM {s}.files")[0][0]
            self._counts = {
                "files": int(files), "spans": int(sum(rows.values())),
                "code_spans": int(rows.get("code", 0)), "doc_spans": int(rows.get("doc", 0)),
                "cached_vectors": 0,
            }  # fmt: skip
        return self._counts

    # -- vectors ----------------------------------------------------------------------
    def vector_space(self, category: str) -> VectorSpace | None:
        space = self.version.spaces.get(category)
        if not space:
            return None
        return VectorSpace(str(space["model"]), int(space["dim"]))

    def vector_counts(self) -> dict[str, tuple[int, int]]:
        counts = self.counts()
        out = {}
        for category in CATEGORIES:
            total = counts[f"{category}_spans"]
            if not total:
                continue
            embedded = 0
            if self.vector_space(category) is not None:
                embedded = int(self.q(f"SELECT count(*) FROM {{s}}.vec_{category}")[0][0])
            out[category] = (min(embedded, total), total)
        return out

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest spans by cosine distance over the shard's HNSW index."""
        if k <= 0 or self.vector_space(category) is None or category not in CATEGORIES:
            return []
        with self.lock:
            ef = max(EF_SEARCH_MIN, 2 * k)
            if ef != self._ef_search:
                self.conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                self._ef_search = ef
            rows = self.q(
                f"SELECT span_id, v <=> %s AS d FROM {{s}}.vec_{category} ORDER BY d LIMIT %s",
                (np.asarray(vector, dtype=np.float32), k),
            )
        return [(int(i), 1.0 - float(d)) for i, d in rows]

    def vectors(self, category: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids or self.vector_space(category) is None or category not in CATEGORIES:
            return {}
        rows = self.q(
            f"SELECT span_id, v FROM {{s}}.vec_{category} WHERE span_id = ANY(%s)",
            (list(ids),),
        )
        return {int(i): v.to_numpy().astype(np.float32) for i, v in rows}

    def all_vectors(self, category: str) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of ``category`` in the shard: (span ids ascending, float32 rows)."""
        space = self.vector_space(category)
        if space is None or category not in CATEGORIES:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        rows = self.q(f"SELECT span_id, v FROM {{s}}.vec_{category} ORDER BY span_id")
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.empty((len(rows), space.dim), dtype=np.float32)
        for i, (_, v) in enumerate(rows):
            matrix[i] = v.to_numpy()
        return ids, matrix

    def close(self) -> None:
        with self.lock:
            self.conn.close()


class _Postings:
    """Posting lists read from the shard, kept across queries within a byte budget."""

    def __init__(self, reader: ShardReader, table: str, keyed_by_field: bool):
        self.reader, self.table, self.by_field = reader, table, keyed_by_field
        self._cache: OrderedDict[tuple[int, str], terms.Posting] = OrderedDict()
        self._bytes = 0
        self._generation = reader.generation

    def get(self, fields: Iterable[int], words: Iterable[str]) -> dict[tuple[int, str], Any]:
        if self._generation != self.reader.generation:
            self._cache.clear()
            self._bytes, self._generation = 0, self.reader.generation
        fields, words = list(fields), list(dict.fromkeys(words))
        want = [(f, w) for w in words for f in fields]
        missing = {w for f, w in want if (f, w) not in self._cache}
        if missing:
            self._read(missing, fields)
        return {key: self._cache[key] for key in want if key in self._cache}

    def _read(self, words: set[str], fields: list[int]) -> None:
        if self.by_field:
            rows = self.reader.q(
                f"SELECT field, term, array_send(ids), array_send(tfs) FROM {{s}}.{self.table} "
                "WHERE term = ANY(%s)",
                (sorted(words),),
            )
        else:
            rows = [
                (0, *r) for r in self.reader.q(
                    "SELECT term, array_send(ids), array_send(tfs) "
                    f"FROM {{s}}.{self.table} WHERE term = ANY(%s)",
                    (sorted(words),),
                )
            ]  # fmt: skip
        empty = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))
        found = {(int(f), t): (_unpack(i, "int32"), _unpack(c, "int32")) for f, t, i, c in rows}
        for word in words:  # a term the shard lacks is remembered as empty
            for field in fields if self.by_field else [0]:
                posting = found.get((field, word), empty)
                self._cache[(field, word)] = posting
                self._bytes += posting[0].nbytes + posting[1].nbytes + 64
        while self._bytes > POSTINGS_CACHE_BYTES and len(self._cache) > 1:
            _, (ids, tfs) = self._cache.popitem(last=False)
            self._bytes -= ids.nbytes + tfs.nbytes + 64


class ShardLexical:
    """``LexicalIndex``'s reading methods over the shard: BM25 as the local index scores it."""

    def __init__(self, reader: ShardReader):
        self.reader = reader
        self._postings = _Postings(reader, "postings", keyed_by_field=True)
        self._stats: tuple[int, terms.DocStats] | None = None
        # the last few queries' scores over every document: a query searches each category
        # (and both routes) with the same terms, and only the mask differs
        self._scored: OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    @property
    def generation(self) -> int:
        return self.reader.generation

    def reload(self) -> None:
        """Nothing to reload: a reader reads the version it follows."""

    def stats(self) -> terms.DocStats:
        generation = self.reader.generation
        if self._stats is None or self._stats[0] != generation:
            rows = self.reader.q(
                "SELECT array_send(ids), cats, array_send(lens) FROM {s}.span_stats"
            )
            ids, cats, lens = rows[0] if rows and rows[0][0] is not None else (None, [], None)
            ids_arr = _unpack(ids, "int64")
            self._stats = (
                generation,
                terms.DocStats.of(ids_arr, _unpack(lens, "int32").reshape(len(ids_arr), -1), cats),
            )
        return self._stats[1]

    def query_terms(self, query: str) -> list[str]:
        return terms.query_terms(query)

    def search(
        self,
        query: str,
        limit: int,
        category: str | None = None,
        field_boosts: dict[str, float] | None = None,
        extra_terms: dict[str, float] | None = None,
    ) -> list[LexicalHit]:
        """BM25 over symbol, path, header and text (``LexicalIndex.search``)."""
        weights = term_weights(terms.query_terms(query), extra_terms, terms.analyze)
        if not weights or limit <= 0:
            return []
        boosts = {terms.FIELDS.index(f): b for f, b in (field_boosts or FIELD_BOOSTS).items()}
        stats = self.stats()
        positions, scores = self._scores(stats, weights, boosts)
        if category is not None:  # tantivy adds the category clause's own score: its idf
            mask = stats.mask(category)
            kept = mask[positions]
            constant = float(terms.idf(int(mask.sum()), len(stats)))
            positions, scores = positions[kept], scores[kept] + constant
        return [LexicalHit(int(stats.ids[p]), s) for p, s in terms.top(positions, scores, limit)]

    def _scores(
        self, stats: terms.DocStats, weights: dict[str, float], boosts: dict[int, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        key = (self.reader.generation, tuple(weights.items()), tuple(sorted(boosts.items())))
        found = self._scored.get(key)
        if found is None:
            postings = self._postings.get(boosts, weights)
            found = self._scored[key] = terms.bm25(stats, postings, weights, boosts)
            while len(self._scored) > 8:
                self._scored.popitem(last=False)
        return found

    def containing_all(self, text: str, limit: int) -> list[LexicalHit]:
        """Spans whose text holds every term of ``text``, BM25 order."""
        words = terms.query_terms(text)
        if not words or limit <= 0:
            return []
        field = terms.TEXT_FIELD
        postings = self._postings.get([field], words)
        common: np.ndarray | None = None
        for word in words:
            held = postings.get((field, word), (np.zeros(0, dtype=np.int32),))[0]
            common = held if common is None else np.intersect1d(common, held, assume_unique=True)
        if common is None or not len(common):
            return []
        stats = self.stats()
        mask = np.zeros(len(stats), dtype=bool)
        mask[common] = True
        weights = dict.fromkeys(words, 1.0)
        positions, scores = terms.bm25(stats, postings, weights, {field: 1.0}, mask)
        return [LexicalHit(int(stats.ids[p]), s) for p, s in terms.top(positions, scores, limit)]

    def num_docs(self) -> int:
        return len(self.stats())

    def document_frequencies(self, words: Iterable[str]) -> dict[str, int]:
        """How many spans contain each analysed term (text or header, the larger)."""
        words = list(words)
        fields = (terms.TEXT_FIELD, terms.HEADER_FIELD)
        postings = self._postings.get(fields, words)
        return {w: max(len(postings.get((f, w), ((),))[0]) for f in fields) for w in words}


class ShardFiles:
    """The whole-file index's ``search`` over the shard's file posting lists."""

    def __init__(self, reader: ShardReader):
        self.reader = reader
        self._postings = _Postings(reader, "file_postings", keyed_by_field=False)
        self._stats: tuple[int, list[str], terms.DocStats] | None = None

    def _files(self) -> tuple[list[str], terms.DocStats]:
        generation = self.reader.generation
        if self._stats is None or self._stats[0] != generation:
            rows = self.reader.q("SELECT paths, array_send(lens) FROM {s}.file_stats")
            paths = list(rows[0][0] or []) if rows else []
            lens = _unpack(rows[0][1], "int32") if rows else np.zeros(0, dtype=np.int32)
            positions = np.arange(len(paths))  # file_postings number files by path
            stats = terms.DocStats.of(positions, lens.reshape(len(paths), 1), [""] * len(paths))
            self._stats = (generation, paths, stats)
        return self._stats[1], self._stats[2]

    def search(self, query: str, limit: int) -> list[FileMatch]:
        words = terms.file_query_terms(query)
        if not words or limit <= 0:
            return []
        paths, stats = self._files()
        postings = self._postings.get([0], words)
        weights = dict.fromkeys(words, 1.0)
        positions, scores = terms.bm25(stats, postings, weights, {0: 1.0})
        return [FileMatch(paths[p], s) for p, s in terms.top(positions, scores, limit)]


def _first(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


__all__ = [
    "ShardFiles",
    "ShardGone",
    "ShardLexical",
    "ShardReader",
    "Version",
    "current_version",
]
