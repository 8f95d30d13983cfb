"""Where things live: the repository root and its `.llmc/` directory."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import LlmcError

log = logging.getLogger(__name__)

STATE_DIR = ".llmc"
DB_NAME = "index.db"
LEXICAL_DIR = "lexical"
FILES_DIR = "files"  # whole-file BM25 (llmc/store/file_lexical.py)
GRAPH_NAME = "rag_graph.json"
LOCK_NAME = "index.lock"


def find_repo_root(start: Path | None = None) -> Path:
    """The git top level above ``start``, else the nearest dir with `.llmc/`, else ``start``."""
    here = Path(start or Path.cwd()).resolve()
    if not here.exists():
        raise LlmcError(f"{here}: no such directory")
    if not here.is_dir():
        raise LlmcError(f"{here}: not a directory")
    if start is not None:
        return here
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip()).resolve()
    except (OSError, subprocess.SubprocessError):
        pass
    for parent in (here, *here.parents):
        if (parent / STATE_DIR).is_dir():
            return parent
    return here


def state_dir(root: Path) -> Path:
    return root / STATE_DIR


def check_state_dir(root: Path) -> Path:
    """``.llmc/`` of ``root``, refused (one-line LlmcError) unless it is missing or a real
    directory: a cloned repository can commit ``.llmc`` as a symlink (the index would be
    written, and read, wherever it points) or as a regular file."""
    path = Path(root) / STATE_DIR
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        raise LlmcError(f"{path}: cannot inspect llmc's state directory ({e.strerror})") from e
    if stat.S_ISLNK(st.st_mode):
        raise LlmcError(
            f"{path} is a symbolic link; llmc does not follow it (a repository may point it "
            "anywhere): remove it and run again"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise LlmcError(
            f"{path} is not a directory; llmc keeps its index there: move it away and run again"
        )
    return path


def ensure_state_dir(root: Path) -> Path:
    """Create ``.llmc/`` (0700) with a ``.gitignore`` of ``*`` so git never sees the index.

    Private: the index holds the text of every file indexed, 0600 files included, so the
    directory is 0700 and its files 0600; an index made before this rule is tightened here.
    State llmc did not write is not trusted: files under ``.llmc/`` that git tracks came with
    the repository (a clone, a pull) and are removed, with a warning, before llmc reads any.
    """
    path = check_state_dir(root)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise LlmcError(f"cannot create {path}: {e.strerror}") from e
    gate_state(root, force=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        try:
            fd = os.open(ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another llmc process made it since (two racing starts)
            if not stat.S_ISREG(os.lstat(ignore).st_mode):
                raise LlmcError(
                    f"{ignore} is not a regular file: remove it and run again"
                ) from None
            return path
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("# created by llmc: the index is local state\n*\n")
    return path


def tighten_state_dir(path: Path) -> None:
    """Directories 0700 and files 0600 under ``path`` (ours only; symlinks untouched).

    SQLite creates the WAL and shared-memory files with the database file's mode, so a
    0600 ``index.db`` keeps them private too."""
    try:
        if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
            os.chmod(path, 0o700, follow_symlinks=False)
    except OSError as e:
        log.debug("cannot tighten %s: %s", path, e)
        return
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode) or not st.st_mode & 0o077:
                    continue
                want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
                if stat.S_ISSOCK(st.st_mode):
                    continue  # the daemon's socket: its own checks (llmc.daemon.pidfile)
                os.chmod(full, stat.S_IMODE(st.st_mode) & want, follow_symlinks=False)
            except OSError as e:
                log.debug("cannot tighten %s: %s", full, e)


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Add 077 to the umask while llmc writes its state (the indexer, the daemon), so files
    are created 0600 and directories 0700 from the start; the old umask comes back after."""
    old = os.umask(0o077)
    os.umask(old | 0o077)
    try:
        yield
    finally:
        os.umask(old)


# One index entry of `git ls-files -s --debug -z`: mode, name, then the stat git recorded
# when it wrote the file to the work tree.
_ENTRY = re.compile(
    rb"(\d{6}) [0-9a-f]+ \d\t([^\0]*)\0"
    rb"\s*ctime: \d+:\d+\n\s*mtime: (\d+):(\d+)\n\s*dev: \d+\tino: (\d+)\n"
    rb"\s*uid: \d+\tgid: \d+\n\s*size: (\d+)\tflags: [0-9a-f]+\n"
)


