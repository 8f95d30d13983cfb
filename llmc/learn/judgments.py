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
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmc.errors import LearnError
from llmc.eval.queries import write_eval_queries

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
