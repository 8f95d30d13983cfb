"""The vector side of the store: vector spaces, the sqlite-vec tables and the embedding cache.

``emb_code`` and ``emb_docs`` (``VEC_TABLES``) are sqlite-vec ``vec0`` tables keyed by span
id, created once the embedding dimension is known (``ensure_vector_space``) and dropped
when the model changes; ``embedding_cache`` keeps (model id, text hash) → vector so an
unchanged text is never embedded twice. ``VectorTables`` is the part of ``Store`` that
reads and writes them, on the store's connection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmc.types import CODE

VEC_TABLES = {CODE: "emb_code", "doc": "emb_docs"}


@dataclass(frozen=True)
class VectorSpace:
    """One embedding space: which model fills a vec table, and its dimension."""

    model_id: str
    dim: int


def blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


class VectorTables:
    """Vector spaces, vectors (KNN, counts, backfill writes) and the embedding cache, on
    ``Store``'s connection (``conn``, ``get_meta``, ``_put_meta``)."""

    conn: Any

    def get_meta(self, key: str, default: str | None = None) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def _put_meta(self, key: str, value: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def _table_exists(self, name: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'", (name,)
            ).fetchone()
            is not None
        )

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
                [(i, blob(v)) for i, v in items],
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
        rows = [(i, blob(v)) for i, v in items if i in live]
        self.conn.execute("PRAGMA synchronous=FULL")
        try:
            with self.conn:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO embedding_cache(model, text_hash, vector) "
                    "VALUES (?, ?, ?)",
                    [(model_id, h, blob(v)) for h, v in cache],
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

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest spans by cosine distance: [(span id, similarity)]."""
        table = VEC_TABLES[category]
        if k <= 0 or not self._table_exists(table):
            return []
        rows = self.conn.execute(
            f"SELECT span_id, distance FROM {table} WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (blob(vector), k),
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
                [(model_id, h, blob(v)) for h, v in items],
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


__all__ = ["VEC_TABLES", "VectorSpace", "VectorTables", "blob"]
