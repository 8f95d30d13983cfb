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
from llmc.store.vector_tables import VEC_TABLES, VectorSpace, VectorTables, blob
from llmc.types import Span, StoredSpan

log = logging.getLogger(__name__)

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


def _create_private(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it (SQLite gives its WAL and
    shared-memory files the database file's mode), so the index is not world-readable."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return  # SQLite will say what is wrong, in its own words
    os.close(fd)


class Store(VectorTables):
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
                        (span_id, blob(vector)),
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

    def has_file(self, path: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM files WHERE path = ? LIMIT 1", (path,)).fetchone()
        return row is not None

    def paths_ending(self, tail: str, limit: int = 2) -> list[str]:
        """Indexed paths ending in ``/`` + ``tail``, at most ``limit``."""
        rows = self.conn.execute(
            "SELECT path FROM files WHERE substr(path, -?) = ? LIMIT ?",
            (len(tail) + 1, "/" + tail, limit),
        )
        return [r[0] for r in rows]

    def span_rows(self, ids: Sequence[int]) -> list[tuple]:
        """``(id, path, category, kind, symbol, qualname, start_line, end_line, part)`` of
        span ids, without their texts (what the rankers' features read)."""
        out: list[tuple] = []
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            out += self.conn.execute(
                "SELECT id, path, category, kind, symbol, qualname, start_line, end_line, part "
                f"FROM spans WHERE id IN ({marks})",
                chunk,
            ).fetchall()
        return out

    def code_languages(self) -> list[tuple[str, int]]:
        """``(lang, spans)`` of the code spans, most spans first."""
        return self.conn.execute(
            "SELECT lang, count(*) FROM spans WHERE category = 'code' AND lang IS NOT NULL "
            "GROUP BY lang ORDER BY 2 DESC"
        ).fetchall()

    def text_lengths(self, category: str) -> list[int]:
        """The length of every span text of ``category``."""
        rows = self.conn.execute("SELECT length(text) FROM spans WHERE category = ?", (category,))
        return [r[0] for r in rows]

    def iter_spans(self, batch: int = 1000) -> Iterator[StoredSpan]:
        cursor = self.conn.execute(f"SELECT {SPAN_COLUMNS} FROM spans ORDER BY id")
        while rows := cursor.fetchmany(batch):
            yield from (_row_to_span(r) for r in rows)

    def data_version(self) -> int:
        """Changes whenever another connection committed (SQLite's ``data_version``)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

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
