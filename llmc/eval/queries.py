"""Eval query files: JSON Lines, one graded question per line.

Each line is an object::

    {"query": "where are validators run", "intent": "code",
     "relevant": [{"path": "src/pkg/_make.py", "start_line": 10, "end_line": 42, "grade": 3},
                  {"path": "docs/init.md", "grade": 1}]}

- ``query``: non-empty text; ``intent``: ``code``, ``docs`` or ``mixed``;
- ``relevant``: at least one judgment: ``path`` relative to the repository root (posix
  ``/``), optional ``start_line``/``end_line`` (1-based, inclusive, both or neither;
  without them the judgment is file level), optional ``symbol`` (the qualified name llmc's
  index gives the span: ``Session.commit``, ``Guide > Install``; the runner takes
  the lines from the index, so judgments over code that keeps changing stay right),
  ``grade`` 3 = direct answer, 2 = partial, 1 = related;
- optional ``id`` (unique text) and ``note`` (free text for the set's author).

Blank lines are ignored. Every problem is reported as ``file:line: message``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmc.errors import EvalError

INTENTS = ("code", "docs", "mixed")
_QUERY_KEYS = {"query", "intent", "relevant", "id", "note"}
_JUDGMENT_KEYS = {"path", "start_line", "end_line", "grade", "symbol"}
MAX_ERRORS = 20


@dataclass(frozen=True)
class Judgment:
    path: str
    grade: int
    start_line: int | None = None
    end_line: int | None = None
    symbol: str = ""

    @property
    def file_level(self) -> bool:
        return self.start_line is None and not self.symbol


@dataclass(frozen=True)
class EvalQuery:
    query: str
    intent: str
    relevant: tuple[Judgment, ...]
    source: str = ""  # file:line it was read from
    id: str = ""
    note: str = ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _judgment(raw: object, i: int) -> tuple[Judgment | None, list[str]]:
    where = f"relevant[{i}]"
    if not isinstance(raw, dict):
        return None, [f"{where} must be an object, got {raw!r}"]
    errors = []
    unknown = sorted(set(raw) - _JUDGMENT_KEYS)
    if unknown:
        errors.append(
            f"{where}: unknown key(s) {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(_JUDGMENT_KEYS))})"
        )
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        errors.append(f"{where}.path must be a non-empty string")
    else:
        pure = PurePosixPath(path)
        if "\\" in path or pure.is_absolute() or ".." in pure.parts or path != str(pure):
            errors.append(
                f"{where}.path must be relative to the repository root, normalized, with "
                f"'/' separators, got {path!r}"
            )
    grade = raw.get("grade")
    if not _is_int(grade) or not 1 <= grade <= 3:
        errors.append(f"{where}.grade must be 1, 2 or 3, got {grade!r}")
    start, end = raw.get("start_line"), raw.get("end_line")
    if (start is None) != (end is None):
        errors.append(f"{where}: give both start_line and end_line, or neither")
    elif start is not None:
        if not _is_int(start) or not _is_int(end) or start < 1 or end < 1:
            errors.append(
                f"{where}: start_line and end_line must be positive integers, got "
                f"{start!r} and {end!r}"
            )
        elif end < start:
            errors.append(f"{where}: end_line {end} is before start_line {start}")
    symbol = raw.get("symbol", "")
    if not isinstance(symbol, str) or ("symbol" in raw and not symbol.strip()):
        errors.append(f"{where}.symbol must be a non-empty string, got {symbol!r}")
    if errors:
        return None, errors
    return Judgment(path=path, grade=grade, start_line=start, end_line=end, symbol=symbol), []


def _query(raw: object) -> tuple[EvalQuery | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"each line must be a JSON object, got {type(raw).__name__}"]
    errors = []
    unknown = sorted(set(raw) - _QUERY_KEYS)
    if unknown:
        errors.append(
            f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(_QUERY_KEYS))})"
        )
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        errors.append("query must be a non-empty string")
    intent = raw.get("intent")
    if intent not in INTENTS:
        errors.append(f"intent must be one of {', '.join(INTENTS)}, got {intent!r}")
    for key in ("id", "note"):
        if key in raw and not isinstance(raw[key], str):
            errors.append(f"{key} must be a string, got {raw[key]!r}")
    judgments: list[Judgment] = []
    relevant = raw.get("relevant")
    if not isinstance(relevant, list) or not relevant:
        errors.append("relevant must be a non-empty list of judgments")
    else:
        for i, item in enumerate(relevant):
            j, errs = _judgment(item, i)
            errors.extend(errs)
            if j is not None:
                judgments.append(j)
    if errors:
        return None, errors
    return (
        EvalQuery(
            query=query,
            intent=intent,
            relevant=tuple(judgments),
            id=raw.get("id", ""),
            note=raw.get("note", ""),
        ),
        [],
    )


def parse_queries(lines: Iterable[str], source: str = "<queries>") -> list[EvalQuery]:
    """Parse JSON Lines; raise one EvalError listing every problem as ``source:line: ...``."""
    out: list[EvalQuery] = []
    errors: list[str] = []
    ids: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: not valid JSON: {e.msg} (column {e.colno})")
            continue
        q, errs = _query(raw)
        errors.extend(f"{where}: {e}" for e in errs)
        if q is None:
            continue
        if q.id:
            if q.id in ids:
                errors.append(f"{where}: id {q.id!r} already used on line {ids[q.id]}")
                continue
            ids[q.id] = lineno
        out.append(EvalQuery(q.query, q.intent, q.relevant, source=where, id=q.id, note=q.note))
    if errors:
        shown = errors[:MAX_ERRORS]
        more = len(errors) - len(shown)
        if more:
            shown.append(f"... and {more} more")
        raise EvalError("invalid eval queries:\n" + "\n".join(shown))
    if not out:
        raise EvalError(f"{source}: no queries (expected one JSON object per line)")
    return out


def load_queries(path: Path) -> list[EvalQuery]:
    """Read and validate a JSON Lines query file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvalError(f"{path}: no such query file") from None
    except UnicodeDecodeError as e:
        raise EvalError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise EvalError(f"{path}: cannot read: {e.strerror}") from None
    return parse_queries(text.splitlines(), source=str(path))


