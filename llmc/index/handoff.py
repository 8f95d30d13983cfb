"""Who embeds what an `llmc index` run left without a vector, and when.

A one-file edit writes a few dozen spans. Embedding them takes a tenth of a second; loading
the embedding model for them takes seconds (torch and sentence-transformers imports, the
weights), most of a small run's wall time; and on a large tree the graph update is most of
the rest (it re-resolves and rewrites ``rag_graph.json`` whole: ~25 s for one file of the
nine-project tree, 24k files). So a run in ``later`` mode commits the spans, BM25 and exact
symbols, says it is searchable, and hands the graph update and the new vectors on (until
then the graph answers from the previous run: `llmc status` says "graph behind"):

- to this repository's running daemon, whose model is loaded (one request; the daemon
  embeds only what is missing, ``Indexer.backfill``, or runs ``Indexer.run`` when the
  graph is behind too);
- else to a detached process at the lowest CPU priority (``llmc index --vectors-only``,
  ``spawn_background``). It writes each chunk under the writer lock like every backfill:
  a run racing it waits one chunk commit, a kill loses at most the chunk in flight
  (docs/reliability.md), and the next `llmc index` embeds whatever it left. With the graph
  behind, its pass is a whole run (``Indexer.run``: the walk finds nothing new, the graph
  catches up by content hash, then the backfill), under the writer lock like any run.

``auto`` (the default) is ``later`` when a person is at the terminal or a daemon runs, and
at most ``BACKGROUND_MAX_SPANS`` spans miss a vector; otherwise the vectors are embedded
here, before the command returns (a script, a hook or a test then sees the complete index;
a cold index is minutes of work the person asked for, with progress). Search meanwhile
ranks the spans without a vector by BM25 and exact symbols and says so (``dense: 99% of
spans embedded``, in ``--explain`` and `llmc status`).

One background embedder at a time: it holds ``.llmc/backfill.lock``. A second one, or a run
that would start one while it runs, leaves ``.llmc/backfill.want`` instead; the holder
removes that mark before each pass and looks for it again after letting go of the lock, so
no hand-off is lost between its last pass and its exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from llmc.config import Config
from llmc.index.indexer import Indexer, IndexReport
from llmc.index.progress import Progress
from llmc.paths import open_state_file, state_dir

log = logging.getLogger(__name__)

MODES = ("auto", "here", "later", "none")
BACKGROUND_MAX_SPANS = 2000  # ``auto``: more missing vectors than this are embedded here
BACKFILL_LOCK = "backfill.lock"
BACKFILL_WANT = "backfill.want"
BACKFILL_LOG = "backfill.log"
LOG_ROTATE_BYTES = 1024 * 1024
LOCK_WAIT_S = 1.0
MAX_PASSES = 50  # a background embedder's passes before it leaves the rest to the next run


@dataclass(frozen=True)
class Handoff:
    """Where the vectors a run left went: ``daemon`` or ``background`` (with its pid, or
    the pid of the embedder already running, which takes them too); ``graph``: the graph
    update went with them."""

    where: str
    spans: int
    pid: int | None = None
    graph: bool = False

    def line(self) -> str:
        what = f"embedding {self.spans:,} spans" if self.spans else "nothing to embed"
        if self.graph:
            what = "updating the graph and " + what if self.spans else "updating the graph"
        if self.where == "daemon":
            return f"the daemon is {what}"
        who = f"pid {self.pid}" if self.pid else "a background process"
        return f"{what} in the background ({who}, lowest CPU priority; `llmc status` says how far)"

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "spans": self.spans, "pid": self.pid, "graph": self.graph}


class Daemon(Protocol):
    """How a run reaches this repository's daemon (``llmc.daemon.control.DaemonLink``; the
    index layer does not import the daemon's modules)."""

    def running(self) -> bool: ...

    def embed(self) -> bool:
        """Ask the daemon to embed the missing vectors; True when it took the job."""
        ...


class NoDaemon:
    """No daemon to hand anything to."""

    def running(self) -> bool:
        return False

    def embed(self) -> bool:
        return False


def index_and_handoff(
    root: Path,
    cfg: Config,
    progress: Progress,
    full: bool = False,
    vectors: str = "auto",
    interactive: bool = False,
    daemon: Daemon | None = None,
) -> tuple[IndexReport, Handoff | None]:
    """`llmc index`: the run, then its vectors here or handed on (see the module doc)."""
    if vectors not in MODES:
        raise ValueError(f"vectors must be one of {', '.join(MODES)}, got {vectors!r}")
    daemon = daemon or NoDaemon()
    mode = vectors
    if mode == "auto":
        mode = "later" if interactive or daemon.running() else "here"
    if mode == "here":
        return Indexer(root, cfg, progress).run(full=full, vectors=True), None
    if mode == "none":
        return Indexer(root, cfg, progress).run(full=full, vectors=False), None
    first = cfg
    if cfg.graph.enabled:  # the graph follows with the vectors
        first = cfg.with_values({"graph.enabled": False}, "llmc index --vectors later")
    indexer = Indexer(root, first, progress)
    report = indexer.run(full=full, vectors=False)
    root = Path(indexer.root)
    missing = report.vectors.missing if report.vectors is not None else 0
    graph = cfg.graph.enabled and graph_behind(root)
    if missing == 0 and not graph:
        report.backfill = "done"
        return report, None
    if vectors == "auto" and missing > BACKGROUND_MAX_SPANS:
        # Minutes of embedding the person asked for: here, with progress (the walk finds
        # nothing new; the graph catches up first)
        merge_backfill(report, Indexer(root, cfg, progress).run(vectors=True))
        return report, None
    if daemon.embed():
        report.backfill = "daemon"
        return report, Handoff("daemon", missing, graph=graph)
    pid = spawn_background(root)
    report.backfill = "background"
    return report, Handoff("background", missing, pid, graph=graph)


