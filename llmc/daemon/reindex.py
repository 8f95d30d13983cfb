"""The daemon's writer: one worker thread running the indexer, requests coalesced.

``Reindexer`` runs ``Indexer.run()`` (the very code path of `llmc index`) on a single
thread; while a run is in progress every new request (watcher batch, hook, API call) joins
one pending ``Job`` that starts after it, so a burst of any size costs at most one more
run and no change is lost. ``LockedEmbedder`` lets the indexer share the daemon's
embedding model with queries: it embeds in chunks of ``EMBED_CHUNK`` texts under the
model's lock and gives way to a waiting edit between chunks. ``RunProgress`` records a
run's phase for `status` instead of drawing it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmc.errors import LlmcError
from llmc.paths import db_path

log = logging.getLogger(__name__)

EMBED_CHUNK = 32
MAX_JOB_PATHS = 20_000  # paths a pending run remembers; past that it is "all files"
VECTORS_REASON = "index:vectors"  # `llmc index` handing its new spans' vectors over


def loggable(text: str) -> str:
    """``text`` for one log line: a request's or a file name's newline or other control
    character is escaped (``\\n``), so it cannot start a forged line of its own."""
    return text if text.isprintable() else repr(text)[1:-1]


# -- embedding under the shared lock ------------------------------------------------------------
class LockedEmbedder:
    """Wrap an embedder so the indexer embeds in small chunks under ``lock``; ``stop()``,
    asked before each, gives way to a waiting edit at once (``StopEmbedding``: the
    backfill's chunk in flight is dropped, the next run resumes), not after the backfill
    chunk of hundreds of spans."""

    def __init__(
        self,
        inner: Any,
        lock: threading.Lock,
        chunk: int = EMBED_CHUNK,
        stop: Callable[[], bool] | None = None,
    ):
        self.inner = inner
        self.lock = lock
        self.chunk = chunk
        self.stop = stop
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if prepare := getattr(self.inner, "prepare_passages", None):
            prepare()  # seconds of model loading, outside the lock searches wait on
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.chunk):
            if self.stop is not None and self.stop():
                from llmc.index.backfill import StopEmbedding

                raise StopEmbedding
            idx = order[start : start + self.chunk]
            with self.lock:
                out[idx] = self.inner.embed_passages([texts[i] for i in idx])
            if progress:
                progress(len(idx))
        return out

    @property
    def query_runtime_missing(self) -> bool:
        return bool(getattr(self.inner, "query_runtime_missing", False))

    def ensure_query_runtime(self) -> bool:
        with self.lock:
            return bool(self.inner.ensure_query_runtime())

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        with self.lock:
            return self.inner.embed_queries(texts)


# -- the reindex queue ----------------------------------------------------------------------------
@dataclass
class Job:
    """One index run, possibly asked for by many requests."""

    id: int
    reasons: list[str] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    all_paths: bool = False
    queued_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def vectors_only(self) -> bool:
        """Asked for vectors only (``paths`` given and empty: an `llmc index` that handed
        its new spans' vectors over): the run embeds what is missing and walks nothing,
        unless the graph is behind the store too (that run left it): then it is a run."""
        return not self.all_paths and not self.paths and VECTORS_REASON in self.reasons

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reasons": sorted(set(self.reasons)),
            "paths": len(self.paths),
            "queued_at": self.queued_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "summary": self.summary,
            "error": self.error,
        }


class RunProgress:
    """The indexer's Progress protocol, recorded for `status` instead of drawn."""

    def __init__(self) -> None:
        self.phase_name = ""
        self.total: int | None = None
        self.done = 0

    def phase(self, name: str, total: int | None) -> None:
        self.phase_name, self.total, self.done = name, total, 0

    def advance(self, n: int = 1) -> None:
        self.done += n

    def note(self, message: str) -> None:
        log.info("%s", message)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase_name, "done": self.done, "total": self.total}


class Reindexer:
    """One worker thread; requests coalesce into at most one pending run."""

    def __init__(self, run: Callable[[RunProgress, Job], Any]):
        self._run = run
        self._cond = threading.Condition()
        self._pending: Job | None = None
        self._running: Job | None = None
        self._last: Job | None = None
        self._progress: RunProgress | None = None
        self._next_id = 1
        self._stopping = False
        self.runs = 0
        self._thread = threading.Thread(target=self._loop, name="llmc-reindex", daemon=True)
        self._thread.start()

    def request(self, reason: str, paths: Sequence[str] | None = None) -> Job:
        """Queue a run (``paths`` None: everything); return the job that will cover it."""
        with self._cond:
            if self._pending is None:
                self._pending = Job(self._next_id)
                self._next_id += 1
            job = self._pending
            job.reasons.append(reason)
            if paths is None:
                job.all_paths = True
            elif not job.all_paths:
                job.paths.update(paths)
                if len(job.paths) > MAX_JOB_PATHS:  # bounded: the run walks the tree anyway
                    job.all_paths, job.paths = True, set()
            self._cond.notify_all()
            return job

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                job, self._pending = self._pending, None
                self._running = job
                self._progress = RunProgress()
                progress = self._progress
            job.started_at = time.time()
            log.info(
                "reindex #%d (%s, %s)",
                job.id,
                ", ".join(loggable(r) for r in sorted(set(job.reasons))),
                "all files" if job.all_paths else f"{len(job.paths)} changed paths",
            )
            try:
                job.summary = self._run(progress, job).to_json()
                log.info(
                    "reindex #%d: %d indexed, %d removed, generation %s in %.2fs",
                    job.id,
                    job.summary["files_indexed"],
                    job.summary["files_removed"],
                    job.summary["generation"],
                    job.summary["seconds"],
                )
            except Exception as e:  # noqa: BLE001 - the daemon outlives a failed run
                job.error = str(e) or type(e).__name__
                log.warning("reindex #%d failed: %s", job.id, job.error, exc_info=True)
            job.finished_at = time.time()
            with self._cond:
                self._running = None
                self._progress = None
                self._last = job
                self.runs += 1
                self._cond.notify_all()
            job.done.set()

    def has_pending(self) -> bool:
        """True while a request waits for the next run (the running one may stop early)."""
        with self._cond:
            return self._pending is not None

    def idle(self) -> bool:
        with self._cond:
            return self._pending is None and self._running is None

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending is not None or self._running is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def to_json(self) -> dict[str, Any]:
        with self._cond:
            running = self._running.to_json() if self._running else None
            if running is not None and self._progress is not None:
                running["progress"] = self._progress.to_json()
            return {
                "pending": self._pending.to_json() if self._pending else None,
                "running": running,
                "last": self._last.to_json() if self._last else None,
                "runs": self.runs,
            }


def backlog(root: Path) -> int:
    """Spans without a vector now (0 without an index)."""
    from llmc.index.backfill import coverage
    from llmc.store.db import Store

    try:
        store = Store(db_path(root), readonly=True)
    except LlmcError:
        return 0
    try:
        return coverage(store).missing
    finally:
        store.close()


# -- the engine -----------------------------------------------------------------------------------


__all__ = [
    "EMBED_CHUNK",
    "MAX_JOB_PATHS",
    "VECTORS_REASON",
    "Job",
    "LockedEmbedder",
    "Reindexer",
    "RunProgress",
    "backlog",
    "loggable",
]