def check_against_repo(queries: Sequence[EvalQuery], root: Path) -> list[str]:
    """Judgments that do not fit the checkout: a missing file or symbol, lines past its end."""
    problems = []
    texts: dict[str, str | None] = {}
    for q in queries:
        for j in q.relevant:
            if j.path not in texts:
                try:
                    texts[j.path] = (root / j.path).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    texts[j.path] = None
            text = texts[j.path]
            if text is None:
                problems.append(f"{q.source}: {j.path}: no such file in {root}")
                continue
            n = len(text.splitlines())
            leaf = re.split(r"\.| > ", j.symbol)[-1].strip() if j.symbol else ""
            if leaf and leaf not in text:
                problems.append(f"{q.source}: {j.path}: symbol {j.symbol!r} is not in the file")
            if j.end_line is not None and j.end_line > n:
                problems.append(
                    f"{q.source}: {j.path}:{j.start_line}-{j.end_line} is past the end of "
                    f"the file ({n} lines)"
                )
    return problems


def eval_query_json(q: EvalQuery) -> dict[str, Any]:
    """One eval JSON Lines object (llmc.eval.queries format) of an EvalQuery."""
    rel = []
    for j in q.relevant:
        item: dict[str, Any] = {"path": j.path, "grade": j.grade}
        if j.start_line is not None:
            item["start_line"], item["end_line"] = j.start_line, j.end_line
        if j.symbol:
            item["symbol"] = j.symbol
        rel.append(item)
    out: dict[str, Any] = {"query": q.query, "intent": q.intent, "relevant": rel}
    if q.id:
        out["id"] = q.id
    if q.note:
        out["note"] = q.note
    return out


def write_eval_queries(queries: Sequence[EvalQuery], path: Path) -> Path:
    """Write an eval query file atomically (temp + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(
        "".join(json.dumps(eval_query_json(q), ensure_ascii=False) + "\n" for q in queries),
        encoding="utf-8",
    )
    os.replace(tmp, path)
    return path


__all__ = [
    "eval_query_json",
    "write_eval_queries",
    "INTENTS",
    "EvalQuery",
    "Judgment",
    "check_against_repo",
    "load_queries",
    "parse_queries",
]
