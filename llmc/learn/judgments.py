"""Human relevance labels: ``.llmc/judgments.jsonl``, one label per line, append-only.

A label grades one search result for one query on the 0-3 rubric (``RUBRIC``) and tags it
``code`` or ``doc``::

    {"query": "where are sessions saved", "path": "app/store.py", "start_line": 8,
     "end_line": 16, "symbol": "SessionStore.save_session", "grade": 3, "tag": "code",
     "labeler": "ana", "source": "label", "ts": 1732200000.0}

``source`` says how the label came: ``label`` (`llmc label QUERY`), ``suggest`` (active
learning), ``log`` (a query from the search log), ``feedback`` (thumbs up/down through
the daemon: up is grade 2, down is grade 0). A later label of the same labeler for the
same item replaces the earlier one; the file keeps both (nothing is ever rewritten).

``to_eval_queries`` turns labels into an eval query set (llmc.eval.queries): per item the
median of the labelers' latest grades, items graded 0 left out, the query's intent from
the tags of what was judged relevant.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmc.errors import LearnError
from llmc.eval.queries import write_eval_queries
from llmc.feedback import (  # the runtime writes them; re-exported for learn and its tests
    GRADES,
    RUBRIC,
    TAGS,
    Label,
    append_labels,
    check_label,
    feedback_label,
    judgments_path,
    query_key,
    record_feedback,
    tag_of,
)

log = logging.getLogger(__name__)


def parse_label(raw: Any) -> Label:
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    try:
        label = Label(
            query=str(raw["query"]),
            path=str(raw["path"]),
            start_line=int(raw["start_line"]),
            end_line=int(raw["end_line"]),
            grade=int(raw["grade"]),
            tag=str(raw.get("tag") or tag_of(str(raw["path"]))),
            labeler=str(raw.get("labeler") or "unknown"),
            source=str(raw.get("source") or "label"),
            symbol=str(raw.get("symbol") or ""),
            ts=float(raw.get("ts") or 0.0),
        )
    except KeyError as e:
        raise ValueError(f"missing key {e.args[0]!r}") from None
    except (TypeError, ValueError) as e:
        raise ValueError(str(e)) from None
    errors = check_label(label)
    if errors:
        raise ValueError("; ".join(errors))
    return label


def load_labels(path: Path) -> tuple[list[Label], list[str]]:
    """Every readable label of a judgments file, and a ``file:line: problem`` for the rest."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    except OSError as e:
        raise LearnError(f"{path}: cannot read: {e.strerror}") from None
    labels, problems = [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            labels.append(parse_label(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as e:
            problems.append(f"{path}:{lineno}: skipped: {e}")
    for p in problems:
        log.warning("%s", p)
    return labels, problems


def latest(labels: Sequence[Label]) -> list[Label]:
    """The last label of each labeler for each item, in file order."""
    last: dict[tuple, Label] = {}
    for label in labels:
        key = (label.labeler, *label.item)
        last.pop(key, None)
        last[key] = label
    return list(last.values())


def labeled_items(labels: Sequence[Label], labeler: str | None = None) -> set[tuple]:
    return {lb.item for lb in labels if labeler is None or lb.labeler == labeler}


def _intent(relevant: Sequence[tuple[int, str]]) -> str:
    """code / docs / mixed from the (grade, tag) of the judged-relevant items."""
    strong = [tag for grade, tag in relevant if grade >= 2] or [tag for _, tag in relevant]
    tags = set(strong)
    if tags == {"code"}:
        return "code"
    if tags == {"doc"}:
        return "docs"
    return "mixed"


def to_eval_queries(labels: Sequence[Label], include_feedback: bool = True) -> list[Any]:
    """An eval query set from labels: one query per labeled query with a relevant item.

    An item's grade is the median (rounded half up) of its labelers' latest grades;
    grade 0 items are left out (the eval format lists relevant items only, and every
    unlisted result counts as 0 anyway). Queries without a relevant item are dropped.
    """
    from llmc.eval.queries import EvalQuery, Judgment

    by_query: dict[str, dict[tuple, list[Label]]] = {}
    text: dict[str, str] = {}
    for label in latest(labels):
        if label.source == "feedback" and not include_feedback:
            continue
        qk = query_key(label.query)
        text.setdefault(qk, " ".join(label.query.split()))
        by_query.setdefault(qk, {}).setdefault(label.item, []).append(label)
    out = []
    for qk, items in by_query.items():
        relevant: list[tuple[int, str]] = []
        judged = []
        for _, group in sorted(items.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            grade = int(statistics.median(lb.grade for lb in group) + 0.5)
            if grade < 1:
                continue
            first = group[-1]
            relevant.append((grade, first.tag))
            judged.append(
                Judgment(
                    path=first.path,
                    grade=grade,
                    start_line=first.start_line,
                    end_line=first.end_line,
                    symbol=first.symbol,
                )
            )
        if judged:
            out.append(
                EvalQuery(
                    query=text[qk],
                    intent=_intent(relevant),
                    relevant=tuple(judged),
                    source=f"judgments:{text[qk]}",
                    id=f"label:{qk}",
                )
            )
    return out


def default_labeler(configured: str = "", root: Path | None = None) -> str:
    """``learn.labeler``, else git's user.name, else $USER, else ``me``."""
    if configured.strip():
        return configured.strip()
    import subprocess

    try:
        out = subprocess.run(
            ["git", "config", "user.name"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("USER") or os.environ.get("USERNAME") or "me"


__all__ = [
    "GRADES",
    "RUBRIC",
    "TAGS",
    "Label",
    "append_labels",
    "default_labeler",
    "feedback_label",
    "judgments_path",
    "labeled_items",
    "latest",
    "load_labels",
    "query_key",
    "record_feedback",
    "tag_of",
    "to_eval_queries",
    "write_eval_queries",
]
