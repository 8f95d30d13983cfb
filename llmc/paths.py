"""Where things live: the repository root and its `.llmc/` directory."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import subprocess
from collections.abc import Iterator
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
    tighten_state_dir(path)
    drop_tracked_state(Path(root))
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


def tracked_state(root: Path) -> list[str]:
    """Paths under ``.llmc/`` that git tracks in ``root`` (empty outside a git work tree)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", STATE_DIR],
            cwd=root,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [os.fsdecode(p) for p in out.stdout.split(b"\0") if p]


def drop_tracked_state(root: Path) -> list[str]:
    """Remove the files under ``.llmc/`` that came with the repository (see
    :func:`ensure_state_dir`); they stay in git's history, so nothing is lost."""
    tracked = tracked_state(root)
    removed = []
    for rel in tracked:
        full = Path(root) / rel
        if not full.is_relative_to(Path(root) / STATE_DIR) or ".." in Path(rel).parts:
            continue
        try:
            if os.path.islink(full) or (os.path.lexists(full) and not os.path.isdir(full)):
                os.unlink(full)
                removed.append(rel)
        except OSError as e:
            log.warning("%s came with the repository and cannot be removed: %s", rel, e)
    if removed:
        shown = ", ".join(removed[:5]) + (
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
    "graph_path",
    "lexical_path",
    "lock_path",
    "private_umask",
    "tighten_state_dir",
    "tracked_state",
    "state_dir",
]
