"""Chunk many files on every core: tree-sitter parsing is most of a first index's CPU time
before it is searchable, and it is per file, so it spreads over processes.

``ChunkPool`` chunks one file at a time in this process below ``PARALLEL_MIN_FILES`` files
(an edit, a small repository: a pool would cost more than it saves) or on a one-core machine,
and otherwise in ``spawn``-ed worker processes (safe in a threaded caller such as the daemon,
unlike ``fork``). Asked to, a worker also extracts the file's graph facts from the same
tree-sitter parse (``llmc.graph.facts``), so the graph never parses a file again, and the
graph's tags query runs in the chunker's own walk of the tree (``llmc.tags.Also``). The
workers start, and import what they need, while the indexer reads the first files
(``warm``). Workers die with their parent (``PR_SET_PDEATHSIG`` on Linux), so a killed
`llmc index` leaves none behind; they only read the texts they are handed and write nothing.
A pool that cannot start or breaks falls back to this process, with one log line.

``submit`` hands a batch to the workers and returns at once; the caller reads and writes
other batches while they chunk it, and takes its results (``Batch.results``) when it needs
them, so the workers are never idle while the indexer reads files or writes spans (with two
batches in flight the cores stay busy; one at a time, the workers waited for each write).
Once the files are chunked, ``beside`` runs one more job (the indexer's graph update, beside
its lexical update) in a process of its own, and the chunk workers end: an idle chunk
worker no longer sits beside the graph's memory peak.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from llmc.index.parse_journal import ParseJournal, culprits

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future, ProcessPoolExecutor

    from llmc.config import IndexConfig
    from llmc.store.lexical import Fields
    from llmc.types import Span

log = logging.getLogger(__name__)
T = TypeVar("T")

PARALLEL_MIN_FILES = 200  # below this, one process (a pool's start-up costs ~0.5 s)
MAX_WORKERS = 8
TASKS_PER_SEND = 8
# A chunk worker allocates millions of short-lived objects (tree-sitter nodes and matches,
# spans, tokens) that reference counting frees, and few reference cycles (the chunker's
# nested definitions); with Python's default threshold (700 allocations) the cyclic
# collector ran ~3,000 times over SQLAlchemy's 688 files, each pass also walking the
# workers' long-lived memo caches: ~20% of their CPU. A pass every 20,000 allocations
# costs a few MB more until the cycles are found.
WORKER_GC_THRESHOLD = (20_000, 20, 20)

# (lang, category, spans, their lexical fields or None, the graph facts as JSON or None)
# of a file, or the error chunking it raised, as a string.
Chunked = tuple[str | None, str | None, list["Span"], list["Fields"] | None, bytes | None] | str


def chunk_one(
    rel: str,
    text: str,
    index_cfg: IndexConfig,
    fields: bool = False,
    graph: bool = False,
    parse: bool = True,
) -> Chunked:
    """A file's language, category and spans (and with ``fields``, each span's lexical
    fields: tokenizing is the other per-span cost before search; with ``graph``, its
    graph facts as JSON bytes, from the chunker's own parse); the error's text when chunking
    fails. Without ``parse`` (the file crashed a parser before), line windows and, for
    the graph, facts that say so (the graph must not parse it either)."""
    from llmc.index.chunk import chunk_file
    from llmc.languages import detect_language

    try:
        first_line = text.split("\n", 1)[0][:200]
        lang, category = detect_language(rel, first_line)
        trees: dict | None = {} if graph else None
        also = _tags_walk(rel, lang, category) if graph and parse else None
        spans = chunk_file(rel, text, lang, category, index_cfg, trees, parse=parse, also=also)
        if graph and not parse:
            facts = _unparsed_facts(rel, lang, category)
        else:
            facts = _graph_facts(rel, text, lang, category, spans, trees) if graph else None
        if not fields:
            return lang, category, spans, None, facts
        from llmc.store.lexical import span_fields

        return lang, category, spans, [span_fields(s) for s in spans], facts
    except Exception as e:  # noqa: BLE001 - one bad file never stops the run
        log.debug("chunking %s failed: %s", rel, e, exc_info=True)
        return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def facts_one(rel: str, text: str, index_cfg: IndexConfig, parse: bool = True) -> bytes | None:
    """The graph facts of a file already chunked (``chunk_one`` without them): what
    ``chunk_one(graph=True)`` gives as its facts, from a parse of its own. The spans are
    cut again only where the facts take their definitions from them (a code file whose
    extraction found none, ``llmc.graph.facts.with_span_defs``). None on failure (the graph
    then reads the file itself)."""
    from llmc.languages import detect_language

    try:
        lang, category = detect_language(rel, text.split("\n", 1)[0][:200])
        if not parse:
            return _unparsed_facts(rel, lang, category)
        from llmc.graph.codec import encode_facts
        from llmc.graph.extract import extract_file
        from llmc.graph.facts import span_rows, with_span_defs

        facts = extract_file(rel, text, lang, category)
        if not facts.defs and facts.category == "code":
            from llmc.index.chunk import chunk_file

            spans = chunk_file(rel, text, lang, category, index_cfg)
            facts = with_span_defs(facts, span_rows(spans))
        return encode_facts(facts)
    except Exception as e:  # noqa: BLE001 - the graph is derived; the spans stand
        log.debug("graph facts of %s failed: %s", rel, e, exc_info=True)
        return None


def _tags_walk(rel: str, lang: str | None, category: str | None):
    """The graph's tags query, for the chunker's walk of the file (``Also``)."""
    try:
        from llmc.graph.extract import tags_walk

        return tags_walk(rel, lang, category)
    except Exception as e:  # noqa: BLE001 - the graph's extraction then walks it itself
        log.debug("graph tags query of %s unavailable: %s", rel, e)
        return None


def _graph_facts(rel: str, text: str, lang, category, spans, trees) -> bytes | None:
    """The graph facts as JSON; None (the graph then reads the file itself) on failure."""
    try:
        from llmc.graph.facts import encoded_facts

        return encoded_facts(rel, text, lang, category, spans, trees)
    except Exception as e:  # noqa: BLE001 - the graph is derived; the spans stand
        log.debug("graph facts of %s failed: %s", rel, e, exc_info=True)
        return None


def _unparsed_facts(rel: str, lang: str | None, category: str | None) -> bytes:
    from llmc.graph.codec import encode_facts
    from llmc.graph.model import FileFacts

    cat = "doc" if category == "doc" else "code"
    facts = FileFacts(rel, lang or "", cat, error="extract: skipped, it crashed a parser")
    return encode_facts(facts)


def kills_its_parser(rel: str, text: str, index_cfg: IndexConfig) -> bool:
    """Chunk ``rel`` alone in a child process: True when that process dies of a signal
    (a crash in native code), False when it finishes or fails in Python. The child gets
    ``[rel, text, config]`` as JSON on stdin."""
    import dataclasses
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from llmc.config import IndexConfig\n"
        "from llmc.index.chunk.pool import chunk_one\n"
        "rel, text, cfg = json.loads(sys.stdin.buffer.read())\n"
        "chunk_one(rel, text, IndexConfig(**cfg), graph=True)\n"
    )
    # The standard json: it carries any str (lone surrogates too, as escapes).
    payload = json.dumps([rel, text, dataclasses.asdict(index_cfg)]).encode()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=payload,
            capture_output=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log.info("could not re-check %s alone (%s); treating it as the crash", rel, e)
        return True
    return proc.returncode < 0


_worker_journal: ParseJournal | None = None


def _chunk_task(task: tuple[str, str, IndexConfig, bool, str | None, bool]) -> Chunked:
    """One file in a worker, written down in the worker's journal entry while it runs."""
    global _worker_journal
    rel, text, index_cfg, graph, journal_dir, parse = task
    if journal_dir is not None and _worker_journal is None:
        _worker_journal = ParseJournal(Path(journal_dir))
    if _worker_journal is not None:
        _worker_journal.mark(rel)
    out = chunk_one(rel, text, index_cfg, fields=True, graph=graph, parse=parse)
    if _worker_journal is not None:
        _worker_journal.mark(None)
    return out


