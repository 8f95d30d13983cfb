"""Numbered schema migrations, applied in order on open and recorded by name.

A schema change is a new function appended here, never an edit of an old one.
"""

from __future__ import annotations

from collections.abc import Callable


def m001_initial(conn) -> None:
    conn.executescript(
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE files (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            lang TEXT,
            category TEXT,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            generation INTEGER NOT NULL
        );
        -- AUTOINCREMENT: a span id is never reused, so a stale reference (lexical index,
        -- graph, client) can only miss, never point at different text.
        CREATE TABLE spans (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            lang TEXT,
            category TEXT NOT NULL,
            kind TEXT NOT NULL,
            symbol TEXT NOT NULL,
            qualname TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            part INTEGER NOT NULL DEFAULT 0,
            text TEXT NOT NULL,
            header TEXT NOT NULL,
            signature TEXT NOT NULL DEFAULT '',
            docstring TEXT NOT NULL DEFAULT '',
            embed_hash TEXT NOT NULL
        );
        CREATE INDEX spans_file ON spans(file_id);
        CREATE INDEX spans_path ON spans(path);
        CREATE INDEX spans_symbol ON spans(symbol);
        CREATE INDEX spans_qualname ON spans(qualname);
        CREATE TABLE embedding_cache (
            model TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, text_hash)
        ) WITHOUT ROWID;
        """
    )


def m002_skipped_files(conn) -> None:
    """Files skipped after reading them (binary, undecodable, empty), keyed by stat, so an
    unchanged skipped file costs a stat like any other."""
    conn.execute(
        "CREATE TABLE skipped_files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
        "mtime_ns INTEGER NOT NULL, reason TEXT NOT NULL, detail TEXT NOT NULL)"
    )


def m003_spans_category(conn) -> None:
    """Spans per category (how many are embedded, of how many) counted from an index, not
    a scan of every span's text: search reports dense coverage while vectors backfill."""
    conn.execute("CREATE INDEX IF NOT EXISTS spans_category ON spans(category)")


MIGRATIONS: list[Callable] = [m001_initial, m002_skipped_files, m003_spans_category]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn) -> list[str]:
    """Apply pending migrations; return the names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with conn:
            fn(conn)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, datetime('now'))", (fn.__name__,)
            )
        applied.append(fn.__name__)
    return applied


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]
