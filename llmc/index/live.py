"""What a run in progress tells other processes: ``.llmc/progress.json``.

`llmc status` must answer while another process indexes, without waiting for its lock and
without guessing from half-written files. The run (`llmc index`, the background embedder,
the daemon's reindexer) wraps its ``Progress`` in a ``LiveFile``: the phase, how far, its
ETA and the run's pid, rewritten atomically (temp + rename, 0600) at most every
``EVERY_S`` seconds and at each phase change, and removed when the run ends. A reader
trusts it only while its pid lives (``read_live``): a killed run's file is ignored, and the
next run overwrites it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmc.index.progress import PhaseClock
from llmc.paths import open_state_file, state_dir

log = logging.getLogger(__name__)

LIVE_FILE = "progress.json"
EVERY_S = 0.5
MAX_BYTES = 64 * 1024


def live_path(root: Path) -> Path:
    return state_dir(root) / LIVE_FILE


class LiveFile:
    """A ``Progress`` that publishes the run's progress in ``.llmc/progress.json``. A write
    that fails (a full disk, a deleted ``.llmc/``) is skipped: progress is never worth
    failing a run for."""

    def __init__(
        self,
        root: Path,
        what: str,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
    ):
        self.path = live_path(root)
        self.what = what
        self.every_s = every_s
        self.phases = PhaseClock(clock)
        self.started_at = time.time()
        self._written = -1e18
        self._notes: list[str] = []

    def phase(self, name: str, total: int | None) -> None:
        self.phases.phase(name, total)
        self._write(force=True)

    def advance(self, n: int = 1) -> None:
        self.phases.advance(n)
        self._write()

    def note(self, message: str) -> None:
        self._notes = [*self._notes[-2:], message[:500]]
        self._write(force=True)

    def close(self) -> None:
        """The run ended: remove the file (only if it is still this process's)."""
        live = read_live(self.path.parent.parent, check_pid=False)
        if live is not None and live.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                self.path.unlink()

    def __enter__(self) -> LiveFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, force: bool = False) -> None:
        now = self.phases.clock()
        if not force and now - self._written < self.every_s:
            return
        self._written = now
        state = {
            "pid": os.getpid(),
            "what": self.what,
            "command": " ".join(sys.argv[:3]),
            "started_at": self.started_at,
            "updated_at": time.time(),
            **self.phases.to_json(),
            "line": self.phases.line(),
            "notes": self._notes,
        }
        tmp = self.path.with_name(f".{LIVE_FILE}.{os.getpid()}.tmp")
        try:
            fd = open_state_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state, f)
            os.replace(tmp, self.path)
        except OSError as e:
            log.debug("progress file not written: %s", e)
            with contextlib.suppress(OSError):
                tmp.unlink()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet waited for by its parent, does not:
    a background embedder started from a long-lived process is one until that process
    waits or exits)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): signal 0 is the answer
    return state not in (b"Z", b"X")


def read_live(root: Path, check_pid: bool = True) -> dict[str, Any] | None:
    """The progress a running run published, or None (no run, a dead one's file, a file
    that is not what a run writes)."""
    path = live_path(root)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return None
    if check_pid and not pid_alive(data["pid"]):
        return None
    return data


__all__ = ["LIVE_FILE", "LiveFile", "live_path", "pid_alive", "read_live"]
