"""Task (b)'s files: question files (``questions/<project>.json``) and judged files
(``questions/<project>.judged.jsonl``), read and checked (formats: ``questions.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from llmc.errors import EvalError

QUESTIONS_DIR = Path(__file__).parent / "questions"
INTENTS = ("code", "docs", "mixed")
_FILE_KEYS = {"project", "version", "questions", "author", "note"}
_QUESTION_KEYS = {"id", "text", "intent", "answers", "note"}
_ANSWER_KEYS = {"path", "symbol", "heading", "start_line", "end_line", "grade", "note"}
_JUDGED_KEYS = {"id", "path", "start_line", "end_line", "grade", "symbol", "heading", "judge",
                "note", "project", "question", "systems", "text", "kind"}  # fmt: skip


# -- files --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    path: str
    grade: int
    symbol: str = ""
    heading: str = ""
    start_line: int | None = None
    end_line: int | None = None


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    intent: str
    answers: tuple[Answer, ...]


@dataclass(frozen=True)
class QuestionFile:
    project: str
    version: str
    questions: tuple[Question, ...]
    path: Path | None = None


@dataclass(frozen=True)
class Judged:
    id: str
    path: str
    start_line: int
    end_line: int
    grade: int  # 0-3
    symbol: str = ""
    judge: str = ""
    note: str = ""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _path_error(path: object, where: str) -> str | None:
    if not isinstance(path, str) or not path.strip():
        return f"{where}.path is missing or empty"
    pure = PurePosixPath(path)
    if "\\" in path or pure.is_absolute() or ".." in pure.parts or path != str(pure):
        return f"{where}.path must be relative to the project root, normalized, '/'-separated: {path!r}"
    return None


def _lines_error(raw: dict, where: str) -> str | None:
    start, end = raw.get("start_line"), raw.get("end_line")
    if start is None and end is None:
        return None
    if start is None or end is None:
        return f"{where}: give both start_line and end_line, or neither"
    if not _is_int(start) or not _is_int(end) or start < 1 or end < start:
        return f"{where}: lines must be integers with 1 <= start_line <= end_line, got {start!r}-{end!r}"
    return None


def _answer(raw: object, where: str) -> tuple[Answer | None, list[str]]:
    if not isinstance(raw, dict):
        return None, [f"{where} must be an object"]
    errors = (
        [f"{where}: unknown key(s) {', '.join(sorted(set(raw) - _ANSWER_KEYS))}"]
        if set(raw) - _ANSWER_KEYS
        else []
    )
    if (e := _path_error(raw.get("path"), where)) is not None:
        errors.append(e)
    grade = raw.get("grade")
    if not _is_int(grade) or not 1 <= grade <= 3:
        errors.append(f"{where}.grade must be 1, 2 or 3 (an answer is relevant), got {grade!r}")
    if (e := _lines_error(raw, where)) is not None:
        errors.append(e)
    named = [k for k in ("symbol", "heading") if k in raw]
    for key in named:
        if not isinstance(raw[key], str) or not raw[key].strip():
            errors.append(f"{where}.{key} must be a non-empty string")
    if len(named) + ("start_line" in raw) > 1:
        errors.append(f"{where}: give one of symbol, heading or lines")
    if errors:
        return None, errors
    return (
        Answer(
            raw["path"],
            grade,
            raw.get("symbol", ""),
            raw.get("heading", ""),
            raw.get("start_line"),
            raw.get("end_line"),
        ),  # fmt: skip
        [],
    )


def parse_question_file(doc: object, source: str = "<questions>") -> QuestionFile:
    """A question file's document, checked; every problem at once, as one EvalError."""
    if not isinstance(doc, dict):
        raise EvalError(f"{source}: must be a JSON object with project, version, questions")
    errors = []
    if set(doc) - _FILE_KEYS:
        errors.append(f"unknown key(s) {', '.join(sorted(set(doc) - _FILE_KEYS))}")
    for key in ("project", "version"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            errors.append(f"{key} must be a non-empty string")
    raw_qs = doc.get("questions")
    if not isinstance(raw_qs, list) or not raw_qs:
        errors.append("questions must be a non-empty list")
        raw_qs = []
    questions, seen = [], set()
    for i, raw in enumerate(raw_qs):
        where = f"questions[{i}]"
        if not isinstance(raw, dict):
            errors.append(f"{where} must be an object")
            continue
        qid = raw.get("id")
        where = f"questions[{i}] ({qid})" if isinstance(qid, str) else where
        if set(raw) - _QUESTION_KEYS:
            errors.append(f"{where}: unknown key(s) {', '.join(sorted(set(raw) - _QUESTION_KEYS))}")
        if not isinstance(qid, str) or not qid.strip():
            errors.append(f"{where}.id must be a non-empty string")
        elif qid in seen:
            errors.append(f"{where}.id {qid!r} is used twice")
        seen.add(qid)
        if not isinstance(raw.get("text"), str) or not raw["text"].strip():
            errors.append(f"{where}.text must be a non-empty string")
        if raw.get("intent") not in INTENTS:
            errors.append(
                f"{where}.intent must be one of {', '.join(INTENTS)}, got {raw.get('intent')!r}"
            )
        raw_as = raw.get("answers")
        if not isinstance(raw_as, list) or not raw_as:
            errors.append(f"{where}.answers must be a non-empty list")
            continue
        answers = []
        for j, ra in enumerate(raw_as):
            a, errs = _answer(ra, f"{where}.answers[{j}]")
            errors += errs
            if a is not None:
                answers.append(a)
        if len(answers) == len(raw_as) and not any(a.grade >= 2 for a in answers):
            errors.append(f"{where}: needs an answer of grade 2 or 3")
        if not errors:
            questions.append(Question(qid, raw["text"].strip(), raw["intent"], tuple(answers)))
    if errors:
        shown = "\n".join(f"{source}: {e}" for e in errors[:30])
        more = f"\n... and {len(errors) - 30} more" if len(errors) > 30 else ""
        raise EvalError(f"{len(errors)} problem(s) in the question file:\n{shown}{more}")
    return QuestionFile(doc["project"], doc["version"], tuple(questions))


def question_path(project: str, base: Path | None = None) -> Path:
    """The project's question file (``base``: default ``QUESTIONS_DIR``, read at call time)."""
    return (base or QUESTIONS_DIR) / f"{project}.json"


def judged_path(project: str, base: Path | None = None) -> Path:
    return (base or QUESTIONS_DIR) / f"{project}.judged.jsonl"


def load_question_file(path: Path) -> QuestionFile:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"{path}: no such question file") from None
    except json.JSONDecodeError as e:
        raise EvalError(f"{path}: not JSON ({e})") from None
    qf = parse_question_file(doc, str(path))
    return QuestionFile(qf.project, qf.version, qf.questions, path)


