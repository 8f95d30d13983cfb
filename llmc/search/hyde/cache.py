"""The HyDE hypothesis cache: ``.llmc/hyde_cache.db``, one small SQLite table.

Derived data, safe to lose: a missing, locked or corrupt cache is a miss (a debug line),
never an error, and deleting the file only costs regenerating hypotheses. Keys are
hashes of everything that shapes a hypothesis (query, provider and model, prompt version,
route, language, length cap, temperature, seed), so a changed prompt or model never
reads an old answer; ``PROMPT_VERSION`` in ``hyde.py`` is the prompt's part.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

CACHE_NAME = "hyde_cache.db"
SCHEMA = """
CREATE TABLE IF NOT EXISTS hypotheses (
    key TEXT PRIMARY KEY,
    query TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    text TEXT NOT NULL,
    latency_ms REAL NOT NULL,
    created REAL NOT NULL
)
"""


def cache_key(query: str, model: str, prompt_version: str, **shape: object) -> str:
    """A stable key for one hypothesis: sha256 of the query, model, prompt version and
    every other setting that changes the text (``shape``)."""
    blob = json.dumps([query, model, prompt_version, sorted(shape.items())], default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class HypothesisCache:
    """Get and put hypotheses by key; every failure is a miss. Opens the file per call
    (cheap), so it holds no connection across forks or threads."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=1.0)
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(SCHEMA)
            conn.commit()
            self._ready = True
        return conn

    def get(self, key: str) -> tuple[str, float] | None:
        """``(text, latency_ms it took to generate)`` or None."""
        if not self.path.parent.is_dir():
            return None
        with self._lock:
            try:
                conn = self._connect()
                try:
                    row = conn.execute(
                        "SELECT text, latency_ms FROM hypotheses WHERE key = ?", (key,)
                    ).fetchone()
                finally:
                    conn.close()
            except sqlite3.Error as e:
                log.debug("hyde cache %s unreadable (%s): a miss", self.path, e)
                return None
        return (str(row[0]), float(row[1])) if row else None

    def put(
        self, key: str, query: str, model: str, prompt_version: str, text: str, latency_ms: float
    ) -> None:
        if not self.path.parent.is_dir():
            return
        with self._lock:
            try:
                conn = self._connect()
                try:
                    with conn:
                        conn.execute(
                            "INSERT OR REPLACE INTO hypotheses VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (key, query, model, prompt_version, text, latency_ms, time.time()),
                        )
                finally:
                    conn.close()
            except sqlite3.Error as e:
                log.debug("hyde cache %s not written (%s)", self.path, e)


__all__ = ["CACHE_NAME", "HypothesisCache", "cache_key"]
