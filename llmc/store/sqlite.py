"""Open SQLite with the sqlite-vec extension loaded.

The stdlib ``sqlite3`` is used where it can load extensions; some Python builds (this
project's CI among them) compile it without that, so ``pysqlite3`` (pysqlite3-binary)
is the fallback. Both expose the same DB-API.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

from llmc.errors import StoreError


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


def connect(path: Path | str, readonly: bool = False, timeout: float = 30.0):
    """A connection in WAL mode with sqlite-vec loaded and foreign keys on."""
    module = sqlite_module()
    try:
        if readonly:
            conn = module.connect(
                f"file:{path}?mode=ro", uri=True, timeout=timeout, check_same_thread=False
            )
        else:
            conn = module.connect(str(path), timeout=timeout, check_same_thread=False)
        _load_vec(conn)
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    except module.Error as e:
        raise StoreError(f"cannot open index database {path}: {e}") from e
    return conn


def database_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite_module().Error)


__all__ = ["connect", "database_error", "sqlite_module"]