@dataclass(frozen=True)
class TrackedEntry:
    """A path under ``.llmc`` in git's index, and the stat git recorded when it checked the
    path out (``mtime_ns``, ``ino``, ``size``; zero where git keeps none)."""

    mode: str
    path: str
    mtime_ns: int
    ino: int
    size: int

    @property
    def gitlink(self) -> bool:
        return self.mode == "160000"

    def checked_out(self, st: os.stat_result) -> bool:
        """Whether ``st`` is the file git wrote: every stat git recorded still fits. A zero
        is not compared (git smudges a racily clean entry's size to 0; a build without
        nanoseconds records whole seconds). A file llmc wrote there since (after removing
        git's) has a later mtime, and in doubt the file is taken for git's: removed."""
        fits = [
            not self.ino or self.ino == st.st_ino & 0xFFFFFFFF,
            not self.size or self.size == st.st_size & 0xFFFFFFFF,
        ]
        if self.mtime_ns % 1_000_000_000:
            fits.append(self.mtime_ns == st.st_mtime_ns)
        elif self.mtime_ns:
            fits.append(self.mtime_ns // 1_000_000_000 == int(st.st_mtime))
        return all(fits)


def _ls_state(root: Path) -> list[TrackedEntry]:
    """Every index entry under ``.llmc`` that git tracks in ``root``, a gitlink (``.llmc``
    or a folder in it committed as a submodule) included; empty outside a git work tree."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-s", "--debug", "-z", "--", STATE_DIR],
            cwd=root,
            capture_output=True,
            timeout=30,
            env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [
        TrackedEntry(
            mode=m[1].decode(),
            path=os.fsdecode(m[2]),
            mtime_ns=int(m[3]) * 1_000_000_000 + int(m[4]),
            ino=int(m[5]),
            size=int(m[6]),
        )
        for m in _ENTRY.finditer(out.stdout)
    ]


def tracked_state(root: Path) -> list[str]:
    """Paths under ``.llmc/`` that git tracks in ``root`` (empty outside a git work tree)."""
    return [entry.path for entry in _ls_state(root)]


def _inside_state(root: Path, rel: str) -> Path | None:
    full = Path(root) / rel
    if ".." in Path(rel).parts or not full.is_relative_to(Path(root) / STATE_DIR):
        return None
    return full


def _empty_checkout(folder: Path) -> list[str]:
    """Remove everything in ``folder``, a submodule's checkout (it holds ``.git``): none of
    it is llmc's. Links are removed, never followed (``shutil.rmtree`` does not follow)."""
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or not os.path.lexists(folder / ".git"):
            return []  # an uninitialised submodule is an empty folder: nothing came with it
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        child = folder / name
        if os.path.isdir(child) and not os.path.islink(child):
            shutil.rmtree(child)
        else:
            os.unlink(child)
    return [str(folder / name) for name in names]


def _came_with_checkout(entry: TrackedEntry, full: Path) -> bool:
    """A tracked path whose file is still the one git wrote (a link, or a file whose stat
    git recorded). After llmc removed it and wrote its own there, the path stays tracked
    until the user untracks it, but the file is llmc's: kept."""
    try:
        st = os.lstat(full)
    except OSError:
        return False
    return not stat.S_ISDIR(st.st_mode) and (stat.S_ISLNK(st.st_mode) or entry.checked_out(st))


def drop_tracked_state(root: Path) -> list[str]:
    """Remove what under ``.llmc/`` came with the repository (see :func:`ensure_state_dir`):
    tracked files and links as git wrote them, and the whole checkout of a submodule
    committed at or under ``.llmc`` (a gitlink). They stay in git's history, so nothing is
    lost. Raises ``LlmcError`` when something cannot be removed: llmc then reads none of it."""
    removed: list[str] = []
    for entry in _ls_state(root):
        rel = entry.path
        full = _inside_state(root, rel)
        if full is None:
            continue
        try:
            if entry.gitlink:
                removed += [os.path.relpath(p, root) for p in _empty_checkout(full)]
            elif _came_with_checkout(entry, full):
                os.unlink(full)
                removed.append(rel)
        except OSError as e:
            raise LlmcError(
                f"{rel} came with the repository and cannot be removed ({e.strerror}); llmc "
                "does not read state it did not write: remove it and run again"
            ) from e
    if removed:
        shown = ", ".join(printable_name(r) for r in removed[:5]) + (
            f" and {len(removed) - 5} more" if len(removed) > 5 else ""
        )
        log.warning(
            "%d file(s) under %s/ are tracked by git (they came with the repository, llmc "
            "never reads state it did not write): removed %s",
            len(removed),
            STATE_DIR,
            shown,
        )
    return removed


def printable_name(text: str) -> str:
    """A path as one printable line: control characters (a newline in a file name, ESC)
    shown as ``\\xNN``, so a name cannot forge a log record or drive a terminal."""
    return "".join(
        c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else f"\\x{ord(c) & 0xFF:02x}"
        for c in text
    )


# The gate's memo: (real root) -> what it saw when it last let the state through. Both
# stamps change when git writes tracked state (the index file) or anything is added to or
# removed from `.llmc/` itself, so a long-lived daemon re-checks after a pull.
_GATED: dict[str, tuple] = {}


def _git_index_stamp(root: Path) -> tuple | None:
    """Stat of the git index of ``root`` (``.git/index``, or a worktree's, named by the
    ``gitdir:`` line of a ``.git`` file); None when it cannot be found cheaply."""
    dot_git = Path(root) / ".git"
    try:
        if dot_git.is_file():
            line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            if not line.startswith("gitdir:"):
                return None
            dot_git = (Path(root) / line[len("gitdir:") :].strip()).resolve()
        st = os.stat(dot_git / "index")
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _state_stamp(path: Path) -> tuple | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_mode)


