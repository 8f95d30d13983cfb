"""Warm vectors: one vec table kept in memory, for exact KNN with one matrix product.

sqlite-vec's ``vec0`` KNN (``Store.knn``) is exact brute force that reads every vector out
of SQLite pages on every query: tens of milliseconds per category on a large repository
(Django, ~40k code spans). ``VectorMatrix`` mirrors a table's ``(span id, vector)`` rows in
a float32 numpy matrix and answers the same question, the same way: every vector scored
by cosine similarity, the ``k`` best returned, nothing approximated. The scores agree with
sqlite-vec's to float32 rounding (its loop sums in another order than BLAS does).

It follows the table. On each query it asks SQLite's ``data_version`` whether another
connection committed (a backfill chunk, a reindex); only then does it read the table's
span ids again (from sqlite-vec's rowid table, no vectors) and load just the vectors of
spans that are new, dropping the rows of spans that left. A span id is never reused and
its vector never changes under one model, so a row once loaded stays right; a changed
vector space (another model or dimension) reloads everything.

Memory: 4 bytes per dimension per vector (384-d: ~1.5 KiB a span, ~60 MiB for 40k).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from llmc.store.db import VEC_TABLES

if TYPE_CHECKING:  # pragma: no cover
    from llmc.store.db import Store, VectorSpace

log = logging.getLogger(__name__)


class VectorMatrix:
    """The vectors of one category's vec table, in memory (see the module doc)."""

    def __init__(self, category: str):
        self.category = category
        self.table = VEC_TABLES[category]
        self.ids = np.zeros(0, dtype=np.int64)  # span id of each row, ascending
        self.matrix = np.zeros((0, 0), dtype=np.float32)  # one vector per row
        self.norms = np.zeros(0, dtype=np.float32)  # each row's L2 norm
        self.places: np.ndarray | None = None  # each row's (chunk id, offset) in the table
        self._version: int | None = None  # the store's data_version at the last sync
        self._space: VectorSpace | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def of(cls, category: str, ids: np.ndarray, rows: np.ndarray) -> VectorMatrix:
        """A matrix of vectors read elsewhere (the team store's), ids ascending."""
        matrix = cls(category)
        matrix._set(ids, rows)
        return matrix

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.ids.nbytes + self.norms.nbytes)

    def sync(self, store: Store) -> None:
        """Follow the store's vec table: cheap when nothing was committed since the last
        call; else read where each span's vector lies and load only the new ones."""
        version = store.data_version()
        if version == self._version:
            return
        with _snapshot(store):  # ids, slots and vectors from one state of the database
            self._follow(store)
        self._version = version

    def _follow(self, store: Store) -> None:
        space = store.vector_space(self.category)
        dim = space.dim if space is not None else 0
        if space != self._space:  # another model: nothing loaded so far is of use
            self._set(np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32))
            self.places = None
        self._space = space
        ids, places = (
            _locations(store, self.category) if space is not None else (self.ids[:0], None)
        )
        # A row stays when its span still has a vector in the same slot (a vector written
        # again, as after a dropped and refilled table, lands in another slot: read anew).
        _, mine, theirs = np.intersect1d(self.ids, ids, assume_unique=True, return_indices=True)
        if places is not None and self.places is not None:
            same = (self.places[mine] == places[theirs]).all(axis=1)
            mine, theirs = mine[same], theirs[same]
        keep = np.zeros(len(self), dtype=bool)
        keep[mine] = True
        new = np.ones(ids.shape[0], dtype=bool)
        new[theirs] = False
        if not keep.all() or new.any():
            new_ids, new_rows = _read(store, self.category, ids[new], places, new, dim)
            if keep.any():
                all_ids = np.concatenate([self.ids[keep], new_ids])
                rows = np.concatenate([self.matrix[keep], new_rows])
            else:  # the first load: no copy
                all_ids, rows = new_ids, new_rows
            if all_ids.size > 1 and not (np.diff(all_ids) > 0).all():
                order = np.argsort(all_ids, kind="stable")
                all_ids, rows = all_ids[order], rows[order]
            self._set(all_ids, rows)
            log.debug(
                "%s: %d vectors in memory (%d new, %d dropped)",
                self.table, len(self), new_ids.size, int((~keep).sum()),
            )  # fmt: skip
        self.places = None if places is None else places[np.searchsorted(ids, self.ids)]

    def _set(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.matrix = np.ascontiguousarray(rows, dtype=np.float32)
        self.norms = np.sqrt(np.einsum("ij,ij->i", self.matrix, self.matrix, dtype=np.float32))

    def knn(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest rows by cosine similarity, best first: [(span id, similarity)].

        Like sqlite-vec's cosine distance: ``1 - dot / (|a| |b|)`` in float32, similarity
        ``1 - distance``; a zero vector (no direction) is nobody's neighbour. Equal scores
        keep span id order."""
        n = len(self)
        if k <= 0 or n == 0:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.matrix.shape[1]:
            raise ValueError(
                f"query vector has {q.shape[0]} dimensions, {self.table} has {self.matrix.shape[1]}"
            )
        qnorm = np.sqrt(np.dot(q, q), dtype=np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.float32(1.0) - (self.matrix @ q) / (self.norms * qnorm)
        finite = np.isfinite(dist)
        if not finite.all():  # a zero vector: no direction, never a neighbour
            dist = np.where(finite, dist, np.float32(np.inf))
            n = min(n, int(finite.sum()))
            if n == 0:
                return []
        if k < n:
            top = np.argpartition(dist, k - 1)[:k]
            # Ties at the cut are broken by span id: take every row tied with the k-th.
            top = np.flatnonzero(dist <= dist[top].max())
        else:
            top = np.flatnonzero(np.isfinite(dist))
        order = top[np.lexsort((self.ids[top], dist[top]))][:k]
        sims = 1.0 - dist[order].astype(np.float64)
        return [(int(i), float(s)) for i, s in zip(self.ids[order], sims, strict=True)]


# -- reading a vec table's vectors -----------------------------------------------------------
# sqlite-vec's vec0 table returns one vector per row through its virtual table at ~30 us a
# row (Django's 40k code spans: over a second), so the first query of a process would pay
# more than a whole KNN scan. Its shadow tables hold the same vectors 1,024 to a blob:
# ``<table>_rowids`` (span id → chunk id, offset) and ``<table>_vector_chunks00`` (chunk id →
# ``size * dim`` float32s), the layout of sqlite-vec 0.1 (``<table>_info`` says which made the
# table). Those are read when the table says 0.1 and a spot check agrees with the virtual
# table; any other layout is read through the virtual table.
_KNOWN_LAYOUT = (0, 1)  # sqlite-vec major, minor whose shadow tables we read
_SPOT_CHECKS = 3


@contextlib.contextmanager
def _snapshot(store: Store) -> Iterator[None]:
    """One read transaction: every read inside sees the same commit (a backfill chunk
    committed halfway would otherwise pair new slots with old ids)."""
    conn = store.conn
    if conn.in_transaction:  # already in one (a writer's connection): read within it
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:  # a failed read may have ended it already
            conn.execute("COMMIT")


def _locations(store: Store, category: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The span ids with a vector, ascending, and each one's (chunk id, offset) when the
    table's layout is the known one (else None: read them through the virtual table)."""
    table = VEC_TABLES[category]
    if _layout(store, table) == _KNOWN_LAYOUT:
        rows = store.conn.execute(
            f"SELECT rowid, chunk_id, chunk_offset FROM {table}_rowids ORDER BY rowid"
        ).fetchall()
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1:])
    return store.vector_ids(category), None