def _facts_task(task: tuple[str, str, IndexConfig, str | None, bool]) -> bytes | None:
    """``facts_one`` in a worker, journaled as ``_chunk_task`` is."""
    global _worker_journal
    rel, text, index_cfg, journal_dir, parse = task
    if journal_dir is not None and _worker_journal is None:
        _worker_journal = ParseJournal(Path(journal_dir))
    if _worker_journal is not None:
        _worker_journal.mark(rel)
    out = facts_one(rel, text, index_cfg, parse=parse)
    if _worker_journal is not None:
        _worker_journal.mark(None)
    return out


def _warm() -> None:
    """A worker's first job, sent as soon as the pool starts: import what chunking and graph
    facts need (~0.3 s a process) while the indexer is still reading files."""
    import llmc.graph.facts  # noqa: F401
    import llmc.index.chunk  # noqa: F401
    import llmc.store.lexical  # noqa: F401


def _init_worker() -> None:
    """Worker initializer: on Linux, SIGKILL this worker when its parent dies; and collect
    reference cycles less often (``WORKER_GC_THRESHOLD``)."""
    import gc

    gc.set_threshold(*WORKER_GC_THRESHOLD)
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: workers end when their queue closes
        pass


class Batch:
    """Files handed to a ``ChunkPool`` (``submit``): their ``Chunked`` results, in order,
    from ``results()``."""

    def __init__(
        self, pool: ChunkPool, items: Sequence[tuple[str, str, bool]], cfg, work, facts=False
    ):
        self.pool, self.items, self.cfg, self.facts = pool, items, cfg, facts
        self._work = work  # the workers' results (an iterator), or None: chunk them here

    def results(self) -> list[Chunked]:
        """The results (once: the batch then lets its texts go). A pool that broke while
        the workers had this batch chunks it here, in this process."""
        pool, work = self.pool, self._work
        self._work = None
        try:
            if work is not None:
                try:
                    return list(work)
                except Exception as e:  # noqa: BLE001 - a broken pool only costs speed
                    pool._after_break(e, self.cfg)
            return pool._chunk_here(self.items, self.cfg, self.facts)
        finally:
            pool._done(self)
            self.items = ()