def check_paths(qf: QuestionFile, root: Path) -> None:
    """Every answer's file exists in the project and its lines fit; EvalError otherwise."""
    errors = []
    for q in qf.questions:
        for a in q.answers:
            f = root / a.path
            if not f.is_file():
                errors.append(f"{q.id}: {a.path}: no such file in {root.name}")
            elif a.end_line is not None:
                n = len(f.read_text(encoding="utf-8", errors="replace").split("\n"))
                if a.end_line > n:
                    errors.append(
                        f"{q.id}: {a.path}: end_line {a.end_line} past the file's {n} lines"
                    )
    if errors:
        raise EvalError(f"{len(errors)} answer(s) do not fit the project:\n" + "\n".join(errors))


def parse_judged(
    lines: Iterable[str], source: str = "<judged>", *, allow_null: bool = False
) -> list[Judged]:
    """Judgments, checked (``allow_null``: lines with ``grade`` null are skipped)."""
    out, errors = [], []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: not JSON ({e})")
            continue
        if not isinstance(raw, dict):
            errors.append(f"{where}: must be an object")
            continue
        if set(raw) - _JUDGED_KEYS:
            errors.append(f"{where}: unknown key(s) {', '.join(sorted(set(raw) - _JUDGED_KEYS))}")
        if not isinstance(raw.get("id"), str) or not raw["id"]:
            errors.append(f"{where}: id must name a question")
        if (e := _path_error(raw.get("path"), where)) is not None:
            errors.append(e)
        if "start_line" not in raw or (e := _lines_error(raw, where)) is not None:
            errors.append(e or f"{where}: a judgment needs start_line and end_line")
        grade = raw.get("grade")
        if grade is None and allow_null:
            continue
        if not _is_int(grade) or not 0 <= grade <= 3:
            errors.append(f"{where}: grade must be 0, 1, 2 or 3, got {grade!r}")
        if errors:
            continue
        out.append(
            Judged(
                raw["id"],
                raw["path"],
                raw["start_line"],
                raw["end_line"],
                grade,
                str(raw.get("symbol") or raw.get("heading") or ""),
                str(raw.get("judge", "")),
                str(raw.get("note", "")),
            )  # fmt: skip
        )
    if errors:
        raise EvalError(f"{len(errors)} problem(s) in judgments:\n" + "\n".join(errors[:30]))
    return out


def load_judged(path: Path) -> list[Judged]:
    if not path.is_file():
        return []
    return parse_judged(path.read_text(encoding="utf-8").split("\n"), str(path))


__all__ = [
    "INTENTS",
    "QUESTIONS_DIR",
    "Answer",
    "Judged",
    "Question",
    "QuestionFile",
    "check_paths",
    "judged_path",
    "load_judged",
    "load_question_file",
    "parse_judged",
    "parse_question_file",
    "question_path",
]
