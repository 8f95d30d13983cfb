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
from collections.abc import Callable
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


class Tee:
    """One ``Progress`` that tells several (the terminal's and ``.llmc/progress.json``)."""

    def __init__(self, *sinks: Progress):
        self.sinks = sinks

    def phase(self, name: str, total: int | None) -> None:
        for s in self.sinks:
            s.phase(name, total)

    def advance(self, n: int = 1) -> None:
        for s in self.sinks:
            s.advance(n)

    def note(self, message: str) -> None:
        for s in self.sinks:
            s.note(message)


class SaySearchable:
    """Says "searchable now" when a run that parsed something reaches its graph phase:
    BM25 and exact symbols answer from then on, while the graph (seconds on a large tree)
    and the vectors follow."""

    LINE = "searchable now: BM25 and exact symbols answer; updating the graph"

    def __init__(self, inner: Progress):
        self.inner = inner
        self._parsed = False
        self._said = False

    def phase(self, name: str, total: int | None) -> None:
        if name == "parsing" and total:
            self._parsed = True
        elif name == "graph" and self._parsed and not self._said:
            self._said = True
            self.inner.note(self.LINE)
        self.inner.phase(name, total)

    def advance(self, n: int = 1) -> None:
        self.inner.advance(n)

    def note(self, message: str) -> None:
        self.inner.note(message)


class PhaseClock:
    """The current phase, how far it is and when it should end: the rate so far in this
    phase (items per second since it began), once ``ETA_AFTER_S`` seconds and one item
    have passed, so the first slow item does not promise hours."""

    ETA_AFTER_S = 1.0

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.name = ""
        self.total: int | None = None
        self.done = 0
        self.started = clock()

    def phase(self, name: str, total: int | None) -> None:
        self.name, self.total, self.done, self.started = name, total, 0, self.clock()

    def advance(self, n: int = 1) -> None:
        self.done += n

    def elapsed(self) -> float:
        return max(0.0, self.clock() - self.started)

    def eta(self) -> float | None:
        """Seconds left in this phase, or None when there is no total or no rate yet."""
        elapsed = self.elapsed()
        if not self.total or self.done <= 0 or elapsed < self.ETA_AFTER_S:
            return None
        left = max(0, self.total - self.done)
        return left * elapsed / self.done

    def line(self) -> str:
        """``parsing: 5,200 of 17,729 (29%), 40s elapsed, eta 1m 36s``."""
        if self.total:
            pct = min(100, 100 * self.done // max(self.total, 1))
            head = f"{self.name}: {self.done:,} of {self.total:,} ({pct}%)"
        else:
            head = f"{self.name}: {self.done:,} done" if self.done else f"{self.name}"
        out = f"{head}, {duration(self.elapsed())} elapsed"
        eta = self.eta()
        return out + (f", eta {duration(eta)}" if eta is not None else "")

    def to_json(self) -> dict:
        eta = self.eta()
        return {
            "phase": self.name,
            "done": self.done,
            "total": self.total,
            "elapsed_s": round(self.elapsed(), 1),
            "eta_s": round(eta, 1) if eta is not None else None,
        }


def duration(seconds: float) -> str:
    """``9s``, ``1m 36s``, ``2h 05m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


class LineProgress:
    """Progress as plain lines, for a stderr that is not a terminal (a log, CI, a hook):
    one line per phase every ``every_s`` seconds while it runs, with its ETA, so a phase
    shorter than that prints nothing; notes as they come. ``write`` prints one line."""

    def __init__(
        self,
        write: Callable[[str], None],
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.write = write
        self.every_s = every_s
        self.clock = PhaseClock(clock)
        self._last = self.clock.started

    def phase(self, name: str, total: int | None) -> None:
        self._maybe_final()
        self.clock.phase(name, total)
        self._last = self.clock.started

    def advance(self, n: int = 1) -> None:
        self.clock.advance(n)
        now = self.clock.clock()
        if now - self._last >= self.every_s:
            self._last = now
            self.write(self.clock.line())

    def note(self, message: str) -> None:
        self.write(message)

    def close(self) -> None:
        self._maybe_final()

    def _maybe_final(self) -> None:
        """The end of a phase that printed a line while it ran."""
        if self.clock.name and self._last > self.clock.started:
            self.write(
                f"{self.clock.name}: {self.clock.done:,} in {duration(self.clock.elapsed())}"
            )
            self._last = self.clock.started


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
    "LineProgress",
    "PhaseClock",
    "Progress",
    "SaySearchable",
    "Silent",
    "Tee",
    "StateGuard",
    "database_cause",
    "duration",
    "failure_line",
    "lap",
    "mark",
]
