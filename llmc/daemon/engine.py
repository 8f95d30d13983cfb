"""The daemon's work, apart from any transport: warm search, graph queries, reindexing.

``Engine`` keeps one ``Searcher`` per effective search config (models load once per
process) and a ``Reindexer`` (``reindex.py``): a single worker thread that runs
``Indexer.run()``, the very code path of `llmc index`, with the writer lock it takes
itself, requests coalesced into at most one pending run. Searches never wait for the
writer; they see a run's data once it commits.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmc.config import Config, load_config
from llmc.daemon.reindex import (
    Job,
    LockedEmbedder,
    Reindexer,
    RunProgress,
    backlog,
)
from llmc.errors import IndexMissingError, LlmcError
from llmc.paths import db_path, lexical_path
from llmc.request_config import DAEMON_SECTIONS, request_overrides

log = logging.getLogger(__name__)

SEARCHER_CACHE = 4
MID_RUN_WARNING = "the lexical index reflects generation"  # llmc.search's stale-BM25 warning
# More spans than this without a vector: a run updates its graph before the backfill (a
# small run otherwise embeds first, Indexer._graph_after, and the backfill embeds them all)
GRAPH_FIRST_BACKLOG = 2000


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
        group: str = "span",
    ) -> dict[str, Any]:
        """The `llmc search --json` object, ``Searcher.answer``'s (search/answer.py: results
        of deleted files dropped; ``group="file"``: the file answer). ``extras`` adds what a
        human display needs (``Answer.to_json``). Mid-run, the one daemon-only warning."""
        searcher = self.searcher(config)
        with self.model_lock:
            answer = searcher.answer(query, k=k, route=route, explain=explain, group=group)
        out = answer.to_json(extras)
        warnings = list(out.get("warnings", []))
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
    def _index(self, progress: RunProgress, job: Job) -> Any:
        """One reindex job; then, with ``team.publish``, a publish of what it left (a run
        that leaves vectors to embed is published by the backfill that finishes them)."""
        summary = self._index_run(progress, job)
        from llmc.team.publish import publish_after_index

        publish_after_index(self.root, self.cfg, f"daemon reindex #{job.id}")
        return summary

    def _index_run(self, progress: RunProgress, job: Job) -> Any:
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


__all__ = ["Engine", "client_config"]
