"""What an index run reports as it goes and what stops it: progress, phase timings, its
one-line failures, and the state directory it must not lose.

Shared by the indexer (the first phase) and the backfill (the vectors), so neither
imports the other for them.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path
from typing import Protocol

from llmc.errors import StoreError
from llmc.paths import state_dir
from llmc.store.sqlite import database_error
from llmc.types import IndexSummary

log = logging.getLogger(__name__)


class Progress(Protocol):
    def phase(self, name: str, total: int | None) -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def note(self, message: str) -> None: ...


class Silent:
    """A ``Progress`` that shows nothing; notes go to the log."""

    def phase(self, name: str, total: int | None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def note(self, message: str) -> None:
        log.info(message)


def mark() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def lap(summary: IndexSummary, phase: str, since: tuple[float, float]) -> tuple[float, float]:
    """Add the wall (``timings``) and, on an ``IndexReport``, CPU seconds (``cpu_timings``:
    this process's, so what a busy machine's other work costs is left out) since ``since``."""
    now = mark()
    summary.timings[phase] = round(summary.timings.get(phase, 0.0) + now[0] - since[0], 4)
    cpu = getattr(summary, "cpu_timings", None)
    if cpu is not None:
        cpu[phase] = round(cpu.get(phase, 0.0) + now[1] - since[1], 4)
    return now


def database_cause(exc: BaseException) -> BaseException | None:
    """The sqlite error behind ``exc`` (itself or its cause), if there is one."""
    for candidate in (exc, exc.__cause__):
        if candidate is not None and database_error(candidate):
            return candidate
    return None


def failure_line(root: Path, exc: BaseException) -> str:
    """One line for a run stopped by the file system or the database under ``.llmc/``."""
    if isinstance(exc, OSError) and exc.strerror:
        what = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        what = " ".join(str(exc).split())
    full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG)
    hint = " (is the disk full?)" if full or "full" in what or "I/O error" in what else ""
    return (
        f"indexing {root} stopped: {what}{hint}; what was committed stays searchable: "
        "run `llmc index` again once that is fixed"
    )


class StateGuard:
    """The ``.llmc/`` a run began with. Deleted (or replaced) under a run, the run stops
    with one line: writing on would fill files that no longer have a name, and re-creating
    the directory would leave an empty index that looks whole."""

    def __init__(self, root: Path):
        self.root = root
        self.path = state_dir(root)
        self.ident = _ident(self.path)  # None: there was none to lose

    def intact(self) -> bool:
        return self.ident is None or _ident(self.path) == self.ident

    def line(self) -> str:
        return (
            f"indexing {self.root} stopped: {self.path} was deleted during the run; "
            "run `llmc index` again to rebuild the index"
        )

    def check(self) -> None:
        if not self.intact():
            raise StoreError(self.line())


class GuardedLock:
    """The writer lock, checking the state directory before and after each acquire (taking
    the lock re-creates a deleted directory)."""

    def __init__(self, lock, guard: StateGuard):
        self.lock = lock
        self.guard = guard

    def __enter__(self) -> GuardedLock:
        self.guard.check()
        self.lock.acquire()
        try:
            self.guard.check()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


def _ident(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


__all__ = [
    "GuardedLock",
    "Progress",
    "Silent",
    "StateGuard",
    "database_cause",
    "failure_line",
    "lap",
    "mark",
]
