"""Vectors borrowed from the other worktrees of the same repository.

Each worktree keeps its own `.llmc/index.db`, and with it its own (model, text hash)
embedding cache; a new `git worktree add` of a large repository would otherwise embed
every span again, though nearly all its text is already embedded next door. Worktrees of
one repository share ``git rev-parse --git-common-dir``, and ``git worktree list`` names
them all: the backfill asks their caches (read-only, by model id and text hash) for what
its own cache lacks before it runs the model, and keeps what it borrows in its own cache.

A sibling's database is read, never written, and trusted only as far as a cache miss:
it must be a regular file in a real `.llmc/` directory owned by this user that git does
not track there (a sibling branch can commit `.llmc/index.db` with swapped vectors: its
checkout satisfies ownership, so ownership alone proves nothing), opened read-only with
untrusted schema off, holding no view or trigger and an ``embedding_cache`` that is a table
of the expected columns; every lookup runs under a step budget (a progress handler), so no
database can hold the indexer. A vector that is not a finite float32 array of the expected
dimension is ignored. Anything that fails is a cache miss and one line.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmc.paths import DB_NAME, STATE_DIR, printable_name, tracked_state

log = logging.getLogger(__name__)

MAX_SIBLINGS = 16


def sibling_worktrees(root: Path) -> list[Path]:
    """The other worktrees of ``root``'s repository (``git worktree list``), or []."""
    try:
        out = subprocess.run(
            ["git", "worktree", "list", "--porcelain"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("git worktree list in %s: %s", root, e)
        return []
    if out.returncode != 0:
        return []
    here = Path(root).resolve()
    found = []
    for line in out.stdout.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :]).resolve()
            if path != here:
                found.append(path)
    return found[:MAX_SIBLINGS]


def _own_database(root: Path) -> Path | None:
    """``root/.llmc/index.db`` when it is a real directory and file of this user's."""
    state, db = root / STATE_DIR, root / STATE_DIR / DB_NAME
    try:
        st_dir, st_db = os.lstat(state), os.lstat(db)
    except OSError:
        return None
    uid = os.getuid()
    if not stat.S_ISDIR(st_dir.st_mode) or not stat.S_ISREG(st_db.st_mode):
        return None
    if st_dir.st_uid != uid or st_db.st_uid != uid:
        return None
    if tracked_state(root):
        log.warning(
            "worktree %s: its .llmc/ holds files git tracks (they came with a branch); its "
            "embedding cache is not borrowed",
            printable_name(str(root)),
        )
        return None
    return db


# Steps of SQLite's virtual machine one sibling lookup may take (a 500-hash chunk on a
# primary key costs a few thousand); past it the lookup is interrupted and is a miss.
LOOKUP_STEPS = 2_000_000
_PROGRESS_EVERY = 1000
CACHE_COLUMNS = ("model", "text_hash", "vector")


def _well_formed(conn: Any) -> bool:
    """``embedding_cache`` is a table (not a view, not virtual) with llmc's columns."""
    row = conn.execute(
        "SELECT type, sql FROM sqlite_master WHERE name = 'embedding_cache'"
    ).fetchone()
    if row is None or row[0] != "table" or "VIRTUAL" in str(row[1]).upper():
        return False
    columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(embedding_cache)"))
    return columns == CACHE_COLUMNS


class _StepBudget:
    """Interrupts a statement on its connection past ``LOOKUP_STEPS`` VM steps; ``reset``
    before each statement gives it a budget of its own."""

    def __init__(self, conn: Any):
        self.left = LOOKUP_STEPS
        conn.set_progress_handler(self._tick, _PROGRESS_EVERY)

    def reset(self) -> None:
        self.left = LOOKUP_STEPS

    def _tick(self) -> int:
        self.left -= _PROGRESS_EVERY
        return 1 if self.left <= 0 else 0


class SiblingCache:
    """Read-only lookups in the sibling worktrees' embedding caches (opened on first use)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._conns: list[tuple[Any, _StepBudget]] | None = None

    def _open(self) -> list[tuple[Any, _StepBudget]]:
        if self._conns is None:
            from llmc.store.sqlite import connect

            self._conns = []
            for sibling in sibling_worktrees(self.root):
                db = _own_database(sibling)
                if db is None:
                    continue
                try:
                    conn = connect(db, readonly=True, timeout=1.0)
                except Exception as e:  # noqa: BLE001 - a sibling's cache is optional
                    log.warning("embedding cache of worktree %s not read: %s", sibling, e)
                    continue
                if not _well_formed(conn):
                    log.warning("embedding cache of worktree %s is not llmc's: not read", sibling)
                    conn.close()
                    continue
                self._conns.append((conn, _StepBudget(conn)))
            if self._conns:
                log.debug("borrowing cached vectors from %d worktree(s)", len(self._conns))
        return self._conns

    def lookup(self, model_id: str, hashes: Sequence[str], dim: int | None) -> dict:
        """text hash → vector for those of ``hashes`` a sibling has cached for ``model_id``
        (vectors of another dimension than ``dim``, when known, are ignored)."""
        todo = list(dict.fromkeys(hashes))
        out: dict[str, np.ndarray] = {}
        for conn, budget in self._open():
            if not todo:
                break
            for start in range(0, len(todo), 500):
                chunk = todo[start : start + 500]
                marks = ",".join("?" * len(chunk))
                budget.reset()
                try:
                    rows = conn.execute(
                        f"SELECT text_hash, vector FROM embedding_cache WHERE model = ? "
                        f"AND text_hash IN ({marks})",
                        [model_id, *chunk],
                    ).fetchall()
                except Exception as e:  # noqa: BLE001 - a broken sibling is a miss
                    log.warning("a worktree's embedding cache lookup failed (a miss): %s", e)
                    break
                for h, blob in rows:
                    vector = _vector(blob, dim)
                    if vector is not None and isinstance(h, str):
                        out[h] = vector
            todo = [h for h in todo if h not in out]
        return out

    def close(self) -> None:
        for conn, _ in self._conns or ():
            try:
                conn.close()
            except Exception:  # noqa: BLE001, S110 - closing a read-only handle
                pass
        self._conns = None


def _vector(blob: Any, dim: int | None) -> np.ndarray | None:
    if not isinstance(blob, bytes) or not blob or len(blob) % 4:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    if (dim is not None and vector.shape[0] != dim) or not np.isfinite(vector).all():
        return None
    return vector


__all__ = ["SiblingCache", "sibling_worktrees"]
