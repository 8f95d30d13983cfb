"""Retrievers: each turns the query into one ranked list of span ids for one category.

- ``bm25``: tantivy BM25 over code-aware tokens (``LexicalIndex.search``).
- ``dense``: exact cosine KNN of the query embedding over the category's vectors, kept
  warm in memory (``Sources.knn`` over ``llmc.store.vectors.VectorMatrix``).
- ``definitions`` / ``file_spans``: the exact-symbol and exact-path fast paths, plain
  indexed SQLite lookups of the names and paths the query mentions.

Errors of the stores are wrapped into StoreError where they enter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from llmc.errors import StoreError
from llmc.search.query import Identifier, symbol_lookups
from llmc.search.types import BM25, DENSE, EXACT, Hit, RankedList
from llmc.types import CODE, StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.models.embedder import Embedder
    from llmc.store.db import Store
    from llmc.store.lexical import LexicalIndex

# (category, query vector, k) → [(span id, cosine similarity)], best first
Knn = Callable[[str, "np.ndarray", int], list[tuple[int, float]]]

# Definitions first, code before docs: the order of an exact-symbol answer.
_KIND_ORDER = {"class": 0, "function": 0, "method": 0, "module": 1, "section": 2}
_STUB_SUFFIXES = (".pyi", ".d.ts", ".d.mts", ".d.cts")


def bm25(
    lexical: LexicalIndex,
    query: str,
    category: str,
    depth: int,
    extra_terms: dict[str, float] | None = None,
) -> RankedList:
    """The ``depth`` best BM25 hits among spans of ``category``; ``extra_terms`` are
    weighted query terms added to (or weighing up) the query's own (HyDE's Rocchio)."""
    started = time.perf_counter()
    try:
        if extra_terms:
            hits = lexical.search(query, depth, category=category, extra_terms=extra_terms)
        else:
            hits = lexical.search(query, depth, category=category)
    except (ValueError, OSError, RuntimeError) as e:
        raise StoreError(f"lexical search failed: {e}") from e
    return RankedList(
        retriever=BM25,
        category=category,
        hits=tuple(Hit(h.span_id, h.score) for h in hits),
        ms=(time.perf_counter() - started) * 1000,
    )


def dense(knn: Knn, vector: np.ndarray, category: str, depth: int) -> RankedList:
    """The ``depth`` nearest spans of ``category`` by cosine similarity; ``knn`` answers
    (``Sources.knn``: the warm matrix; ``Store.knn``: sqlite-vec)."""
    started = time.perf_counter()
    try:
        hits = knn(category, vector, depth)
    except Exception as e:  # sqlite3 / sqlite-vec errors have no common base
        raise StoreError(f"vector search failed: {e}") from e
    return RankedList(
        retriever=DENSE,
        category=category,
        hits=tuple(Hit(i, s) for i, s in hits),
        ms=(time.perf_counter() - started) * 1000,
    )


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """One normalised float32 query vector."""
    import numpy as np

    return np.asarray(embedder.embed_queries([text])[0], dtype=np.float32)


def _definition_order(stored: StoredSpan) -> tuple:
    """Code before docs, real definitions before tests and type stubs, then by kind."""
    from llmc.search.router import is_test_path

    s = stored.span
    stub = s.path.endswith(_STUB_SUFFIXES)
    return (
        s.category != CODE, is_test_path(s.path), stub, _KIND_ORDER.get(s.kind, 3), s.part,
        s.path, s.start_line,
    )  # fmt: skip


def definitions(
    store: Store, idents: Sequence[Identifier], limit: int = 20
) -> list[tuple[Identifier, tuple[StoredSpan, ...]]]:
    """For each identifier, the spans that define it (symbol or qualified name equal),
    best first; ``a.b.C`` falls back to ``b.C``, then ``C``. Identifiers that define
    nothing are left out."""
    out = []
    for ident in idents:
        for name in symbol_lookups(ident):
            try:
                found = store.spans_by_symbol(name, limit=limit)
            except Exception as e:  # sqlite3 errors
                raise StoreError(f"symbol lookup failed: {e}") from e
            if found:
                out.append((ident, tuple(sorted(found, key=_definition_order))))
                break
    return out


def file_spans(store: Store, paths: Sequence[str], per_file: int = 3) -> list[StoredSpan]:
    """The first spans (file order) of each indexed file named in the query."""
    out: list[StoredSpan] = []
    for path in paths:
        try:
            spans = store.spans_for_path(path.removeprefix("./"))
        except Exception as e:  # sqlite3 errors
            raise StoreError(f"path lookup failed: {e}") from e
        out.extend(spans[:per_file])
    return out


def span_paths(store: Store, ids: Sequence[int]) -> dict[int, str]:
    """Span id → file path, without reading span texts (for path-based weights)."""
    try:
        return store.paths_by_ids(ids)
    except Exception as e:  # sqlite3 errors
        raise StoreError(f"path lookup failed: {e}") from e


def exact_list(spans: Sequence[StoredSpan]) -> RankedList:
    """The ``exact`` ranked list: spans in the given order, each scored 1."""
    seen = dict.fromkeys(s.id for s in spans)
    return RankedList(retriever=EXACT, category=None, hits=tuple(Hit(i, 1.0) for i in seen))


__all__ = [
    "Knn",
    "bm25",
    "definitions",
    "dense",
    "embed_query",
    "exact_list",
    "file_spans",
    "span_paths",
]