def gate_state(root: Path, force: bool = False) -> Path:
    """The one gate before anything reads ``.llmc/``: refuse a committed link or file in its
    place (``check_state_dir``), remove the state that came with the repository (tracked
    files, a submodule checkout) and tighten modes. Search, MCP, the daemon, status, doctor,
    workspace members, the hooks and the indexer all pass here first; a process re-checks
    only when git's index or the directory changed since (see ``_GATED``)."""
    path = check_state_dir(root)
    if not os.path.lexists(path):
        return path
    key = os.path.realpath(root)
    stamp = (_git_index_stamp(Path(root)), _state_stamp(path))
    if not force and stamp[0] is not None and _GATED.get(key) == stamp:
        return path
    drop_tracked_state(Path(root))
    tighten_state_dir(path)
    _GATED[key] = (_git_index_stamp(Path(root)), _state_stamp(path))
    return path


def open_state_file(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` for a file under ``.llmc/``: never through a link (``O_NOFOLLOW``), never
    a FIFO or device (``O_NONBLOCK``, then fstat), always 0600 when created. A link found in
    its place was not written by llmc (a pull, a race): it is removed, never followed, and the
    open tried once more. Raises ``OSError`` like ``os.open``."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        if e.errno != errno.ELOOP or not os.path.islink(path):
            raise
        log.warning("%s is a symbolic link llmc did not make: removed, not followed", path)
        os.unlink(path)
        fd = os.open(path, flags, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file")
        if st.st_uid != os.getuid():
            raise OSError(errno.EPERM, f"{path}: owned by another user")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def db_path(root: Path) -> Path:
    return root / STATE_DIR / DB_NAME


def lexical_path(root: Path) -> Path:
    return root / STATE_DIR / LEXICAL_DIR


def file_index_path(root: Path) -> Path:
    return root / STATE_DIR / FILES_DIR


def graph_path(root: Path) -> Path:
    return root / STATE_DIR / GRAPH_NAME


def lock_path(root: Path) -> Path:
    return root / STATE_DIR / LOCK_NAME


__all__ = [
    "check_state_dir",
    "db_path",
    "drop_tracked_state",
    "ensure_state_dir",
    "find_repo_root",
    "gate_state",
    "open_state_file",
    "printable_name",
    "graph_path",
    "lexical_path",
    "lock_path",
    "private_umask",
    "tighten_state_dir",
    "tracked_state",
    "state_dir",
]
