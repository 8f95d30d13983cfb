"""Incremental, crash-safe indexing: walk → diff by stat and hash → chunk → embed → store.

This module holds the run: its order, its lock and its repairs. The phases are their own
modules: ``walk`` (the file list), ``parse_files`` (read and chunk what changed),
``write_files`` (the spans into SQLite), ``derived`` (the lexical index and the graph),
``backfill`` (the vectors); ``plan`` is ``--dry-run``.

Crash safety rests on the generation counter. Before its first write a run advances the
store's generation; derived indexes (tantivy, the graph) record the generation they were
built from once they are up to date. After a crash they disagree with the store, and the
next run rebuilds them from SQLite. Each file's spans and vectors are swapped in one
SQLite transaction, so the store itself is always consistent.

Power loss: SQLite commits with ``synchronous=NORMAL``, so the last commits can be lost
(only a tail). Before a derived index records a generation, ``Store.make_durable()``
fsyncs everything up to it, so a derived index is never ahead of what survives. If one is
ahead anyway (a disk that lies about fsync, an older llmc, a restored copy of
``index.db``), the run takes the store's generation past it, so no generation number ever
names two contents, rebuilds the lexical index, re-embeds spans whose vectors were lost,
and re-indexes the files whose records went back in time (their stat no longer matches).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.config import Config
from llmc.errors import LlmcError, StoreError
from llmc.index import derived
from llmc.index.backfill import Backfill, Coverage, coverage
from llmc.index.chunk import CHUNK_POLICY_KEY, chunk_policy
from llmc.index.chunk.pool import ChunkPool
from llmc.index.facts_spool import FactsSpool, SpooledFacts
from llmc.index.generated import SKIP_POLICY_KEY
from llmc.index.parse_files import Parsed, facts_batches, parse_batches, split_by_stat
from llmc.index.plan import plan_run
from llmc.index.progress import (
    GuardedLock,
    Progress,
    Silent,
    StateGuard,
    database_cause,
    failure_line,
    lap,
    mark,
)
from llmc.index.walk import WalkResult, read_text, skip_policy, walk
from llmc.index.write_files import (
    record_of,
    record_policies,
    records_after,
    usable_spaces,
    write_batch,
)
from llmc.paths import db_path, ensure_state_dir, lexical_path, lock_path, state_dir
from llmc.store.db import FileRecord, Store
from llmc.store.sqlite import integrity_problem, quarantine
from llmc.types import CODE, DOC, IndexSummary

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from llmc.store.lexical import LexicalIndex, LexicalUpdate

log = logging.getLogger(__name__)

EMBED_LOCK = "embed.lock"  # one backfill at a time (Indexer._embedding_turn)

# A run that changed fewer files updates the graph here, after its writes, not in a process
# of its own beside them: such an update is small, and here it keeps the daemon's warm graph
# state (a one-file edit on Django: ~0.3 s here against ~2.6 s in a fresh process that reads
# every cache first)
GRAPH_BESIDE_MIN_FILES = 64

# Up to this many spans written, a run embeds them before updating the graph (_graph_after)
GRAPH_AFTER_VECTORS_MAX_SPANS = 256


@dataclass
class IndexReport(IndexSummary):
    """``IndexSummary`` plus the vectors: how many spans have one after the run, and
    whether the backfill ran to the end (``done``), was skipped (``deferred``,
    ``--no-vectors``) or stopped early (``stopped``: a daemon's stop callback, or the model
    changed under it); and the CPU seconds of each phase next to their wall ``timings``.
    ``searchable_seconds`` is when BM25 and exact symbols answered (the lexical index
    committed); the graph follows (``timings["graph"]``), then the vectors."""

    vectors: Coverage | None = None
    backfill: str = "done"
    cpu_timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        out = super().to_json()
        out["cpu_timings"] = self.cpu_timings
        out["backfill"] = self.backfill
        out["vectors"] = self.vectors.to_json() if self.vectors is not None else None
        return out


class Indexer:
    """Indexes one repository. Use ``run()``; it takes the writer lock itself."""

    def __init__(
        self,
        root: Path,
        cfg: Config,
        progress: Progress | None = None,
        embedder_factory: Callable[[str], object] | None = None,
    ):
        self.root = root.resolve()
        self.cfg = cfg
        self.progress = progress or Silent()
        self._embedder_factory = embedder_factory
        self._embedders: dict[str, object] = {}
        self._started = time.perf_counter()
        self._guard: StateGuard | None = None
        self._pool: ChunkPool | None = None  # the run's chunk workers, up until it ends
        self._spool: FactsSpool | None = None  # the run's graph facts, until the graph has them
        self.chunk_spans: int | None = None  # spans per backfill commit (None: the default)
        # A small run's graph update, left for after its vectors (see ``_graph_after``)
        self._graph_later: tuple[list[str], list[str], dict[str, bytes]] | None = None
        self._vectors_wanted = True

    # -- models -------------------------------------------------------------------------------
    def embedder(self, category: str):
        if category not in self._embedders:
            if self._embedder_factory is not None:
                self._embedders[category] = self._embedder_factory(category)
            else:
                from llmc.models.embedder import embedder_from_config

                self._embedders[category] = embedder_from_config(self.cfg.embedding, category)
        return self._embedders[category]

    def model_id(self, category: str) -> str:
        if self._embedder_factory is not None:
            return self.embedder(category).model_id
        from llmc.models.embedder import resolved_model_id

        return resolved_model_id(self.cfg.embedding, category)

    # -- entry points --------------------------------------------------------------------------
    def run(
        self, full: bool = False, vectors: bool = True, stop: Callable[[], bool] | None = None
    ) -> IndexReport:
        """Index the repository: spans, lexical index, exact-symbol data and the graph are
        committed first (searchable from then on), then the spans without a vector are
        embedded (``backfill.py``) unless ``vectors`` is False; ``stop()``, asked between
        chunks, ends the backfill early. Both phases resume where a killed run stopped."""
        self._started = time.perf_counter()
        self._graph_later, self._vectors_wanted = None, vectors
        try:
            ensure_state_dir(self.root)
            lock = self._lock()
            with lock:
                summary = self._run_healing(full)
            try:
                if vectors:
                    self._backfill(lock, summary, stop)
                else:
                    summary.backfill = "deferred"
                    self._coverage(summary)
            finally:
                self._update_graph_later(lock, summary)
            self._check()  # deleted after the last write: this run left nothing behind
        except Exception as e:
            stopped = self._stopped(e)
            if stopped is None:
                raise
            raise stopped from e
        summary.seconds = time.perf_counter() - self._started
        return summary

    def backfill(self, stop: Callable[[], bool] | None = None) -> IndexReport:
        """Only the second phase: embed the spans that have no vector yet."""
        self._started = time.perf_counter()
        summary = IndexReport()
        try:
            self._backfill(self._lock(), summary, stop)
            self._check()
        except Exception as e:
            stopped = self._stopped(e)
            if stopped is None:
                raise
            raise stopped from e
        summary.seconds = time.perf_counter() - self._started
        return summary

    def _lock(self) -> GuardedLock:
        """The writer lock, watching the ``.llmc/`` this run starts with (``StateGuard``)."""
        from llmc.index.lock import IndexLock

        self._guard = StateGuard(self.root)
        lock = IndexLock(
            lock_path(self.root), timeout=self.cfg.index.lock_timeout, on_wait=self.progress.note
        )
        return GuardedLock(lock, self._guard)

    def _check(self) -> None:
        if self._guard is not None:
            self._guard.check()

    def _stopped(self, e: Exception) -> StoreError | None:
        """The one line for a run the file system stopped; None: ``e`` is not that."""
        if self._guard is not None and not self._guard.intact():
            return StoreError(self._guard.line())  # whatever broke, this is why
        if isinstance(e, LlmcError):
            return None  # already one line
        if isinstance(e, OSError) or str(state_dir(self.root)) in str(e):  # tantivy's, too
            return StoreError(failure_line(self.root, e))
        return None

    def _backfill(self, lock, summary: IndexReport, stop: Callable[[], bool] | None) -> None:
        """Embed what is missing, chunk by chunk, each chunk committed under the lock; one
        backfill at a time (``_embedding_turn``), so a second run finds the first's vectors
        cached instead of embedding them again."""
        with self._embedding_turn(stop):
            self._backfill_now(lock, summary, stop)

    @contextlib.contextmanager
    def _embedding_turn(self, stop: Callable[[], bool] | None) -> Iterator[None]:
        """Hold ``.llmc/embed.lock`` while embedding: another run's backfill (a second
        `llmc index`, the daemon, the background embedder) is waited for, with one line,
        for up to ``index.lock_timeout``; past that this one embeds beside it, as before."""
        from llmc.errors import IndexLockedError
        from llmc.index.lock import IndexLock

        turn = IndexLock(
            state_dir(self.root) / EMBED_LOCK,
            timeout=self.cfg.index.lock_timeout,
            on_wait=self.progress.note,
            what="another run's embedding",
            stop=stop,
        )
        try:
            turn.acquire()
        except IndexLockedError as e:
            self.progress.note(f"{e}: embedding beside it")
            yield
            return
        try:
            yield
        finally:
            turn.release()

    def _backfill_now(self, lock, summary: IndexReport, stop: Callable[[], bool] | None) -> None:
        clock = mark()
        store = self._open_store(lock)
        try:
            job = Backfill(
                store, lock, self.embedder, self.model_id, self.progress, self.chunk_spans
            )
            try:
                finished = job.run(summary, stop)
            except Exception as e:
                failed = database_cause(e)
                if failed is None:
                    raise
                raise StoreError(failure_line(self.root, failed)) from e
            summary.backfill = "done" if finished else "stopped"
            if summary.embedded and summary.embed_seconds > 0:
                with lock:
                    store.set_meta(
                        "throughput.spans_per_s",
                        f"{summary.embedded / summary.embed_seconds:.1f}",
                    )
            summary.vectors = coverage(store)
        finally:
            store.close()
        lap(summary, "embed", clock)

    def _open_store(self, lock) -> Store:
        with lock:  # opening a writable store may migrate it
            return Store(db_path(self.root))

    def _coverage(self, summary: IndexReport) -> None:
        store = Store(db_path(self.root), readonly=True)
        try:
            summary.vectors = coverage(store)
        finally:
            store.close()

    def _run_healing(self, full: bool) -> IndexReport:
        """One run; a corrupt ``index.db`` is moved aside and rebuilt from the files.

        Any other database failure (disk full, read-only, I/O error) stops the run with one
        line. Each file's rows change in one transaction, so what was committed stays a
        consistent index, and the next run finishes the job.
        """
        path = db_path(self.root)
        try:
            return self._run_store(full)
        except Exception as e:
            failed = database_cause(e)
            if failed is None:
                raise
            self._check()  # the database of a deleted .llmc/ is not corrupt: stop
            problem = integrity_problem(path)
            if problem is None:
                raise StoreError(failure_line(self.root, failed)) from e
        aside = quarantine(path)
        self.progress.note(
            f"the index database is corrupt ({problem[:200]}); moved it to {aside.name} "
            "and rebuilding the index from the files"
        )
        summary = self._run_store(full=True)
        summary.repaired.append("corrupt-db")
        return summary

    def _run_store(self, full: bool) -> IndexReport:
        store = Store(db_path(self.root))
        try:
            return self._run_locked(store, full)
        finally:
            if self._pool is not None:
                self._pool.close()  # waits for a graph update still running in a worker
                self._pool = None
            if self._spool is not None:
                self._spool.remove()
                self._spool = None
            store.close()

    def plan(self, full: bool = False) -> IndexSummary:
        """What a run would do, writing nothing (``--dry-run``; ``plan.py``)."""
        return plan_run(self.root, self.cfg, self.progress, self.model_id, full=full)

    # -- the run -------------------------------------------------------------------------------
    def _run_locked(self, store: Store, full: bool) -> IndexReport:
        """The first phase: everything but new vectors, committed and searchable."""
        started = self._started
        summary = IndexReport()
        lexical = self._lexical_checked(store, summary)
        self.progress.phase("scanning", None)
        clock = mark()
        walked, known, (policy, recheck), (cutting, rechunk) = self._scan(store, summary)
        changed, unchanged = split_by_stat(walked.files, known, full or recheck or rechunk)
        summary.files_unchanged = len(unchanged)
        spaces = usable_spaces(store, summary, self.model_id, self.progress.note)
        clock = lap(summary, "walk", clock)
        # Each batch of parsed files is written (SQLite, and the lexical update's writer)
        # as the chunk workers hand it over, and let go: the run holds one batch's spans,
        # not the tree's. What it keeps per file is its record, its path and its graph facts.
        upd, generation = None, None
        written: list[FileRecord] = []
        changed_paths: list[str] = []
        spool = self._spool = FactsSpool(state_dir(self.root))  # the graph facts, on disk
        early = None
        committed = False
        try:
            batches = parse_batches(
                self.root, self.cfg, self.progress, changed, known, summary, full or rechunk,
                store=store, recheck=recheck, graph=True, detector=walked.detector,
                reader=read_text, keep=self._keep_pool, facts_later=True,
            )  # fmt: skip
            for batch in batches:
                parsed_clock = lap(summary, "parse", clock)
                if generation is None:
                    generation = store.bump_generation()  # before the run's first write
                    upd = lexical.begin_update()
                self._write(store, batch, generation, upd, spaces, summary, written, changed_paths)
                del batch
                clock = lap(summary, "write", parsed_clock)
            clock = lap(summary, "parse", clock)
            facts = spool.facts()
            walked_paths = {f.path for f in walked.files} - {s.path for s in summary.skipped}
            removed = sorted(set(known) - walked_paths)

            if generation is None and not removed:
                return self._nothing_written(store, lexical, summary, clock, (policy, cutting))

            if generation is None:
                generation = store.bump_generation()
                upd = lexical.begin_update()
            summary.generation = generation
            # The graph's resolution needs no span ids: a worker starts it beside the
            # removals, the commit and the lexical update, unless the workers left the
            # graph facts for after the commit (``_facts_after``)
            from llmc.graph import early as graph_early

            records = records_after(known, written, removed)
            deferred = self._pool is not None and self._pool.facts_deferred
            if not deferred and len(changed_paths) + len(removed) >= GRAPH_BESIDE_MIN_FILES:
                early = graph_early.start(
                    self._pool, self.root, self.cfg.graph, records, changed_paths, removed,
                    generation, facts,
                )  # fmt: skip
            summary.files_removed = store.remove_files(removed)
            upd.remove(removed)
            self._check()  # before the lexical index is written under a deleted .llmc/
            clock = lap(summary, "write", clock)
            store.make_durable()
            committed = True
        finally:
            if early is not None:
                early.gate.open(committed)
            if upd is not None and not committed:
                upd.close()
        beside = early.future if early is not None else None
        try:
            upd.commit(generation)
        finally:
            upd.close()
        clock = lap(summary, "lexical", clock)
        summary.searchable_seconds = time.perf_counter() - started  # BM25 and exact answer
        self._check()
        if deferred:
            facts = self._facts_after(written, walked.detector)
            early = graph_early.start(
                self._pool, self.root, self.cfg.graph, records, changed_paths, removed,
                generation, facts,
            )  # fmt: skip
            if early is not None:
                early.gate.open(True)  # committed and durable already
                beside = early.future
        # What the run held per file (the walk, the records): the graph's worker has its
        # own copy, and this process waits beside it (finish_graph hands the heap back)
        del walked, known, changed, unchanged, written, records, walked_paths
        graph = (changed_paths, removed, facts, beside)
        return self._after_commit(store, lexical, summary, clock, graph, (policy, cutting))

    def _after_commit(
        self, store: Store, lexical: LexicalIndex, summary: IndexReport, clock: tuple[float, float],
        graph: tuple[list[str], list[str], Mapping[str, bytes], Future | None],
        policies: tuple[str, str],
    ) -> IndexReport:  # fmt: skip
        """After the commit: the graph (updated here, or left for after the vectors when a
        few files changed, or its worker's update awaited), the files list, the cache
        pruned and the policies recorded."""
        changed_paths, removed, facts, beside = graph
        if beside is None and self._graph_after(summary.spans_written):
            self._graph_later = (changed_paths, removed, dict(facts))  # a few files
        else:
            derived.finish(
                self.root, self.cfg.graph, store, lexical, changed_paths, removed, self.progress,
                facts, beside,
            )  # fmt: skip
            if self._pool is not None:  # its facts cache written, the graph's process gone
                self._pool.finish_beside()
            clock = lap(summary, "graph", clock)
        derived.sync_files(self.root, store)
        lap(summary, "files", clock)
        store.prune_cache([self.model_id(c) for c in (CODE, DOC)])
        store.set_meta("indexed_at", str(time.time()))
        record_policies(store, *policies)
        self._totals(store, summary)
        self._check()
        return summary

    def _lexical_checked(self, store: Store, summary: IndexReport) -> LexicalIndex:
        """The lexical index, its lost tail repaired and rebuilt from SQLite when it
        reflects another generation than the store."""
        from llmc.store.lexical import LexicalIndex

        lexical = LexicalIndex(lexical_path(self.root))
        derived.repair_lost_tail(store, lexical, summary, self.progress.note)
        if lexical.generation != store.generation and store.generation > 0:
            self.progress.note(
                f"lexical index reflects generation {lexical.generation}, store is at "
                f"{store.generation}: rebuilding it from SQLite"
            )
            store.make_durable()
            lexical.rebuild(store.iter_spans(), store.generation)
            summary.repaired.append("lexical")
        return lexical

    def _scan(
        self, store: Store, summary: IndexReport
    ) -> tuple[WalkResult, dict[str, FileRecord], tuple[str, bool], tuple[str, bool]]:
        """The walk, the files the index knows, and whether the skip rules (``recheck``:
        read every file again) or the chunker (``rechunk``: cut every file again; vectors
        are cached by text, so unchanged spans are not embedded again) changed since the
        index was built: ``(walked, known, (policy, recheck), (cutting, rechunk))``."""
        walked = walk(self.root, self.cfg.index)
        summary.skipped = list(walked.skipped)
        summary.files_seen = len(walked.files)
        known = store.files()
        policy = skip_policy(self.cfg.index)  # generated.py, secrets.py
        recheck = store.get_meta(SKIP_POLICY_KEY) != policy
        cutting = chunk_policy(self.cfg.index)
        rechunk = bool(known) and store.get_meta(CHUNK_POLICY_KEY) != cutting
        if rechunk:
            self.progress.note("the chunker or span settings changed: re-chunking every file")
        return walked, known, (policy, recheck), (cutting, rechunk)

    def _write(
        self, store: Store, batch: list[Parsed], generation: int, upd: LexicalUpdate,
        spaces: dict[str, str], summary: IndexReport, written: list[FileRecord], changed: list[str],
    ) -> None:  # fmt: skip
        """One parsed batch into SQLite and the lexical update; its records and paths
        kept, its graph facts spooled to disk, its spans let go."""
        paths = [p.file.path for p in batch]
        spans, fields = write_batch(store, batch, generation, spaces, summary)
        upd.remove(paths)
        upd.add(spans, fields)
        written += [record_of(p) for p in batch]
        changed += paths
        for p in batch:
            if p.facts is not None:
                self._spool.add(p.file.path, p.facts)  # type: ignore[union-attr]

    def _nothing_written(
        self, store: Store, lexical: LexicalIndex, summary: IndexReport, clock: tuple[float, float],
        policies: tuple[str, str],
    ) -> IndexReport:  # fmt: skip
        """A run that wrote and removed nothing: the derived indexes brought up to date,
        the skip and chunk policies recorded (once committed: a crash rechecks)."""
        summary.generation = store.generation
        summary.searchable_seconds = time.perf_counter() - self._started
        self._check()
        derived.finish(self.root, self.cfg.graph, store, lexical, [], [], self.progress)
        clock = lap(summary, "graph", clock)
        derived.sync_files(self.root, store)
        lap(summary, "files", clock)
        record_policies(store, *policies)
        self._totals(store, summary)
        return summary

    def _facts_after(self, written: list[FileRecord], detector) -> SpooledFacts:
        """The graph facts the chunk workers left out to make the index searchable sooner
        (``parse_batches(facts_later=True)``): the written files read again and their facts
        extracted by the same workers, into the run's spool."""
        spool = self._spool
        files = [(r.path, r.size, r.content_hash) for r in written]
        for batch in facts_batches(
            self.root, self.cfg, self.progress, self._pool, files, detector, read_text
        ):
            for path, facts in batch:
                spool.add(path, facts)
        return spool.facts()

    def _graph_after(self, spans_written: int) -> bool:
        """Whether this run's graph update waits for its vectors: in a small run (an edit,
        as the daemon makes them) embedding the new spans takes a fraction of the graph
        update on a large repository (Django: ~0.1 s against ~3 s), so dense search is
        fresh that much sooner. A large run updates the graph first (beside the lexical
        index when it has workers): it is searchable long before its vectors are done. A
        run killed in between leaves a graph behind the store, which the next run's
        content-hash check repairs, as after any crash."""
        return (
            self._vectors_wanted
            and self.cfg.graph.enabled
            and spans_written <= GRAPH_AFTER_VECTORS_MAX_SPANS
        )

    def _update_graph_later(self, lock, summary: IndexReport) -> None:
        if self._graph_later is None:
            return
        changed, removed, facts = self._graph_later
        self._graph_later = None
        clock = mark()
        with lock:
            store = Store(db_path(self.root))
            try:
                derived.finish_graph_logged(
                    self.root, self.cfg.graph, store, changed, removed, self.progress, facts
                )
            finally:
                store.close()
        lap(summary, "graph", clock)

    def _keep_pool(self, pool: ChunkPool) -> None:
        """The run's chunk workers stay up for its graph update; ``_run_store`` closes them."""
        self._pool = pool

    def _totals(self, store: Store, summary: IndexSummary) -> None:
        summary.spans_total = store.counts()["spans"]


def index_repo(
    root: Path,
    cfg: Config,
    full: bool = False,
    progress: Progress | None = None,
    vectors: bool = True,
) -> IndexReport:
    return Indexer(root, cfg, progress).run(full=full, vectors=vectors)


def plan_index(
    root: Path, cfg: Config, progress: Progress | None = None, full: bool = False
) -> IndexSummary:
    return Indexer(root, cfg, progress).plan(full=full)


__all__ = ["IndexReport", "Indexer", "Progress", "index_repo", "plan_index"]
