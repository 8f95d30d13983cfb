"""Vectors after the fact: embed the spans that have none, one durable chunk at a time.

`llmc index` first commits spans, the lexical index, exact-symbol data and the graph (the
index is searchable then, BM25 and exact over every span), and only then embeds. This module
is that second phase, shared by `llmc index` (foreground, with progress) and the daemon
(background, with a ``stop`` callback so a new edit is not kept waiting):

- the work list is the store itself: every span of a category without a vector in that
  category's vec table, so a run that was killed, stopped or skipped (``--no-vectors``)
  is resumed by the next one, which embeds only what is missing;
- each chunk of ``CHUNK_SPANS`` spans is embedded *without* the writer lock and written in
  one transaction *under* it (``Store.add_vectors``, fsynced), so a kill loses at most the
  chunk in flight and another writer (a git hook's `llmc index`) waits for one commit, not
  for the whole backfill;
- the (model, text hash) embedding cache answers first, so moved or restored text is
  never embedded twice; what it lacks, the caches of the repository's other git worktrees
  are asked for next (read-only, ``worktree_cache``), so a new worktree does not embed
  again what its siblings already have.

``Coverage`` is what search and `llmc status` report meanwhile:
"dense: 34% of spans embedded (1,203 of 3,540)".
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.index.worktree_cache import SiblingCache
from llmc.store.db import VectorSpace, embed_hash
from llmc.types import CODE, DOC

if TYPE_CHECKING:  # pragma: no cover
    from llmc.index.lock import IndexLock
    from llmc.index.progress import Progress
    from llmc.store.db import Store
    from llmc.types import IndexSummary

log = logging.getLogger(__name__)

CHUNK_SPANS = 512  # spans embedded between two commits
CHUNK_ENV = "LLMC_BACKFILL_CHUNK_SPANS"  # overrides CHUNK_SPANS (tests, slow machines)


def default_chunk_spans() -> int:
    """Spans per backfill commit: ``$LLMC_BACKFILL_CHUNK_SPANS`` or ``CHUNK_SPANS``."""
    try:
        return max(1, int(os.environ.get(CHUNK_ENV, "") or CHUNK_SPANS))
    except ValueError:
        log.warning("%s must be a whole number; using %d", CHUNK_ENV, CHUNK_SPANS)
        return CHUNK_SPANS


class StopEmbedding(Exception):  # noqa: N818 - a signal, not an error
    """Raised by an embedder between its batches when the run should give way now (the
    daemon's: a new edit is waiting); the chunk in flight is dropped, nothing of it is
    written, and the backfill ends as ``stopped`` (the next run resumes it)."""


@dataclass(frozen=True)
class Coverage:
    """How many spans have a vector: in all, and per category (embedded, spans)."""

    embedded: int
    total: int
    by_category: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, counts: Mapping[str, tuple[int, int]]) -> Coverage:
        return cls(
            embedded=sum(e for e, _ in counts.values()),
            total=sum(t for _, t in counts.values()),
            by_category=dict(counts),
        )

    @property
    def missing(self) -> int:
        return self.total - self.embedded

    @property
    def complete(self) -> bool:
        return self.embedded >= self.total

    @property
    def percent(self) -> int:
        """Rounded, but 100 only when every span is embedded and 0 only when none is."""
        if self.total == 0 or self.embedded >= self.total:
            return 100
        if self.embedded <= 0:
            return 0
        return min(99, max(1, round(100 * self.embedded / self.total)))

    def line(self) -> str:
        """``dense: 34% of spans embedded (1,203 of 3,540)``."""
        return f"dense: {self.percent}% of spans embedded ({self.embedded:,} of {self.total:,})"

    def to_json(self) -> dict[str, Any]:
        return {
            "embedded": self.embedded,
            "total": self.total,
            "missing": self.missing,
            "percent": self.percent,
            "complete": self.complete,
            "by_category": {
                c: {"embedded": e, "total": t} for c, (e, t) in self.by_category.items()
            },
            "line": self.line(),
        }


def coverage(store: Store) -> Coverage:
    return Coverage.of(store.vector_counts())


class Backfill:
    """Embeds every span without a vector (see the module doc). ``embedder(category)`` and
    ``model_id(category)`` come from the caller (the indexer's, or the daemon's locked
    embedders), so a model is loaded only when something is missing."""

    def __init__(
        self,
        store: Store,
        lock: IndexLock,
        embedder: Callable[[str], Any],
        model_id: Callable[[str], str],
        progress: Progress,
        chunk_spans: int | None = None,
    ):
        self.store = store
        self.lock = lock
        self.embedder = embedder
        self.model_id = model_id
        self.progress = progress
        self.chunk_spans = max(1, chunk_spans or default_chunk_spans())
        self.siblings = SiblingCache(Path(store.path).parent.parent)  # other worktrees

    def run(self, summary: IndexSummary, stop: Callable[[], bool] | None = None) -> bool:
        """Embed what is missing; False when ``stop()`` said so (or the model changed
        under us) before the end. Counts go to ``summary`` (embedded, embed_cached,
        embed_seconds, model_changed)."""
        try:
            return self._run(summary, stop)
        finally:
            self.siblings.close()

    def _run(self, summary: IndexSummary, stop: Callable[[], bool] | None) -> bool:
        with self.lock:
            spaces = self._ensure_vector_spaces(summary)
        todo = {c: self.store.missing_vectors(c) for c in spaces}
        total = sum(len(ids) for ids in todo.values())
        if not total:
            return True
        self.progress.note(
            f"searchable now (BM25, exact symbols, graph); embedding {total:,} spans "
            "(stopping is safe: `llmc index` resumes)"
        )
        self.progress.phase("embedding", total)
        for category, ids in todo.items():
            for start in range(0, len(ids), self.chunk_spans):
                if stop is not None and stop():
                    return False
                if not self._chunk(
                    category, spaces[category], ids[start : start + self.chunk_spans], summary
                ):
                    return False
        self._prepare_query_runtime(spaces)
        return True

    def _prepare_query_runtime(self, spaces: Mapping[str, str]) -> None:
        """Build the int8 export that later cold queries run on, while the torch model that
        the export starts from is loaded anyway (``ensure_query_runtime``: once per model
        and machine; a no-op for runtimes without a split). Never fails the backfill."""
        for category in spaces:
            embedder = self.embedder(category)
            if not getattr(embedder, "query_runtime_missing", False):
                continue
            self.progress.phase("preparing the query runtime", None)
            try:
                embedder.ensure_query_runtime()
            except Exception as e:  # noqa: BLE001 - queries then stay on torch
                log.warning("query runtime not prepared (%s); queries run on torch", e)

    def _ensure_vector_spaces(self, summary: IndexSummary) -> dict[str, str]:
        """Category → model id of the spaces to fill. A category whose vec table holds
        another model's vectors is emptied and re-created here (the model is loaded for
        its dimension only then, or when the table does not exist yet). Both tables always
        exist after a backfill, as after every index run before backfills."""
        out: dict[str, str] = {}
        for category in (CODE, DOC):
            model_id = self.model_id(category)
            current = self.store.vector_space(category)
            if current is not None and current.model_id == model_id:
                self.store.ensure_vector_space(category, current)
            else:
                dim = self.embedder(category).dim
                if self.store.ensure_vector_space(category, VectorSpace(model_id, dim)):
                    summary.model_changed = True
                    self.progress.note(
                        f"embedding model for {category} changed from {current.model_id} to "
                        f"{model_id}: re-embedding every {category} span"
                    )
            out[category] = model_id
        return out

    def _chunk(self, category: str, model_id: str, ids: list[int], summary: IndexSummary) -> bool:
        """Embed one chunk (cache first) and commit it; False when the space changed or the
        embedder said stop (``StopEmbedding``)."""
        spans = self.store.spans_by_ids(ids)
        live = [spans[i] for i in ids if i in spans]
        hashes = [embed_hash(s.span) for s in live]
        cached = self.store.cached_vectors(model_id, hashes)
        borrowed = self._borrow(category, model_id, [h for h in hashes if h not in cached])
        cached.update(borrowed)
        todo: dict[str, str] = {}
        for s, h in zip(live, hashes, strict=True):
            if h not in cached:
                todo.setdefault(h, s.span.embed_text)
        hits = sum(1 for h in hashes if h in cached)
        summary.embed_cached += hits
        self.progress.advance(hits + len(ids) - len(live))
        fresh: dict = {}
        if todo:
            started = time.perf_counter()
            try:
                vectors = self.embedder(category).embed_passages(
                    list(todo.values()), progress=self._advance_by(len(todo), len(live) - hits)
                )
            except StopEmbedding:
                return False
            summary.embed_seconds += time.perf_counter() - started
            summary.embedded += len(todo)
            fresh = dict(zip(todo.keys(), vectors, strict=True))
        vectors_by_hash = {**cached, **fresh}
        items = [(s.id, vectors_by_hash[h]) for s, h in zip(live, hashes, strict=True)]
        with self.lock:
            if self._space_moved(category, model_id):
                self.progress.note(
                    f"the {category} embedding model changed during the backfill: stopping "
                    "(run `llmc index` again)"
                )
                return False
            self.store.add_vectors(category, model_id, items, {**borrowed, **fresh}.items())
        return True

    def _borrow(self, category: str, model_id: str, hashes: list[str]) -> dict:
        """Vectors for ``hashes`` from the sibling worktrees' caches (see the module doc)."""
        if not hashes:
            return {}
        space = self.store.vector_space(category)
        return self.siblings.lookup(model_id, hashes, space.dim if space is not None else None)

    def _space_moved(self, category: str, model_id: str) -> bool:
        space = self.store.vector_space(category)
        return space is None or space.model_id != model_id

    def _advance_by(self, texts: int, spans: int) -> Callable[[int], None]:
        """Progress in spans while the embedder reports texts (duplicates embed once)."""
        done = [0, 0]  # texts reported, spans advanced

        def advance(n: int) -> None:
            done[0] += n
            target = spans if done[0] >= texts else (spans * done[0]) // max(texts, 1)
            if target > done[1]:
                self.progress.advance(target - done[1])
                done[1] = target

        return advance


__all__ = [
    "CHUNK_ENV",
    "CHUNK_SPANS",
    "Backfill",
    "Coverage",
    "StopEmbedding",
    "coverage",
    "default_chunk_spans",
]