class ChunkPool:
    """Chunks batches of files, in worker processes when that pays (see the module doc)."""

    def __init__(
        self,
        files_expected: int,
        journal_dir: Path | None = None,
        unparsed: Iterable[str] = (),
    ):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        self.workers = min(cores, MAX_WORKERS)
        self.parallel = self.workers > 1 and files_expected >= PARALLEL_MIN_FILES
        self._executor: ProcessPoolExecutor | None = None
        # Files that crashed a parser (see llmc.index.parse_journal): windows, not parsed
        self.journal_dir = journal_dir
        self.unparsed: set[str] = set(unparsed)
        self.crashed: dict[str, int] = {}  # found during this run: path -> the dead pid
        self._journal = ParseJournal(journal_dir) if journal_dir is not None else None
        self._inflight: list[Batch] = []  # submitted, results not taken yet
        self._beside: ProcessPoolExecutor | None = None  # the process ``beside`` started
        self.facts_deferred = False  # the graph facts left for later (parse_files.facts_batches)

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the workers (waiting for a ``beside`` job still running)."""
        self._stop_workers()
        self.finish_beside()
        if self._journal is not None:
            self._journal.close()

    def finish_beside(self) -> None:
        """Wait until the process ``beside`` started has ended: its job may go on after its
        answer (the graph's worker writes the facts cache then), and the run's next step
        should not sit beside that process's memory (on 100k files the two together were
        the run's peak: 1.35 GB writing the cache + 0.4 GB building the whole-file index)."""
        if self._beside is not None:
            self._beside.shutdown(wait=True)
            self._beside = None

    def _stop_workers(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def chunk(
        self, items: Sequence[tuple[str, str, bool]], index_cfg: IndexConfig
    ) -> Iterator[Chunked]:
        """``chunk_one`` of each (path, text, graph facts wanted), in order; workers
        tokenize too."""
        yield from self.submit(items, index_cfg).results()

    def submit(
        self, items: Sequence[tuple[str, str, bool]], index_cfg: IndexConfig, facts: bool = False
    ) -> Batch:
        """Hand ``items`` to the workers now; ``Batch.results()`` waits for them (without
        workers, it chunks them then, in this process). With ``facts``, each file's graph
        facts only (``facts_one``), for files chunked before."""
        work = None
        if self.parallel and len(items) > 1:
            journal = str(self.journal_dir) if self.journal_dir is not None else None
            try:
                executor = self._start()
                if facts:
                    fn: Callable = _facts_task
                    tasks: list = [
                        (rel, text, index_cfg, journal, rel not in self.unparsed)
                        for rel, text, _ in items
                    ]
                else:
                    fn = _chunk_task
                    tasks = [
                        (rel, text, index_cfg, graph, journal, rel not in self.unparsed)
                        for rel, text, graph in items
                    ]
                work = executor.map(fn, tasks, chunksize=TASKS_PER_SEND)
            except Exception as e:  # noqa: BLE001 - results() chunks them here
                log.debug("could not hand files to the chunk workers: %s", e)
        batch = Batch(self, items, index_cfg, work, facts)
        self._inflight.append(batch)
        return batch

    def _done(self, batch: Batch) -> None:
        if batch in self._inflight:
            self._inflight.remove(batch)

    def _chunk_here(
        self, items: Sequence[tuple[str, str, bool]], index_cfg: IndexConfig, facts: bool
    ) -> list:
        out: list = []
        for rel, text, graph in items:
            if self._journal is not None:
                self._journal.mark(rel)
            parse = rel not in self.unparsed
            if facts:
                out.append(facts_one(rel, text, index_cfg, parse=parse))
            else:
                out.append(chunk_one(rel, text, index_cfg, graph=graph, parse=parse))
        if self._journal is not None:
            self._journal.mark(None)
        return out

    def _after_break(self, e: Exception, index_cfg: IndexConfig) -> None:
        """The pool broke: a worker that died mid-file left that file in the journal; it
        is not parsed again, here or in the rest of the run. The pool ends its other
        workers when one dies, so each file a dead worker held (in any batch in flight)
        is a suspect until parsing it alone, in a child process, shows whether it kills
        its parser. Once broken, the pool chunks in this process."""
        if not self.parallel:
            return  # an earlier batch's results found the break already
        self._stop_workers()
        self.parallel = False
        suspects = culprits(self.journal_dir) if self.journal_dir is not None else {}
        texts = {rel: text for b in self._inflight for rel, text, _ in b.items}
        found = {
            rel: pid
            for rel, pid in suspects.items()
            if rel not in texts or kills_its_parser(rel, texts[rel], index_cfg)
        }
        for rel, pid in found.items():
            log.warning(
                "%s: a worker process died while parsing it (pid %d); indexing it as line "
                "windows, without its grammar",
                rel,
                pid,
            )
        self.crashed.update(found)
        self.unparsed.update(found)
        if not found:
            log.info("chunking in worker processes failed (%s); continuing in this one", e)

    def warm(self) -> None:
        """Start the worker processes now and have them import what they need, so that
        they are ready by the time the first files are read (a no-op without workers)."""
        if not self.parallel:
            return
        try:
            executor = self._start()
            for _ in range(self.workers):
                executor.submit(_warm)
        except Exception as e:  # noqa: BLE001 - chunk() finds a broken pool and says so
            log.debug("could not start the chunk workers early: %s", e)

    def beside(self, fn: Callable[..., T], *args: Any) -> Future[T] | None:
        """Run ``fn(*args)`` in a process of its own while this one goes on, once the
        files are chunked: the chunk workers end (a later ``submit`` starts them again),
        so an idle one does not sit beside ``fn``'s memory. None when this pool has no
        worker processes up (a small run, one core, a broken pool): the caller runs ``fn``
        itself."""
        if not self.parallel or self._executor is None:
            return None
        try:
            executor, self._executor = self._executor, None
            executor.shutdown(wait=False, cancel_futures=True)  # they exit beside fn's start
            if self._beside is None:
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                # One job per process: the graph's worker exits once its update is done
                # (the facts cache written after the future's result), handing back its
                # memory (fragmented: ~0.4 GB on nine large projects, ~0.6 GB on twice
                # that) instead of sitting idle beside the run's next steps until close.
                self._beside = ProcessPoolExecutor(
                    1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_init_worker,
                    max_tasks_per_child=1,
                )
            return self._beside.submit(fn, *args)
        except Exception as e:  # noqa: BLE001 - no process: the caller runs fn itself
            log.info("worker processes unavailable (%s); running in this one", e)
            return None

    def _start(self) -> ProcessPoolExecutor:
        if self._executor is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
            )
        return self._executor


__all__ = ["PARALLEL_MIN_FILES", "Batch", "ChunkPool", "chunk_one", "facts_one"]
