"""What a query reads from: the store, the lexical index and the embedders, opened once.

``Sources`` opens everything lazily on the first query and keeps it for every later one
(batch mode, eval, the daemon). It also owns freshness: when an index run advanced the
store's generation, decisions taken at open (no lexical index yet, a changed embedding
model) are revisited, and the lexical reader is reloaded. Spans are hydrated through
``spans()``, which remembers what one query already read: each span is read from SQLite
at most once per query, whichever stages ask for it. Its models come from ``Models``
(loaded once per process); ``llmc tune`` passes memoising ones instead.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.config import Config, EmbeddingConfig, RerankConfig
from llmc.errors import IndexMissingError, LlmcError, ModelError, StoreError
from llmc.paths import db_path, lexical_path
from llmc.search import retrieve
from llmc.search.threads import ThreadLimiter
from llmc.search.trace import Trace
from llmc.search.types import ROUTE_CATEGORY
from llmc.types import StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.index.backfill import Coverage
    from llmc.models.embedder import Embedder
    from llmc.models.reranker import Reranker
    from llmc.store.db import Store
    from llmc.store.file_lexical import FileIndex
    from llmc.store.lexical import LexicalIndex
    from llmc.store.vectors import VectorMatrix

log = logging.getLogger(__name__)


class Models:
    """Where search gets its models: each configuration loaded once per process."""

    def embedder(self, cfg: EmbeddingConfig, category: str) -> Embedder:
        from llmc.models.embedder import embedder_from_config

        return embedder_from_config(cfg, category)

    def reranker(self, cfg: RerankConfig) -> Reranker:
        from llmc.models.reranker import reranker_from_config

        return reranker_from_config(cfg)


class Sources:
    """The open index of one repository and the models that read it (see the module doc)."""

    def __init__(
        self, root: Path, cfg: Config, threads: ThreadLimiter, models: Models | None = None
    ):
        self.root = root
        self.models = models or Models()
        self.cfg = cfg
        self.threads = threads
        self._store: Store | None = None
        self.lexical: LexicalIndex | None = None
        self.lexical_error: str | None = None
        self._lexical_generation: int | None = None
        self._checked_generation: int | None = None  # store generation of open's decisions
        self._span_count: tuple[int, int] | None = None  # (generation, spans)
        self.embedders: dict[str, Embedder] = {}
        self.dense_off: dict[str, str] = {}  # category → why dense search is off
        self.dense_empty: set[str] = set()  # categories with no vector yet (backfill)
        self._vectors: tuple[int, tuple, Coverage] | None = None  # data_version, spaces, cov
        self._matrices: dict[str, VectorMatrix] = {}  # category → its vectors, warm
        self._queries = 0  # queries begun: the first one leaves the vectors on disk
        self._path_cache: dict[int, str] = {}
        self._spans: dict[int, StoredSpan] = {}  # this query's hydrated spans
        self._files: FileIndex | None = None  # the whole-file index, opened when first asked

    @property
    def store(self) -> Store:
        if self._store is None:
            raise LlmcError("the index is not open")  # a bug: open() comes first
        return self._store

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> None:
        if self._store is not None:
            return
        from llmc.store.db import Store

        path = db_path(self.root)
        if not path.exists():
            raise IndexMissingError(f"no index in {self.root} (run `llmc index {self.root}` first)")
        self._store = Store(path, readonly=True)
        if self.cfg.search.bm25:
            self._open_lexical()
        if self.cfg.search.dense:
            self._check_vector_spaces()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self._store = None
        self.lexical = None
        self._files = None
        self._matrices = {}

    def begin_query(self, cfg: Config) -> None:
        """A new query (with the config it runs under): forget the last query's spans."""
        self.cfg = cfg
        self._spans = {}
        self._queries += 1

    def freshness(self, trace: Trace) -> None:
        """Revisit open's decisions after an index run; warn about stale or missing parts."""
        generation = self.store.generation
        spaces_moved = self._refresh_vectors()
        if generation != self._checked_generation or spaces_moved:
            self._recheck(generation)
        if self.lexical_error:
            trace.warn(self.lexical_error)
        elif self.lexical is not None:
            lex_gen = self.lexical.generation
            if lex_gen != self._lexical_generation:
                if self._lexical_generation is not None:
                    with contextlib.suppress(Exception):
                        self.lexical.reload()
                self._lexical_generation = lex_gen
            if lex_gen != generation:
                trace.warn(
                    f"the lexical index reflects generation {lex_gen} but the store is at "
                    f"{generation}: BM25 results may be stale (run `llmc index` to repair)"
                )
        for why in self.dense_off.values():
            trace.warn(why)
        if self.cfg.search.dense:
            self._say_coverage(trace)

    # -- vectors (backfilled after the index is searchable) -----------------------------
    def _refresh_vectors(self) -> bool:
        """Re-read the vector counts and spaces when another connection committed (a
        backfill chunk, an index run); True when a vector space changed model or came to
        exist, which open's dense decisions must see even without a new generation."""
        from llmc.index.backfill import Coverage
        from llmc.types import CODE, DOC

        version = self.store.data_version()
        if self._vectors is not None and self._vectors[0] == version:
            return False
        spaces = (self.store.vector_space(CODE), self.store.vector_space(DOC))
        moved = self._vectors is not None and self._vectors[1] != spaces
        self._vectors = (version, spaces, Coverage.of(self.store.vector_counts()))
        return moved

    def coverage(self) -> Coverage:
        """How many spans dense search can find: those with a vector from the configured
        model (a category whose dense search is off counts as none embedded)."""
        from llmc.index.backfill import Coverage

        if self._vectors is None:
            self._refresh_vectors()
        assert self._vectors is not None
        counts = self._vectors[2].by_category
        return Coverage.of(
            {c: ((0 if c in self.dense_off else e), t) for c, (e, t) in counts.items()}
        )

    def _say_coverage(self, trace: Trace) -> None:
        """A note for --explain always; a warning while dense search misses spans."""
        cov = self.coverage()
        self.dense_empty = {c for c, (e, t) in cov.by_category.items() if e == 0 and t > 0}
        trace.note("coverage", cov.line())
        if not cov.complete:
            trace.warn(
                f"{cov.line()}: dense search covers the embedded spans only, BM25 and exact "
                "symbols cover all (`llmc index` embeds the rest)"
            )

    def _recheck(self, generation: int) -> None:
        """An index run since the last query may have created the lexical index or changed
        a model: decisions taken at open are revisited once per new generation."""
        if self._checked_generation is not None:
            if self.cfg.search.bm25 and self.lexical_error:
                self.lexical_error = None
                self.lexical = None
                self._open_lexical()
            if self.cfg.search.dense:
                self.dense_off.clear()
                self._check_vector_spaces()
        self._checked_generation = generation

    def _open_lexical(self) -> None:
        from llmc.store.lexical import LexicalIndex

        lex = lexical_path(self.root)
        if not lex.is_dir():
            self.lexical_error = "no lexical index (run `llmc index`): BM25 search is off"
            return
        try:
            self.lexical = LexicalIndex(lex, readonly=True)
        except (LlmcError, ValueError, OSError, RuntimeError) as e:
            self.lexical_error = f"lexical index unreadable ({e}): BM25 search is off"

    def _check_vector_spaces(self) -> None:
        from llmc.models.embedder import resolved_model_id

        for category in ROUTE_CATEGORY.values():
            space = self.store.vector_space(category)
            if space is None:
                continue  # nothing of this category was embedded; KNN finds nothing
            try:
                wanted = resolved_model_id(self.cfg.embedding, category)
            except ModelError as e:
                self.dense_off[category] = f"{e}: dense search of {category} spans is off"
                continue
            if wanted != space.model_id:
                self.dense_off[category] = (
                    f"the index's {category} vectors come from {space.model_id} but the "
                    f"config names {wanted}: dense search of {category} spans is off "
                    "(run `llmc index` to re-embed)"
                )

    # -- models -------------------------------------------------------------------------
    def embedder(self, category: str) -> Embedder | None:
        """The embedder of ``category``'s spans, or None when dense search of it is off."""
        if category in self.dense_off:
            return None
        if category not in self.embedders:
            try:
                self.embedders[category] = self.models.embedder(self.cfg.embedding, category)
            except ModelError as e:
                self.dense_off[category] = f"{e}: dense search of {category} spans is off"
                return None
        return self.embedders[category]

    def query_vector(self, text: str, category: str, trace: Trace) -> np.ndarray | None:
        """The query's vector in ``category``'s embedding space, computed once per query;
        None when dense search of ``category`` is off or has no vector yet to search (then
        no model is loaded: BM25 and exact symbols answer alone)."""
        if category in self.dense_empty:
            return None
        if category not in self.embedders and category not in self.dense_off:
            with trace.stage("load"):  # the first query of a Searcher pays for the model
                self.embedder(category)
                self.threads.rescan()  # torch may have brought its own BLAS
        with trace.stage("embed"):
            embedder = self.embedder(category)
            if embedder is None:
                trace.warn(self.dense_off[category])
                return None
            if embedder.model_id not in trace.query_vectors:
                with self.threads.torch():
                    trace.query_vectors[embedder.model_id] = retrieve.embed_query(embedder, text)
        return trace.query_vectors[embedder.model_id]

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest spans of ``category``: [(span id, cosine similarity)], best
        first. Exact, over the category's vectors kept in memory (``vector_matrix``).

        Except in the first query of a Searcher that was not warmed (``Searcher.warm``
        loads the vectors): one sqlite-vec scan costs less than loading them all, and a
        one-shot `llmc search` asks no second question. The two agree to float32 rounding
        (sqlite-vec sums in another order), which can swap two spans whose similarities
        differ in the 7th digit, not more."""
        if category not in self._matrices and self._queries <= 1:
            return self.store.knn(category, vector, k)
        return self.vector_matrix(category).knn(vector, k)

    def vector_matrix(self, category: str) -> VectorMatrix:
        """``category``'s vectors in memory, brought up to date with the store."""
        from llmc.store.vectors import VectorMatrix

        matrix = self._matrices.get(category)
        if matrix is None:
            matrix = self._matrices[category] = VectorMatrix(category)
        matrix.sync(self.store)
        return matrix

    def warm_vectors(self, category: str) -> None:
        """Bring ``category``'s vectors into memory now (``Searcher.warm``)."""
        self.vector_matrix(category)

    @property
    def disk_root(self) -> Path | None:
        """Where the indexed files are on disk: a result whose file is gone from there is
        dropped (None: the index is the only copy, as in the team store)."""
        return self.root

    def whole_files(self, query: str, limit: int) -> list[str]:
        """Paths best first by whole-file BM25 (``llmc.store.file_lexical``); empty when the
        index has no whole-file index yet (built by the next ``llmc index``). Files deleted
        since the last index run are left out."""
        from llmc.paths import file_index_path
        from llmc.store.file_lexical import FileIndex

        try:
            if self._files is None:
                self._files = FileIndex(file_index_path(self.root), readonly=True)
            matches = self._files.search(query, limit)
        except StoreError as e:
            log.info("no whole-file list: %s", e)
            return []
        return [m.path for m in matches if (self.root / m.path).is_file()]

    def embed_passages(self, category: str, texts: Sequence[str]) -> np.ndarray | None:
        """Texts embedded as passages of ``category`` (HyDE's hypotheses), or None."""
        embedder = self.embedder(category) if self.cfg.search.dense else None
        if embedder is None:
            return None
        with self.threads.torch():
            return embedder.embed_passages(list(texts))

    # -- spans --------------------------------------------------------------------------
    def spans(self, ids: Sequence[int]) -> dict[int, StoredSpan]:
        """Span id → stored span, for the ids still in the index; read once per query."""
        missing = [i for i in dict.fromkeys(ids) if i not in self._spans]
        if missing:
            self._spans.update(self.store.spans_by_ids(missing))
        return {i: self._spans[i] for i in ids if i in self._spans}

    def paths(self, ids: Sequence[int]) -> dict[int, str]:
        """Span id → path without reading texts; cached for good (ids are never reused)."""
        missing = [i for i in ids if i not in self._path_cache]
        if missing:
            self._path_cache.update(retrieve.span_paths(self.store, missing))
        return {i: self._path_cache[i] for i in ids if i in self._path_cache}

    def describe(self, ids: Sequence[int]) -> dict[int, str]:
        """Span id → ``path:line symbol``, for the trace."""
        return {
            i: f"{s.span.path}:{s.span.start_line}" + (f" {s.span.symbol}" if s.span.symbol else "")
            for i, s in self.spans(list(ids)).items()
        }

    def span_count(self) -> int:
        """Spans in the index (counted once per generation)."""
        generation = self.store.generation
        if self._span_count is None or self._span_count[0] != generation:
            self._span_count = (generation, self.store.counts()["spans"])
        return self._span_count[1]


__all__ = ["Models", "Sources"]
