"""Where a repository's daemon lives in `.llmc/`, and the lock that makes it one.

The daemon holds an exclusive ``flock`` on ``.llmc/daemon.lock`` for its whole life. The
kernel drops that lock when the process dies, even by SIGKILL, so "is a daemon running?"
is "is the lock held?", never "does the pid file exist?". A pid file or socket left by a
killed daemon is stale exactly when the lock is free, and the next start removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llmc.paths import state_dir

SOCKET_NAME = "daemon.sock"
PID_NAME = "daemon.pid"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
TOKEN_NAME = "daemon.token"
INFO_NAME = "daemon.json"
# sun_path is 108 bytes on Linux, 104 on macOS; keep a margin.
MAX_SOCKET_PATH = 100


def socket_path(root: Path) -> Path:
    """``.llmc/daemon.sock``, or a short path in the temp dir when that one is too long.

    The choice depends only on ``root``, so every client computes the same path.
    """
    path = state_dir(root) / SOCKET_NAME
    if len(os.fsencode(str(path))) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.blake2b(os.fsencode(str(root)), digest_size=8).hexdigest()
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    return base / f"llmc-{os.getuid()}-{digest}.sock"


def pid_path(root: Path) -> Path:
    return state_dir(root) / PID_NAME


def lock_file(root: Path) -> Path:
    return state_dir(root) / LOCK_NAME


def log_path(root: Path) -> Path:
    return state_dir(root) / LOG_NAME


def token_path(root: Path) -> Path:
    return state_dir(root) / TOKEN_NAME


def info_path(root: Path) -> Path:
    return state_dir(root) / INFO_NAME


class DaemonLock:
    """The single-instance lock. ``acquire()`` returns False when another daemon holds it."""

    def __init__(self, root: Path):
        self.path = lock_file(root)
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    @property
    def held(self) -> bool:
        return self._fd is not None

    def owns_path(self) -> bool:
        """True while the lock file on disk is the one we hold (not deleted and recreated)."""
        if self._fd is None:
            return False
        try:
            return os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_held(root: Path) -> bool:
    """True while some daemon process holds ``root``'s lock."""
    path = lock_file(root)
    if not path.exists():
        return False
    probe = DaemonLock(root)
    if probe.acquire():
        probe.release()
        return False
    return True


def read_pid(root: Path) -> int | None:
    try:
        return int(pid_path(root).read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to a file only its owner can read (mode 0600)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Stale:
    """What a dead daemon left behind."""

    pid: int | None
    files: tuple[str, ...]


def stale_files(root: Path) -> Stale | None:
    """Leftovers of a daemon that is no longer running (None when none, or one runs)."""
    if lock_held(root):
        return None
    found = [
        p for p in (pid_path(root), socket_path(root), info_path(root), token_path(root))
        if p.exists() or p.is_symlink()
    ]  # fmt: skip
    if not found:
        return None
    return Stale(read_pid(root), tuple(str(p) for p in found))


def remove_runtime_files(root: Path) -> list[str]:
    """Remove the pid file, socket, info and token files; return what was removed."""
    removed = []
    for p in (pid_path(root), socket_path(root), info_path(root), token_path(root)):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(str(p))
    return removed


def read_info(root: Path) -> dict | None:
    """``.llmc/daemon.json``: pid, socket, TCP address, start time of the running daemon."""
    try:
        data = json.loads(info_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


__all__ = [
    "DaemonLock",
    "Stale",
    "info_path",
    "lock_held",
    "log_path",
    "pid_path",
    "read_info",
    "read_pid",
    "remove_runtime_files",
    "socket_path",
    "stale_files",
    "token_path",
    "write_private",
]
