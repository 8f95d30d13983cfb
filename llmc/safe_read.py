"""Read a repository's file only where it really is inside the repository.

A repository is untrusted input: a tracked directory can be replaced by a symlink to
``/etc`` (git still lists ``etc/passwd``), and a path can be swapped for a symlink between
the walk and the read. So every read for indexing goes through ``open_inside``:

1. the path's real path (every component resolved) must lie inside the real repo root;
2. that real path is opened with ``O_NOFOLLOW`` (a last component swapped for a symlink
   since step 1 fails to open) and ``O_NONBLOCK`` (a FIFO swapped in does not block);
3. after the open, the descriptor itself is checked: a regular file, the same device and
   inode as the path now names, and ``/proc/self/fd`` (Linux) says where it really is,
   inside the root; without ``/proc`` the path must still resolve to itself (a directory
   swapped for a symlink between 1 and 2 is caught here).

A refusal raises ``OutsideRepo``, an ``OSError``, so a caller that treats an unreadable file
as a skip keeps working; the walk reports it as ``outside-repo``.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import Path

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_PROC_FD = "/proc/self/fd"


class OutsideRepo(OSError):
    """A path that resolves, or was opened, outside the repository root."""


@functools.lru_cache(maxsize=64)
def real_root(root: str) -> str:
    return os.path.realpath(root)


def _real(path: str) -> str:
    return os.path.realpath(path)


def within(real: str, base: str) -> bool:
    """Whether the real path ``real`` is ``base`` or below it (both already resolved)."""
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def resolve_inside(root: Path | str, rel: str) -> str:
    """The real path of ``root/rel``; ``OutsideRepo`` when it leaves the root."""
    base = real_root(str(root))
    real = _real(os.path.join(base, rel))
    if not within(real, base):
        raise OutsideRepo(errno.EXDEV, f"resolves outside the repository, to {real}")
    return real


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        return None  # no /proc (macOS, a sandbox): the inode check stands alone


def open_inside(root: Path | str, rel: str) -> int:
    """A read-only descriptor of the regular file ``root/rel``, only if it is inside the
    root from the path's first component to the opened file itself (see the module doc)."""
    base = real_root(str(root))
    real = resolve_inside(base, rel)
    fd = os.open(real, _FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        now = os.lstat(real)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise OutsideRepo(errno.EXDEV, "replaced while it was being opened")
        where = _fd_path(fd)
        if where is None:  # no /proc: the path must still resolve to itself, and inside
            where = _real(real)
            if where != real:
                raise OutsideRepo(errno.EXDEV, "a directory on its path changed while opening")
        if not within(where, base):
            raise OutsideRepo(errno.EXDEV, f"opened outside the repository, at {where}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(root: Path | str, rel: str, limit: int | None = None) -> bytes:
    """The bytes of ``root/rel`` (see ``open_inside``); with ``limit``, at most that many
    plus one, so a caller can tell a file grown past its limit since the walk."""
    with os.fdopen(open_inside(root, rel), "rb") as fh:
        return fh.read() if limit is None else fh.read(limit + 1)


__all__ = ["OutsideRepo", "open_inside", "read_inside", "resolve_inside", "within"]
