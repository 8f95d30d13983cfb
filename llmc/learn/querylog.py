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
from pathlib import Path
from typing import Any

from llmc.feedback import log_search, query_log_path  # the runtime writes it

log = logging.getLogger(__name__)


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