def graph_behind(root: Path) -> bool:
    """Whether ``rag_graph.json`` names an older generation than the store (or is missing)."""
    from llmc.errors import IndexMissingError
    from llmc.index.status import graph_generation
    from llmc.paths import db_path
    from llmc.store.db import Store

    try:
        store = Store(db_path(root), readonly=True)
    except IndexMissingError:
        return False
    try:
        generation = store.generation
    finally:
        store.close()
    return generation > 0 and graph_generation(root) < generation


def merge_backfill(report: IndexReport, later: IndexReport) -> None:
    """``later``'s vectors (a backfill after the run) into the run's ``report``."""
    report.embedded += later.embedded
    report.embed_cached += later.embed_cached
    report.embed_seconds += later.embed_seconds
    report.model_changed = report.model_changed or later.model_changed
    report.vectors = later.vectors
    report.backfill = later.backfill
    for mine, theirs in ((report.timings, later.timings), (report.cpu_timings, later.cpu_timings)):
        for phase, seconds in theirs.items():
            mine[phase] = round(mine.get(phase, 0.0) + seconds, 4)
    report.seconds += later.seconds


# -- the background embedder ----------------------------------------------------------------------
def _want(root: Path) -> Path:
    return state_dir(root) / BACKFILL_WANT


def _mark_wanted(root: Path) -> None:
    fd = open_state_file(_want(root), os.O_WRONLY | os.O_CREAT)
    os.close(fd)


def _try_lock(root: Path, wait_s: float = LOCK_WAIT_S) -> int | None:
    """The background embedder's lock (a file descriptor), or None while another holds it
    (tried for ``wait_s``: `llmc status` looks at the lock by taking it shared for an
    instant, which must not send an embedder away)."""
    fd = open_state_file(state_dir(root) / BACKFILL_LOCK, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def _unlock(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def embedder_pid(root: Path) -> int | None:
    """The pid of the background embedder running now, if one is."""
    path = state_dir(root) / BACKFILL_LOCK
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def python_m() -> list[str]:
    """``python -m`` that imports llmc from where this process did, never from the current
    directory: a repository may hold a ``llmc/`` package of its own (this one does), and
    its content is untrusted. ``-P`` (3.11+) leaves the current directory off ``sys.path``;
    before 3.11 the caller runs the child in ``.llmc/``, which holds only llmc's files."""
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m"]


def spawn_background(root: Path) -> int | None:
    """Start a detached, lowest-priority `llmc index --vectors-only` for ``root``, unless
    one runs already (it is told, and its pid returned). Its output goes to
    ``.llmc/backfill.log``."""
    _mark_wanted(root)
    running = embedder_pid(root)
    if running is not None:
        return running if running > 0 else None
    logfile = state_dir(root) / BACKFILL_LOG
    with contextlib.suppress(OSError):
        if logfile.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(logfile, logfile.with_name(BACKFILL_LOG + ".1"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = open_state_file(logfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [*python_m(), "llmc", "index", str(root), "--vectors-only", "--nice"],
            cwd=state_dir(root),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,  # a closed terminal does not stop it
        )
    finally:
        os.close(out)
    # Never waited for (it outlives this process): no "still running" warning at exit
    proc.returncode = 0
    return proc.pid


def embed_missing(
    root: Path,
    cfg: Config,
    progress: Progress,
    stop: Callable[[], bool] | None = None,
) -> IndexReport | None:
    """Embed every span without a vector, as the one background embedder (see the module
    doc); None when another one runs (it will take them: the mark says so)."""
    root = Path(root).resolve()
    fd = _try_lock(root)
    if fd is None:
        _mark_wanted(root)
        return None
    report: IndexReport | None = None
    try:
        for _ in range(MAX_PASSES):
            os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
            with contextlib.suppress(FileNotFoundError):
                _want(root).unlink()
            started = time.perf_counter()
            indexer = Indexer(root, cfg, progress)
            if cfg.graph.enabled and graph_behind(root):
                done = indexer.run(vectors=True, stop=stop)  # the graph, then the vectors
            else:
                done = indexer.backfill(stop)
            log.info(
                "embedded %d spans (%d from the cache) in %.1fs",
                done.embedded,
                done.embed_cached,
                time.perf_counter() - started,
            )
            if report is None:
                report = done
            else:
                merge_backfill(report, done)
            if done.backfill != "done":
                break
            if _want(root).exists():
                continue
            # Let go, then look once more: a run that found the lock held just now left
            # its mark before looking, so it is seen here, or it sees the lock free.
            _unlock(fd)
            fd = None
            if not _want(root).exists():
                break
            fd = _try_lock(root)
            if fd is None:
                break  # another embedder took over, mark and all
    finally:
        if fd is not None:
            _unlock(fd)
    return report


__all__ = [
    "BACKGROUND_MAX_SPANS",
    "MODES",
    "Daemon",
    "Handoff",
    "NoDaemon",
    "embed_missing",
    "embedder_pid",
    "graph_behind",
    "index_and_handoff",
    "merge_backfill",
    "python_m",
    "spawn_background",
]
