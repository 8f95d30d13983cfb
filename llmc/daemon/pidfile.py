"""Where a repository's daemon lives in `.llmc/`, and the lock that makes it one.

The daemon holds an exclusive ``flock`` on ``.llmc/daemon.lock`` for its whole life. The
kernel drops that lock when the process dies, even by SIGKILL, so "is a daemon running?"
is "is the lock held?", never "does the pid file exist?". A pid file or socket left by a
killed daemon is stale exactly when the lock is free, and the next start removes it.

The socket is ``.llmc/daemon.sock``, or, when that path is too long for ``sun_path``, a
file in a per-user directory of mode 0700 (``$XDG_RUNTIME_DIR/llmc/`` or
``<tmp>/llmc-<uid>/``). Another local user must never receive our queries, so before
binding and before connecting we check with ``lstat`` that this directory is a real
directory of ours that no one else can enter, and before connecting that the socket is
ours too (``check_socket``); the client also checks the peer's uid once connected.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import UnsafeSocketError
from llmc.paths import open_state_file, state_dir

SOCKET_NAME = "daemon.sock"
PID_NAME = "daemon.pid"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
TOKEN_NAME = "daemon.token"
INFO_NAME = "daemon.json"
# sun_path is 108 bytes on Linux, 104 on macOS; keep a margin.
MAX_SOCKET_PATH = 100


def private_socket_dir() -> Path:
    """This user's directory for sockets whose ``.llmc/`` path is too long (mode 0700)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "llmc"
    return Path(tempfile.gettempdir()) / f"llmc-{os.geteuid()}"


def socket_path(root: Path) -> Path:
    """``.llmc/daemon.sock``, or a short path in ``private_socket_dir()`` when that is too long.

    The choice depends only on ``root`` (and the environment), so every client of this
    user computes the same path.
    """
    path = state_dir(root) / SOCKET_NAME
    if len(os.fsencode(str(path))) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.blake2b(os.fsencode(str(root)), digest_size=8).hexdigest()
    return private_socket_dir() / f"{digest}.sock"


def _refuse(path: Path, why: str) -> UnsafeSocketError:
    return UnsafeSocketError(
        f"refusing to use the daemon socket {path}: {why}; another user could intercept "
        "or answer llmc's queries there (remove it, or set XDG_RUNTIME_DIR to a private "
        "directory)"
    )


def check_private_dir(path: Path) -> None:
    """Raise UnsafeSocketError unless ``path`` is a real directory, ours, mode ``0?00``.

    ``lstat``, so a symlink (which another user may point anywhere) is refused too.
    A missing directory raises FileNotFoundError.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, "its directory is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "its directory is not a directory")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"its directory is owned by uid {st.st_uid}, not {os.geteuid()}")
    if st.st_mode & 0o077:
        raise _refuse(path, f"its directory has mode {stat.S_IMODE(st.st_mode):04o}, not 0700")


def prepare_socket_dir(path: Path) -> None:
    """Before binding ``path``: make the private directory (0700) if missing, then check it.

    ``.llmc/`` is the repository's own directory, made by ``ensure_state_dir``; the
    server replaces whatever socket file is there, and creates it 0600.
    """
    if path.parent != private_socket_dir():
        return
    try:
        os.mkdir(path.parent, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise UnsafeSocketError(f"cannot create the socket directory {path.parent}: {e}") from e
    else:
        os.chmod(path.parent, 0o700)  # the umask may have taken bits we need
    check_private_dir(path.parent)


def check_socket(path: Path) -> None:
    """Before connecting to ``path``: raise UnsafeSocketError unless it is safely ours.

    The private directory must pass ``check_private_dir``; the socket itself must be a
    socket (not a symlink) owned by us. FileNotFoundError means no daemon socket.
    """
    if path.parent == private_socket_dir():
        check_private_dir(path.parent)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise _refuse(path, "it is a symlink" if stat.S_ISLNK(st.st_mode) else "not a socket")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"it is owned by uid {st.st_uid}, not {os.geteuid()}")


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
        fd = open_state_file(self.path, os.O_RDWR | os.O_CREAT)
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
    fd = open_state_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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
    "check_private_dir",
    "check_socket",
    "info_path",
    "lock_held",
    "log_path",
    "pid_path",
    "prepare_socket_dir",
    "private_socket_dir",
    "read_info",
    "read_pid",
    "remove_runtime_files",
    "socket_path",
    "stale_files",
    "token_path",
    "write_private",
]