def _layout(store: Store, table: str) -> tuple[int, int] | None:
    try:
        info = dict(
            store.conn.execute(
                f"SELECT key, value FROM {table}_info WHERE key IN "
                "('CREATE_VERSION_MAJOR', 'CREATE_VERSION_MINOR')"
            ).fetchall()
        )
        return int(info["CREATE_VERSION_MAJOR"]), int(info["CREATE_VERSION_MINOR"])
    except Exception:  # noqa: BLE001 - no info table, another layout: the public path
        return None


def _read(
    store: Store,
    category: str,
    ids: np.ndarray,
    places: np.ndarray | None,
    which: np.ndarray,
    dim: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of ``ids`` (``places[which]`` says where they lie) as (ids, rows)."""
    if ids.size == 0:
        return ids, np.zeros((0, dim), dtype=np.float32)
    if places is not None:
        rows = _read_chunks(store, VEC_TABLES[category], places[which], dim)
        if rows is not None and _agrees(store, category, ids, rows):
            return ids, rows
        log.debug("%s: shadow tables disagree; reading through the virtual table", category)
    found = _virtual_table_read(store, category, ids)
    got = np.array([i for i in ids.tolist() if i in found], dtype=np.int64)
    rows = np.stack([found[int(i)] for i in got]) if got.size else np.zeros((0, dim))
    return got, np.asarray(rows, dtype=np.float32).reshape(-1, dim)


def _virtual_table_read(store: Store, category: str, ids: np.ndarray) -> dict[int, np.ndarray]:
    """The vectors of ``ids`` through the virtual table: by id lists for a few (~0.2 ms a
    vector), by one scan of the table for many (~0.03 ms a row, however few are wanted)."""
    table = VEC_TABLES[category]
    total = int(store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    if ids.size * 6 < total:
        return store.vectors(category, ids.tolist())
    wanted = set(ids.tolist())
    return {
        int(i): np.frombuffer(blob, dtype=np.float32)
        for i, blob in store.conn.execute(f"SELECT span_id, embedding FROM {table}")
        if i in wanted
    }


def _read_chunks(store: Store, table: str, places: np.ndarray, dim: int) -> np.ndarray | None:
    """Rows at (chunk id, offset) ``places``, from the chunk blobs; None if one is missing
    or not ``dim`` float32s per slot."""
    out = np.empty((places.shape[0], dim), dtype=np.float32)
    order = np.lexsort((places[:, 1], places[:, 0]))  # by chunk, then offset
    by_chunk = places[order]
    chunks, starts = np.unique(by_chunk[:, 0], return_index=True)
    ends = np.append(starts[1:], by_chunk.shape[0])
    for first in range(0, chunks.size, 64):
        part = chunks[first : first + 64].tolist()
        marks = ",".join("?" * len(part))
        blobs = dict(
            store.conn.execute(
                f"SELECT rowid, vectors FROM {table}_vector_chunks00 WHERE rowid IN ({marks})",
                part,
            ).fetchall()
        )
        for j, chunk in enumerate(part, start=first):
            blob = blobs.get(chunk)
            if blob is None or len(blob) % (4 * dim):
                return None
            block = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
            offsets = by_chunk[starts[j] : ends[j], 1]
            if offsets[-1] >= block.shape[0]:
                return None
            out[order[starts[j] : ends[j]]] = block[offsets]
    return out


def _agrees(store: Store, category: str, ids: np.ndarray, rows: np.ndarray) -> bool:
    """A few rows read from the chunks equal what the virtual table returns for them
    (point lookups: an ``IN`` list would scan the whole vec table)."""
    table = VEC_TABLES[category]
    for p in np.unique(np.linspace(0, ids.size - 1, _SPOT_CHECKS).astype(np.int64)).tolist():
        row = store.conn.execute(
            f"SELECT embedding FROM {table} WHERE span_id = ?", (int(ids[p]),)
        ).fetchone()
        if row is None or not np.array_equal(np.frombuffer(row[0], dtype=np.float32), rows[p]):
            return False
    return True


__all__ = ["VectorMatrix"]
