"""The SQLite store: the source of truth for files, spans and vectors.

Layout of ``.llmc/index.db``: ``meta`` (schema version, models, generation), ``files``,
``spans``, ``embedding_cache`` (model id, text hash) → vector, and two sqlite-vec ``vec0``
tables, ``emb_code`` and ``emb_docs``, keyed by span id. The vec tables are created once the
embedding dimension is known and dropped when the model changes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmc.errors import IndexMissingError, StoreError
from llmc.paths import STATE_DIR, gate_state
from llmc.store.migrations import SCHEMA_VERSION, migrate
from llmc.store.sqlite import connect
from llmc.types import CODE, Span, StoredSpan

log = logging.getLogger(__name__)

VEC_TABLES = {CODE: "emb_code", "doc": "emb_docs"}
SPAN_COLUMNS = (
    "id, path, lang, category, kind, symbol, qualname, start_line, end_line, text, header, "
    "part, signature, docstring"
)


@dataclass(frozen=True)
class FileRecord:
    id: int
    path: str
    lang: str | None
    category: str | None
    size: int
    mtime_ns: int
    content_hash: str


@dataclass(frozen=True)
class VectorSpace:
    """One embedding space: which model fills a vec table, and its dimension."""

    model_id: str
    dim: int


def _row_to_span(row) -> StoredSpan:
    return StoredSpan(
        id=row[0],
        span=Span(
            path=row[1],
            lang=row[2],
            category=row[3],
            kind=row[4],
            symbol=row[5],
            qualname=row[6],
            start_line=row[7],
            end_line=row[8],
            text=row[9],
            header=row[10],
            part=row[11],
            signature=row[12],
            docstring=row[13],
        ),
    )


def _blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def _create_private(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives its WAL and
    shared-memory files the database file's mode), so the index is not world-readable."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return  # SQLite will say what is wrong, in its own words
    os.close(fd)


class Store:
    """A handle on ``.llmc/index.db``. Writers must hold the index lock (see ``lock``)."""

    def __init__(self, db_path: Path, readonly: bool = False):
        self.path = Path(db_path)
        self.readonly = readonly
        if self.path.parent.name == STATE_DIR:  # first: a committed index.db is removed here
            gate_state(self.path.parent.parent)  # never a committed link, file or index
        if readonly and not self.path.exists():
            raise IndexMissingError(
                f"no index at {self.path.parent.parent} (run `llmc index` there first)"
            )
        if self.path.is_symlink():
            raise StoreError(f"{self.path} is a symbolic link; llmc does not follow it")
        if not readonly:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            _create_private(self.path)
        self.conn = connect(self.path, readonly=readonly)  # refuses views and triggers
        self._batched = False  # inside batch(): replace_file leaves the commit to it
        if not readonly:
            applied = migrate(self.conn)
            if applied:
                log.debug("applied migrations: %s", ", ".join(applied))
                self.set_meta("schema_version", str(SCHEMA_VERSION))
        elif self.get_meta("schema_version") is None:
            raise IndexMissingError(
                f"the index at {self.path} is empty or unfinished (run `llmc index`)"
            )

    # -- meta ---------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except Exception as e:  # table missing in a half-created database
            if "no such table" in str(e):
                return default
            raise
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self._put_meta(key, value)

    def _put_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    @property
    def generation(self) -> int:
        return int(self.get_meta("generation", "0") or 0)

    def bump_generation(self, past: int = 0) -> int:
        """Advance the index generation (beyond ``past`` too); derived indexes record it."""
        with self.conn:
            gen = max(self.generation, past) + 1
            self._put_meta("generation", str(gen))
        return gen

    def make_durable(self) -> None:
        """Commit once with ``synchronous=FULL``: every commit so far survives a power loss.

        In WAL mode with ``synchronous=NORMAL`` (see ``llmc.store.sqlite``) a commit is safe
        from a process crash at once but reaches the disk only at the next checkpoint, so
        a power loss can drop the last commits. Only a tail: the WAL is replayed in order up
        to the first frame that did not reach the disk. FULL fsyncs the WAL at this commit,
        which makes every earlier frame durable too. Call it before a derived index records
        the generation, so that none ever reflects commits SQLite could still lose.
        """
        self.conn.execute("PRAGMA synchronous=FULL")
        try:
            with self.conn:  # a changed value, so the commit writes (and syncs) a WAL frame
                self._put_meta("durable_generation", str(self.generation))
                self._put_meta("durable_at_ns", str(time.time_ns()))
        finally:
            self.conn.execute("PRAGMA synchronous=NORMAL")

    @property
    def durable_generation(self) -> int:
        return int(self.get_meta("durable_generation", "0") or 0)

    # -- vector spaces ------------------------------------------------------------------
    def vector_space(self, category: str) -> VectorSpace | None:
        model = self.get_meta(f"model.{category}")
        dim = self.get_meta(f"dim.{category}")
        return VectorSpace(model, int(dim)) if model and dim else None

    def ensure_vector_space(self, category: str, space: VectorSpace) -> bool:
        """Create the vec table for ``category``; True when an old model's vectors were dropped."""
        table = VEC_TABLES[category]
        current = self.vector_space(category)
        exists = self._table_exists(table)
        if current == space and exists:
            return False
        with self.conn:
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")
            self.conn.execute(
                f"CREATE VIRTUAL TABLE {table} USING vec0("
                f"span_id INTEGER PRIMARY KEY, embedding float[{space.dim}] distance_metric=cosine)"
            )
            self._put_meta(f"model.{category}", space.model_id)
            self._put_meta(f"dim.{category}", str(space.dim))
        return current is not None and current != space

    def _table_exists(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'", (name,)
            ).fetchone()
            is not None
        )

    # -- files --------------------------------------------------------------------------
    def files(self) -> dict[str, FileRecord]:
        rows = self.conn.execute(
            "SELECT id, path, lang, category, size, mtime_ns, content_hash FROM files"
        )
        return {r[1]: FileRecord(*r) for r in rows}

    def skipped_files(self) -> dict[str, tuple[int, int, str, str]]:
        """path → (size, mtime_ns, reason, detail) of files skipped after being read."""
        if not self._table_exists("skipped_files"):
            return {}
        rows = self.conn.execute("SELECT path, size, mtime_ns, reason, detail FROM skipped_files")
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}

    def set_skipped(
        self, skipped: Iterable[tuple[str, int, int, str, str]], forget: Iterable[str]
    ) -> None:
        """Record (path, size, mtime_ns, reason, detail) skips; drop the ``forget`` paths."""
        with self.conn:
            self.conn.executemany(
                "DELETE FROM skipped_files WHERE path = ?", [(p,) for p in forget]
            )
            self.conn.executemany(
                "INSERT OR REPLACE INTO skipped_files VALUES (?, ?, ?, ?, ?)", list(skipped)
            )

    def touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        """Record a new stat for a file whose content did not change."""
        with self.conn:
            self.conn.execute(
                "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path)
            )

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction for several ``replace_file`` calls: their files' swaps commit
        together or not at all (a crash leaves every file of the batch as it was, for the
        next run to redo), one commit instead of one per file."""
        if self._batched:
            yield
            return
        with self.conn:
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    def replace_file(
        self,
        path: str,
        lang: str | None,
        category: str | None,
        size: int,
        mtime_ns: int,
        content_hash: str,
        spans: Sequence[Span],
        vectors: Sequence[np.ndarray | None],
        generation: int,
    ) -> list[int]:
        """Atomically swap a file's spans and vectors for new ones; return the new span ids.
        Inside ``batch()`` the swap commits with the batch's other files."""
        ids: list[int] = []
        with contextlib.nullcontext() if self._batched else self.conn:
            old = self.conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if old:
                self._delete_file_spans(old[0])
                self.conn.execute(
                    "UPDATE files SET lang=?, category=?, size=?, mtime_ns=?, content_hash=?, "
                    "generation=? WHERE id=?",
                    (lang, category, size, mtime_ns, content_hash, generation, old[0]),
                )
                file_id = old[0]
            else:
                file_id = self.conn.execute(
                    "INSERT INTO files(path, lang, category, size, mtime_ns, content_hash, "
                    "generation) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (path, lang, category, size, mtime_ns, content_hash, generation),
                ).lastrowid
            for span, vector in zip(spans, vectors, strict=True):
                span_id = self.conn.execute(
                    "INSERT INTO spans(file_id, path, lang, category, kind, symbol, qualname, "
                    "start_line, end_line, part, text, header, signature, docstring, embed_hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        file_id,
                        span.path,
                        span.lang,
                        span.category,
                        span.kind,
                        span.symbol,
                        span.qualname,
                        span.start_line,
                        span.end_line,
                        span.part,
                        span.text,
                        span.header,
                        span.signature,
                        span.docstring,
                        embed_hash(span),
                    ),
                ).lastrowid
                ids.append(span_id)
                if vector is not None:
                    self.conn.execute(
                        f"INSERT INTO {VEC_TABLES[span.category]}(span_id, embedding) VALUES (?, ?)",
                        (span_id, _blob(vector)),
                    )
        return ids

    def _delete_file_spans(self, file_id: int) -> None:
        for category, table in VEC_TABLES.items():
            if self._table_exists(table):
                self.conn.execute(
                    f"DELETE FROM {table} WHERE span_id IN "
                    "(SELECT id FROM spans WHERE file_id = ? AND category = ?)",
                    (file_id, category),
                )
        self.conn.execute("DELETE FROM spans WHERE file_id = ?", (file_id,))

    def remove_files(self, paths: Iterable[str]) -> int:
        removed = 0
        with self.conn:
            for path in paths:
                row = self.conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
                if row:
                    self._delete_file_spans(row[0])
                    self.conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
                    removed += 1
        return removed

    # -- spans --------------------------------------------------------------------------
    def spans_by_ids(self, ids: Sequence[int]) -> dict[int, StoredSpan]:
        out: dict[int, StoredSpan] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT {SPAN_COLUMNS} FROM spans WHERE id IN ({marks})", chunk
            ):
                out[row[0]] = _row_to_span(row)
        return out

    def paths_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        """Span id → file path, without reading span texts."""
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT id, path FROM spans WHERE id IN ({marks})", chunk)
            out.update((int(i), p) for i, p in rows)
        return out

    def spans_for_path(self, path: str) -> list[StoredSpan]:
        rows = self.conn.execute(
            f"SELECT {SPAN_COLUMNS} FROM spans WHERE path = ? ORDER BY start_line, part", (path,)
        )
        return [_row_to_span(r) for r in rows]

    def spans_by_symbol(self, name: str, limit: int = 20) -> list[StoredSpan]:
        """Definitions whose symbol or qualified name equals ``name`` (case-sensitive first)."""
        rows = self.conn.execute(
            f"SELECT {SPAN_COLUMNS} FROM spans WHERE (symbol = ? OR qualname = ?) "
            "AND kind NOT IN ('block', 'window', 'paragraph') ORDER BY part LIMIT ?",
            (name, name, limit),
        ).fetchall()
        return [_row_to_span(r) for r in rows]

    def iter_spans(self, batch: int = 1000) -> Iterator[StoredSpan]:
        cursor = self.conn.execute(f"SELECT {SPAN_COLUMNS} FROM spans ORDER BY id")
        while rows := cursor.fetchmany(batch):
            yield from (_row_to_span(r) for r in rows)

    def span_ids_missing_vectors(self) -> list[tuple[int, str]]:
        """(span id, category) of spans with no vector (e.g. after a model change)."""
        out = []
        for category, table in VEC_TABLES.items():
            if not self._table_exists(table):
                continue
            out += [
                (r[0], category)
                for r in self.conn.execute(
                    f"SELECT id FROM spans WHERE category = ? AND id NOT IN "
                    f"(SELECT span_id FROM {table})",
                    (category,),
                )
            ]
        return out

    def set_vectors(self, category: str, items: Sequence[tuple[int, np.ndarray]]) -> None:
        table = VEC_TABLES[category]
        with self.conn:
            self.conn.executemany(
                f"INSERT OR REPLACE INTO {table}(span_id, embedding) VALUES (?, ?)",
                [(i, _blob(v)) for i, v in items],
            )

    def missing_vectors(self, category: str) -> list[int]:
        """Ids of ``category``'s spans without a vector: what a backfill embeds."""
        table = VEC_TABLES[category]
        # By length: each chunk then holds texts of like length, which batch with little
        # padding (the embedder sorts within what it is given).
        order = "ORDER BY length(text) + length(header), id"
        if not self._table_exists(table):
            sql = f"SELECT id FROM spans WHERE category = ? {order}"
        else:
            sql = (
                f"SELECT id FROM spans WHERE category = ? AND id NOT IN "
                f"(SELECT span_id FROM {table}) {order}"
            )
        return [int(r[0]) for r in self.conn.execute(sql, (category,))]

    def add_vectors(
        self,
        category: str,
        model_id: str,
        items: Sequence[tuple[int, np.ndarray]],
        cache: Iterable[tuple[str, np.ndarray]] = (),
    ) -> int:
        """One backfill chunk in one durable transaction: the vectors of spans that still
        exist and still lack one, plus the new (model, text hash) cache entries.

        Nothing is written when ``category``'s vector space no longer holds ``model_id``
        (another writer changed the model meanwhile). A span deleted since the chunk was
        read is skipped (its id is never reused, so a vector for it would only be an orphan).
        Returns the number of vectors written. ``synchronous=FULL`` makes the commit survive
        a power loss too, not only a kill: a chunk costs seconds of embedding, an fsync
        nothing next to it.
        """
        space = self.vector_space(category)
        table = VEC_TABLES[category]
        if space is None or space.model_id != model_id or not self._table_exists(table):
            return 0
        ids = [i for i, _ in items]
        live: set[int] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            live.update(
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM spans WHERE id IN ({marks}) AND id NOT IN "
                    f"(SELECT span_id FROM {table} WHERE span_id IN ({marks}))",
                    [*chunk, *chunk],
                )
            )
        rows = [(i, _blob(v)) for i, v in items if i in live]
        self.conn.execute("PRAGMA synchronous=FULL")
        try:
            with self.conn:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache(model, text_hash, vector) "
                    "VALUES (?, ?, ?)",
                    [(model_id, h, _blob(v)) for h, v in cache],
                )
                self.conn.executemany(
                    f"INSERT INTO {table}(span_id, embedding) VALUES (?, ?)", rows
                )
        finally:
            self.conn.execute("PRAGMA synchronous=NORMAL")
        return len(rows)

    def vector_counts(self) -> dict[str, tuple[int, int]]:
        """category → (spans with a vector, spans), for each category that has spans.

        Cheap enough per query: spans are counted from the ``spans_category`` index and
        vectors from sqlite-vec's rowid table (the vec table itself when that is absent).
        """
        totals = {
            str(r[0]): int(r[1])
            for r in self.conn.execute("SELECT category, count(*) FROM spans GROUP BY category")
        }
        out: dict[str, tuple[int, int]] = {}
        for category, total in totals.items():
            table = VEC_TABLES.get(category)
            embedded = 0
            if table and self._table_exists(table):
                counter = f"{table}_rowids" if self._table_exists(f"{table}_rowids") else table
                embedded = int(self.conn.execute(f"SELECT count(*) FROM {counter}").fetchone()[0])
            out[category] = (min(embedded, total), total)
        return out

    def data_version(self) -> int:
        """Changes whenever another connection committed (SQLite's ``data_version``)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest spans by cosine distance: [(span id, similarity)]."""
        table = VEC_TABLES[category]
        if k <= 0 or not self._table_exists(table):
            return []
        rows = self.conn.execute(
            f"SELECT span_id, distance FROM {table} WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (_blob(vector), k),
        ).fetchall()
        return [(r[0], 1.0 - float(r[1])) for r in rows]

    def vector_ids(self, category: str) -> np.ndarray:
        """The span ids of ``category`` that have a vector, ascending (int64); read from
        sqlite-vec's rowid table, without the vectors (the vec table when that is absent)."""
        table = VEC_TABLES[category]
        if not self._table_exists(table):
            return np.zeros(0, dtype=np.int64)
        source = f"{table}_rowids" if self._table_exists(f"{table}_rowids") else table
        column = "rowid" if source != table else "span_id"
        rows = self.conn.execute(f"SELECT {column} FROM {source} ORDER BY 1").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def vectors(self, category: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of span ids of ``category`` (ids without one are left out)."""
        table = VEC_TABLES[category]
        out: dict[int, np.ndarray] = {}
        if not ids or not self._table_exists(table):
            return out
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for span_id, blob in self.conn.execute(
                f"SELECT span_id, embedding FROM {table} WHERE span_id IN ({marks})", chunk
            ):
                out[int(span_id)] = np.frombuffer(blob, dtype=np.float32)
        return out

    # -- embedding cache ----------------------------------------------------------------
    def cached_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for h, blob in self.conn.execute(
                f"SELECT text_hash, vector FROM embedding_cache WHERE model = ? "
                f"AND text_hash IN ({marks})",
                [model_id, *chunk],
            ):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def cache_vectors(self, model_id: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache(model, text_hash, vector) VALUES (?, ?, ?)",
                [(model_id, h, _blob(v)) for h, v in items],
            )

    def prune_cache(self, models: Sequence[str] | None = None) -> int:
        """Drop cached vectors of models other than ``models`` (default: the index's)."""
        if models is None:
            models = [m for m in (self.get_meta("model.code"), self.get_meta("model.doc")) if m]
        models = list(dict.fromkeys(models))
        marks = ",".join("?" * len(models)) or "''"
        with self.conn:
            cur = self.conn.execute(
                f"DELETE FROM embedding_cache WHERE model NOT IN ({marks})", models
            )
        return cur.rowcount

    # -- stats --------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        def one(sql: str) -> int:
            return int(self.conn.execute(sql).fetchone()[0])

        return {
            "files": one("SELECT count(*) FROM files"),
            "spans": one("SELECT count(*) FROM spans"),
            "code_spans": one("SELECT count(*) FROM spans WHERE category = 'code'"),
            "doc_spans": one("SELECT count(*) FROM spans WHERE category = 'doc'"),
            "cached_vectors": one("SELECT count(*) FROM embedding_cache"),
        }

    def group_counts(self, table: str, column: str) -> dict[str, int]:
        if table not in ("files", "spans") or column not in ("lang", "kind", "category"):
            raise StoreError(f"cannot group {table} by {column}")
        rows = self.conn.execute(
            f"SELECT coalesce({column}, 'text'), count(*) FROM {table} GROUP BY 1 ORDER BY 2 DESC"
        )
        return {r[0]: r[1] for r in rows}

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing twice or after a failure is harmless
            pass


def embed_hash(span: Span) -> str:
    from llmc.types import text_hash

    return text_hash(span.embed_text)


__all__ = ["FileRecord", "Store", "VEC_TABLES", "VectorSpace", "embed_hash"]
