"""The daemon's work, apart from any transport: warm search, graph queries, reindexing.

``Engine`` keeps one ``Searcher`` per effective search config (models load once per
process) and a ``Reindexer``: a single worker thread that runs ``Indexer.run()``, the very
code path of `llmc index`, with the writer lock it takes itself. Requests coalesce: while a
run is in progress, every new request (watcher batch, hook, API call) joins one pending
run that starts after it, so a burst of any size costs at most one more run and no change
is lost. Searches never wait for the writer; they see a run's data once it commits.

The embedding model is shared by queries and the indexer. Its tokenizer is not safe to
call from two threads at once, so both take ``model_lock``: a query holds it for one
search, the indexer for one chunk of ``EMBED_CHUNK`` texts, so a large reindex delays a
query by one chunk at most.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmc.config import Config, load_config
from llmc.errors import IndexMissingError, LlmcError
from llmc.paths import db_path, lexical_path
from llmc.request_config import DAEMON_SECTIONS, request_overrides

log = logging.getLogger(__name__)

EMBED_CHUNK = 32
SEARCHER_CACHE = 4
MID_RUN_WARNING = "the lexical index reflects generation"  # llmc.search's stale-BM25 warning
MAX_JOB_PATHS = 20_000  # paths a pending run remembers; past that it is "all files"
# More spans than this without a vector: a run updates its graph before the backfill (a
# small run otherwise embeds first, Indexer._graph_after, and the backfill embeds them all)
GRAPH_FIRST_BACKLOG = 2000
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


class _Progress:
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

    def __init__(self, run: Callable[[_Progress, Job], Any]):
        self._run = run
        self._cond = threading.Condition()
        self._pending: Job | None = None
        self._running: Job | None = None
        self._last: Job | None = None
        self._progress: _Progress | None = None
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
                self._progress = _Progress()
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
def client_config(cfg: Config) -> dict[str, Any]:
    """The parts of ``cfg`` a client sends so the daemon searches with the same settings
    (lists become JSON arrays; the daemon compares values, so they round-trip). The daemon
    applies the query-time keys that differ and refuses the others when they differ
    (``config_refused``: the client then works in-process)."""
    return {k: v for k, v, _ in cfg.items() if k.split(".", 1)[0] not in DAEMON_SECTIONS}


def _rss() -> dict[str, int | None]:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak if os.uname().sysname == "Darwin" else peak * 1024
    rss = None
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    return {"rss_bytes": rss, "peak_rss_bytes": peak}


class Engine:
    """Search, graph queries, status and reindexing for one repository, kept warm."""

    def __init__(self, root: Path, cfg: Config, start_worker: bool = True):
        self.root = Path(root).resolve()
        self.cfg = cfg
        self.model_lock = threading.Lock()
        self.started_at = time.time()
        self._searchers: OrderedDict[tuple, Any] = OrderedDict()
        self._searchers_lock = threading.Lock()
        self._models: dict[str, dict[str, Any]] = {}
        self.ready = threading.Event()  # models loaded (or failed to)
        self.warm_error: str | None = None
        self.reindexer = Reindexer(self._index) if start_worker else None
        if start_worker:
            from llmc.graph import warm

            warm.enable()  # each reindex updates the graph from the last one's state in memory

    # -- config -----------------------------------------------------------------------------
    def reload_config(self) -> None:
        """Re-read the config files (the watcher calls this when llmc.toml changes)."""
        try:
            cfg = load_config(self.root)
        except LlmcError as e:
            log.warning("config not reloaded: %s", e)
            return
        self.cfg = cfg
        self._drop_searchers()
        log.info("config reloaded")

    def _effective(self, config: dict[str, Any] | None) -> tuple[tuple, Config]:
        """The daemon's config with a client's differing query-time values applied.

        Only ``request_config.QUERY_KEYS`` may differ (RequestConfigError otherwise): a
        request never names a host, path or model, so it never loads a model either."""
        if not config:
            return (), self.cfg
        diff = request_overrides(self.cfg, config)
        if not diff:
            return (), self.cfg
        cfg = self.cfg.with_values(diff, "request")
        return tuple((k, repr(v)) for k, v in sorted(diff.items())), cfg

    # -- search -----------------------------------------------------------------------------
    def searcher(self, config: dict[str, Any] | None = None) -> Any:
        from llmc.search import Searcher

        key, cfg = self._effective(config)
        with self._searchers_lock:
            found = self._searchers.get(key)
            if found is not None:
                self._searchers.move_to_end(key)
                return found
            searcher = Searcher(self.root, cfg)
            self._searchers[key] = searcher
            while len(self._searchers) > SEARCHER_CACHE:
                _, old = self._searchers.popitem(last=False)
                old.close()
            return searcher

    def _drop_searchers(self) -> None:
        with self._searchers_lock:
            old = list(self._searchers.values())
            self._searchers.clear()
        for s in old:
            s.close()

    def search(
        self,
        query: str,
        k: int | None = None,
        route: str | None = None,
        explain: bool = False,
        config: dict[str, Any] | None = None,
        extras: bool = False,
    ) -> dict[str, Any]:
        """The `llmc search --json` object; results of files deleted since are dropped.

        ``extras`` adds what a human display needs beyond the JSON: ``highlight_terms``
        and, per result, ``span_id``, ``qualname``, ``category``, ``snippet_start_line``.
        """
        searcher = self.searcher(config)
        with self.model_lock:
            response = searcher.search(query, k=k, route=route, explain=explain)
        out = response.to_json()
        if extras:
            out["highlight_terms"] = list(response.highlight_terms)
            for r, res in zip(out["results"], response.results, strict=True):
                r.update(
                    span_id=res.span_id,
                    qualname=res.qualname,
                    category=res.category,
                    snippet_start_line=res.snippet_start_line,
                )
        warnings = list(out.get("warnings", []))
        kept = [r for r in out["results"] if (self.root / r["path"]).is_file()]
        if len(kept) != len(out["results"]):
            dropped = len(out["results"]) - len(kept)
            out["results"] = kept
            warnings.append(
                f"dropped {dropped} result(s) of files deleted since the last index run"
            )
        if self.reindexer is not None and not self.reindexer.idle():
            # Mid-run the lexical index trails the store by design; say so plainly.
            mid_run = [w for w in warnings if w.startswith(MID_RUN_WARNING)]
            if mid_run:
                warnings = [w for w in warnings if w not in mid_run]
                warnings.append("an index run is in progress; results may trail the newest edits")
        out["warnings"] = warnings
        return out

    def warm(self) -> None:
        """Load the models and open the index now, not on the first query."""
        try:
            from llmc.models.embedder import embedder_from_config

            if db_path(self.root).exists():
                searcher = self.searcher()
                with self.model_lock:
                    searcher.warm()
            if self.cfg.search.dense:
                for category in ("code", "doc"):
                    started = time.perf_counter()
                    e = embedder_from_config(self.cfg.embedding, category)
                    self._models[category] = {
                        "model": e.model_id,
                        "device": getattr(getattr(e, "choice", None), "reason", "unknown"),
                        "load_seconds": round(getattr(e, "load_seconds", 0.0), 2),
                        "warm_seconds": round(time.perf_counter() - started, 3),
                    }
            self.warm_error = None
        except IndexMissingError:
            pass  # the first index run creates it; searches will open it then
        except Exception as e:  # noqa: BLE001 - a missing model degrades, never kills, the daemon
            self.warm_error = str(e) or type(e).__name__
            log.warning("warm-up failed: %s", self.warm_error)
        finally:
            self.ready.set()

    # -- indexing ---------------------------------------------------------------------------
    def _index(self, progress: _Progress, job: Job) -> Any:
        from llmc.index.indexer import Indexer

        cfg = self.cfg

        # A new edit waits for one embedding batch (EMBED_CHUNK texts), not the backfill:
        # the next run resumes it.
        stop = self.reindexer.has_pending if self.reindexer else None

        def embedder(category: str) -> LockedEmbedder:
            from llmc.models.embedder import embedder_from_config

            inner = embedder_from_config(cfg.embedding, category)
            return LockedEmbedder(inner, self.model_lock, stop=stop)

        from llmc.index.live import LiveFile  # `llmc status` in another process sees the run
        from llmc.index.progress import Tee

        fresh = not (db_path(self.root).exists() and lexical_path(self.root).is_dir())
        with LiveFile(self.root, f"daemon reindex #{job.id}") as live:
            indexer = Indexer(self.root, cfg, Tee(progress, live), embedder_factory=embedder)
            if job.vectors_only and not fresh:
                from llmc.index.handoff import graph_behind

                if not (cfg.graph.enabled and graph_behind(self.root)):
                    return indexer.backfill(stop=stop)  # else: the graph, then the vectors
            if backlog(self.root) <= GRAPH_FIRST_BACKLOG:
                summary = indexer.run(stop=stop)
            else:  # the graph first: a long backfill must not hold this run's graph back
                from llmc.index.handoff import merge_backfill

                summary = indexer.run(vectors=False, stop=stop)
                merge_backfill(summary, indexer.backfill(stop=stop))
        if fresh or summary.model_changed:
            # A Searcher decides once, when it opens, whether BM25 and dense search are on
            # (lexical index present, vectors from the configured model); both answers may
            # have changed with this run, so open anew.
            self._drop_searchers()
        return summary

    def reindex(
        self, reason: str, paths: Sequence[str] | None = None, wait: float | None = None
    ) -> dict[str, Any]:
        if self.reindexer is None:
            raise LlmcError("this engine does not index")
        job = self.reindexer.request(reason, paths)
        if wait:
            job.done.wait(wait)
        out = {"job": job.id, "queued": True, "done": job.done.is_set()}
        if job.done.is_set():
            out["summary"] = job.summary
            out["error"] = job.error
        return out

    # -- graph ------------------------------------------------------------------------------
    def where_used(self, symbol: str, min_confidence: float = 0.5, text: bool = False) -> dict:
        from llmc.daemon import graphapi

        return graphapi.where_used(self.root, symbol, min_confidence, text)

    def deps(self, target: str, depth: int | None = None, text: bool = False) -> dict:
        from llmc.daemon import graphapi

        return graphapi.deps(self.root, self.cfg, target, depth, text)

    def neighbors(
        self, target: str, edge_types: list[str] | None, direction: str, text: bool = False
    ) -> dict:
        from llmc.daemon import graphapi

        return graphapi.neighbors(self.root, target, edge_types, direction, text)

    def graph_stats(self, top: int = 10, text: bool = False) -> dict:
        from llmc.daemon import graphapi

        return graphapi.stats(self.root, top, text)

    # -- status -----------------------------------------------------------------------------
    def index_info(self) -> dict[str, Any]:
        from llmc.store.db import Store

        path = db_path(self.root)
        if not path.exists():
            return {"exists": False}
        try:
            store = Store(path, readonly=True)
        except LlmcError as e:
            return {"exists": True, "error": str(e)}
        try:
            counts = store.counts()
            indexed_at = store.get_meta("indexed_at")
            return {
                "exists": True,
                "generation": store.generation,
                "files": counts["files"],
                "spans": counts["spans"],
                "indexed_at": float(indexed_at) if indexed_at else None,
            }
        finally:
            store.close()

    def status(self) -> dict[str, Any]:
        from llmc import __version__

        return {
            "root": str(self.root),
            "pid": os.getpid(),
            "version": __version__,
            "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 3),
            "ready": self.ready.is_set(),
            "warm_error": self.warm_error,
            "models": dict(self._models),
            "index": self.index_info(),
            "queue": self.reindexer.to_json() if self.reindexer else None,
            "memory": _rss(),
            "caches": self._cache_sizes(),
        }

    def _cache_sizes(self) -> dict[str, int]:
        """How many searchers, embedders and loaded models this process holds (each bounded)."""
        import sys

        with self._searchers_lock:
            out = {"searchers": len(self._searchers), "searchers_max": SEARCHER_CACHE}
        embedder = sys.modules.get("llmc.models.embedder")  # not imported: none loaded
        if embedder is not None:
            out["embedders"] = embedder.get_embedder.cache_info().currsize
            out["embedders_max"] = embedder.MAX_EMBEDDERS
        return out

    def close(self) -> None:
        if self.reindexer is not None:
            self.reindexer.stop()
        self._drop_searchers()


__all__ = [
    "Engine",
    "Job",
    "LockedEmbedder",
    "Reindexer",
    "client_config",
    "loggable",
]
