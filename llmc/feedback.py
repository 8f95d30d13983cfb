"""What the runtime writes for learning, in ``.llmc/``: the search log (``queries.jsonl``)
and the labels (``judgments.jsonl``), append-only and private.

`llmc search` appends one line per query to the search log when ``learn.log_queries`` is
on (the default): the time, the query, the route and the top results. When the file
outgrows ~400 bytes per ``learn.query_log_max`` entry it is cut back to the newest entries
(so it stays small without being read on every search); a write never fails a search.

A label grades one search result for one query on the 0-3 rubric (``RUBRIC``) and tags it
``code`` or ``doc``; `llmc label` writes them and the daemon's ``feedback`` turns a thumbs
up (grade 2) or down (grade 0) into one. The search path and the daemon own these writes;
``llmc.learn`` reads them (``learn/querylog.py``, ``learn/judgments.py``), as
``search/tuned.py`` reads what ``learn/tuned.py`` writes, so answering a query never loads
the learning code.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmc.errors import LearnError

log = logging.getLogger(__name__)

JUDGMENTS_NAME = "judgments.jsonl"
GRADES = (0, 1, 2, 3)
RUBRIC = {
    3: "the direct answer or the implementation",
    2: "partial: a usage example, a caller, a related part",
    1: "mentions the terms but is off target",
    0: "unrelated",
}
TAGS = ("code", "doc")
SOURCES = ("label", "suggest", "log", "feedback")
VOTES = {"up": 2, "down": 0}
FEEDBACK_LABELER = "feedback"


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


def query_key(query: str) -> str:
    """How labels of one query are grouped: whitespace collapsed, case folded."""
    return " ".join(query.split()).casefold()


@dataclass(frozen=True)
class Label:
    query: str
    path: str
    start_line: int
    end_line: int
    grade: int
    tag: str
    labeler: str
    source: str = "label"
    symbol: str = ""
    ts: float = 0.0

    @property
    def item(self) -> tuple[str, str, int, int]:
        """What two labelers must both have graded to be compared (kappa)."""
        return (query_key(self.query), self.path, self.start_line, self.end_line)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.symbol:
            del out["symbol"]
        return out


def tag_of(path: str, category: str = "") -> str:
    """``code`` or ``doc`` for a result: its index category, else its file type."""
    if category in TAGS:
        return category
    from llmc.languages import detect_language

    return "doc" if detect_language(path)[1] == "doc" else "code"


def check_label(label: Label) -> list[str]:
    """What is wrong with a label (empty when it is fine)."""
    errors = []
    if not label.query.strip():
        errors.append("query must be a non-empty string")
    pure = PurePosixPath(label.path)
    if not label.path or "\\" in label.path or pure.is_absolute() or ".." in pure.parts:
        errors.append(f"path must be relative to the repository root, got {label.path!r}")
    if label.grade not in GRADES:
        errors.append(f"grade must be 0, 1, 2 or 3, got {label.grade!r}")
    if label.tag not in TAGS:
        errors.append(f"tag must be code or doc, got {label.tag!r}")
    if not (1 <= label.start_line <= label.end_line):
        errors.append(f"lines must be 1 <= start <= end, got {label.start_line}-{label.end_line}")
    if label.source not in SOURCES:
        errors.append(f"source must be one of {', '.join(SOURCES)}, got {label.source!r}")
    if not label.labeler.strip():
        errors.append("labeler must be a non-empty string")
    return errors


def judgments_path(root: Path) -> Path:
    from llmc.paths import state_dir

    return state_dir(root) / JUDGMENTS_NAME


def append_labels(root: Path, labels: Iterable[Label]) -> int:
    """Append ``labels`` (checked) to the judgments file, flushed to disk; how many."""
    from llmc.paths import ensure_state_dir

    labels = list(labels)
    for label in labels:
        errors = check_label(label)
        if errors:
            raise LearnError(f"bad label for {label.path}: {'; '.join(errors)}")
    if not labels:
        return 0
    ensure_state_dir(root)
    lines = "".join(json.dumps(lb.to_json(), ensure_ascii=False) + "\n" for lb in labels)
    # One write of whole lines in append mode: a crash leaves at most a torn last line,
    # which load_labels skips.
    with open(judgments_path(root), "a", encoding="utf-8") as f:
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())
    return len(labels)


def feedback_label(
    query: str,
    path: str,
    start_line: int,
    end_line: int,
    vote: str | None = None,
    grade: int | None = None,
    client: str = "",
    symbol: str = "",
) -> Label:
    """A thumbs up (grade 2) / down (grade 0), or an explicit grade, from a client."""
    if (vote is None) == (grade is None):
        raise LearnError("give either vote (up or down) or grade (0-3)")
    if vote is not None:
        if vote not in VOTES:
            raise LearnError(f"vote must be up or down, got {vote!r}")
        grade = VOTES[vote]
    labeler = f"{FEEDBACK_LABELER}:{client}" if client else FEEDBACK_LABELER
    label = Label(
        query=query,
        path=path,
        start_line=start_line,
        end_line=end_line,
        grade=int(grade),  # type: ignore[arg-type]
        tag=tag_of(path),
        labeler=labeler,
        source="feedback",
        symbol=symbol,
        ts=time.time(),
    )
    errors = check_label(label)
    if errors:
        raise LearnError("; ".join(errors))
    return label


def record_feedback(root: Path, **kwargs: Any) -> dict[str, Any]:
    """Store one feedback label (see ``feedback_label``); the daemon's ``feedback``."""
    label = feedback_label(**kwargs)
    append_labels(root, [label])
    return {"ok": True, "label": label.to_json()}
