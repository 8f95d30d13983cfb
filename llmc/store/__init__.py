"""Storage: SQLite + sqlite-vec (source of truth) and the tantivy lexical index (derived)."""

from llmc.store.db import Store, VectorSpace

__all__ = ["Store", "VectorSpace"]
