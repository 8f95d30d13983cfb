"""One writer at a time: an exclusive ``flock`` on ``.llmc/index.lock``.

The lock file holds the holder's pid and command, so a second writer can say who it is
waiting for. The kernel drops the lock when its holder dies (kill -9 included), so a
stale lock file never blocks anyone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import time
from pathlib import Path

from llmc.errors import IndexLockedError
from llmc.paths import open_state_file, printable_name

log = logging.getLogger(__name__)


class IndexLock:
    """An exclusive ``flock`` on ``path``, waited for up to ``timeout`` seconds (or until
    ``stop()`` says so); ``on_wait`` hears the one line saying who holds it."""

    def __init__(
        self,
        path: Path,
        timeout: float = 300.0,
        on_wait=None,
        what: str = "the index writer lock",
        stop=None,
    ):
        self.path = Path(path)
        self.timeout = timeout
        self.on_wait = on_wait
        self.what = what
        self.stop = stop
        self._fd: int | None = None

    def holder(self) -> str:
        try:
            with os.fdopen(open_state_file(self.path, os.O_RDONLY), "rb") as fh:
                text = fh.read(512).decode("utf-8", "replace")
        except OSError:
            return "unknown process"
        return printable_name(text.strip()) or "unknown process"

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_state_file(self.path, os.O_RDWR | os.O_CREAT)  # never through a link
        deadline = time.monotonic() + self.timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline or (self.stop is not None and self.stop()):
                    os.close(fd)
                    raise IndexLockedError(
                        f"{self.what} is held by {self.holder()} "
                        f"(waited {self.timeout:.0f}s; lock {self.path})"
                    ) from None
                if not told:
                    told = True
                    message = f"waiting for {self.what} held by {self.holder()}"
                    if self.on_wait:  # said once: through the run's progress, else the log
                        self.on_wait(message)
                    else:
                        log.warning(message)
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {' '.join(sys.argv[:3])}".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> IndexLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


__all__ = ["IndexLock"]
