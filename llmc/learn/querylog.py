"""The search query log: ``.llmc/queries.jsonl``, what people actually asked.

`llmc search` appends one line per query when ``learn.log_queries`` is on (the default;
the file stays in ``.llmc/``, which git ignores): the time, the query, the route and the
top results. `llmc label --from-log` and `llmc label --suggest` draw queries from it.
When the file outgrows ~400 bytes per ``learn.query_log_max`` entry it is cut back to
the newest ``query_log_max`` entries (so it stays small without being read on every
search); a write never fails a search.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

QUERY_LOG_NAME = "queries.jsonl"
TOP_RESULTS = 5


def query_log_path(root: Path) -> Path:
    from llmc.paths import state_dir

    return state_dir(root) / QUERY_LOG_NAME


def log_search(root: Path, response: dict[str, Any], max_entries: int = 5000) -> None:
    """Append one `llmc search --json` object (query, route, top results); never raises."""
    try:
        from llmc.paths import state_dir

        if not state_dir(root).is_dir():
            return  # no index: nothing to label against either
        entry = {
            "ts": round(time.time(), 3),
            "query": response.get("query", ""),
            "intent": (response.get("route") or {}).get("intent", ""),
            "results": [
                [r.get("path"), r.get("start_line"), r.get("end_line")]
                for r in (response.get("results") or [])[:TOP_RESULTS]
            ],
        }
        if not str(entry["query"]).strip():
            return
        path = query_log_path(root)
        with _open_private(path, os.O_APPEND) as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        if max_entries > 0 and path.stat().st_size > 400 * max_entries:
            _trim(path, max_entries)
    except Exception as e:  # noqa: BLE001 - the log must never break a search
        log.debug("query log not written: %s", e)


def _trim(path: Path, max_entries: int) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    if len(lines) <= max_entries:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with _open_private(tmp, os.O_TRUNC) as f:
        f.write("".join(lines[-max_entries:]))
    os.replace(tmp, path)


def _open_private(path: Path, mode: int):
    """A text handle on ``path`` created 0600 (queries are private), never via a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | mode, 0o600)
    return os.fdopen(fd, "w", encoding="utf-8")


def read_log(root: Path) -> list[dict[str, Any]]:
    """Every readable entry, oldest first (torn or foreign lines are skipped)."""
    path = query_log_path(root)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("query"), str):
            out.append(entry)
    return out


def logged_queries(root: Path, limit: int | None = None) -> list[str]:
    """Distinct logged queries, most recently asked first."""
    from llmc.learn.judgments import query_key

    seen: dict[str, str] = {}
    for entry in reversed(read_log(root)):
        q = " ".join(entry["query"].split())
        if q and query_key(q) not in seen:
            seen[query_key(q)] = q
    out = list(seen.values())
    return out if limit is None else out[:limit]


__all__ = ["log_search", "logged_queries", "query_log_path", "read_log"]
