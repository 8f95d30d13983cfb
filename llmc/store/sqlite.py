"""Open SQLite with the sqlite-vec extension loaded.

The stdlib ``sqlite3`` is used where it can load extensions; some Python builds (this
project's CI among them) compile it without that, so ``pysqlite3`` (pysqlite3-binary)
is the fallback. Both expose the same DB-API.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from types import ModuleType

from llmc.errors import StoreError

log = logging.getLogger(__name__)

# SQLITE_CORRUPT, SQLITE_NOTADB: the file is damaged, not merely unreachable or full.
CORRUPTION_CODES = frozenset({11, 26})
# SQLITE_CANTOPEN, SQLITE_READONLY: a read-only directory, say.
CANTOPEN_CODES = frozenset({8, 14})


@functools.cache
def sqlite_module() -> ModuleType:
    """The first sqlite3 module that can load sqlite-vec."""
    import sqlite3

    candidates: list[ModuleType] = []
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        candidates.append(sqlite3)
    try:
        from pysqlite3 import dbapi2 as pysqlite3

        candidates.append(pysqlite3)
    except ImportError:
        pass
    for module in candidates:
        try:
            conn = module.connect(":memory:")
            _load_vec(conn)
            conn.close()
            return module
        except Exception:  # noqa: BLE001 - try the next module
            continue
    raise StoreError(
        "no sqlite3 module here can load the sqlite-vec extension "
        "(install pysqlite3-binary: pip install pysqlite3-binary)"
    )


def _load_vec(conn) -> None:
    import sqlite_vec

    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)


def _error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_corruption(exc: BaseException) -> bool:
    """True when a sqlite error says the database file itself is damaged."""
    code = _error_code(exc)
    if code is not None:
        return code in CORRUPTION_CODES
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def integrity_problem(path: Path | str) -> str | None:
    """None when ``PRAGMA quick_check`` passes (or cannot tell); else its first complaint."""
    module = sqlite_module()
    try:
        conn = module.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
        try:
            rows = conn.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            conn.close()
    except module.Error as e:
        return str(e) if is_corruption(e) else None
    first = str(rows[0][0]) if rows else "ok"
    return None if first == "ok" else " ".join(first.split())


def _wal_is_empty(path: Path | str) -> bool:
    try:
        return os.path.getsize(f"{path}-wal") == 0
    except OSError:
        return True


def _open_readonly(module, path: Path | str, timeout: float):
    """``mode=ro``; on a read-only directory (no ``-shm`` can be made) fall back to
    ``immutable=1``, which is safe there: nobody can write that file either."""
    try:
        conn = module.connect(
            f"file:{path}?mode=ro", uri=True, timeout=timeout, check_same_thread=False
        )
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except module.Error as e:
        writable = os.access(Path(path).parent, os.W_OK)
        if _error_code(e) not in CANTOPEN_CODES or writable or not _wal_is_empty(path):
            raise
    log.info("%s is on a read-only file system: opening it immutable", path)
    return module.connect(
        f"file:{path}?mode=ro&immutable=1", uri=True, timeout=timeout, check_same_thread=False
    )


def refuse_foreign_schema(conn, path: Path | str) -> None:
    """Refuse a database llmc did not make: llmc creates tables and indexes only, so a view
    or a trigger (a ``spans`` that is an endless recursive view, say) means the file came
    from elsewhere. Checked on every open, before any query can touch such an object."""
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger') LIMIT 5"
    ).fetchall()
    if rows:
        names = ", ".join(f"{kind} {name}" for kind, name in rows)
        raise StoreError(
            f"{path} is not a database llmc wrote (it holds {names}): move it away and run "
            "`llmc index`"
        )


def connect(path: Path | str, readonly: bool = False, timeout: float = 30.0):
    """A connection in WAL mode with sqlite-vec loaded and foreign keys on, to a database
    whose schema holds no view or trigger (``refuse_foreign_schema``)."""
    module = sqlite_module()
    try:
        if readonly:
            conn = _open_readonly(module, path, timeout)
        else:
            conn = module.connect(str(path), timeout=timeout, check_same_thread=False)
        _load_vec(conn)
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # A database found on disk may not be ours: no schema object (trigger, view,
        # default) may call a function with side effects.
        conn.execute("PRAGMA trusted_schema=OFF")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        refuse_foreign_schema(conn, path)
    except module.Error as e:
        raise StoreError(f"cannot open index database {path}: {e}") from e
    except StoreError:
        conn.close()
        raise
    return conn


def database_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite_module().Error)


def quarantine(db_path: Path) -> Path:
    """Move a corrupt ``index.db`` (and its ``-wal``, ``-shm``) aside as ``index.db.corrupt``.

    Only the latest corrupt copy is kept; a fresh database can then be built in its place.
    """
    db_path = Path(db_path)
    aside = db_path.with_name(db_path.name + ".corrupt")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{db_path}{suffix}")
        dst = Path(f"{aside}{suffix}")
        dst.unlink(missing_ok=True)
        if src.exists():
            src.replace(dst)
    log.warning("moved the corrupt index database %s to %s", db_path, aside)
    return aside


__all__ = [
    "connect",
    "database_error",
    "integrity_problem",
    "is_corruption",
    "refuse_foreign_schema",
    "quarantine",
    "sqlite_module",
]
