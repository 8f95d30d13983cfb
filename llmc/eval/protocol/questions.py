"""Task (b) of the protocol: hand-written developer questions, graded 0-3, labels pooled
from the top 5 of every system (docs/evaluation.md, "Task (b)").

Judging workflow (for anyone writing questions for a project)::

    # 1. write llmc/eval/protocol/questions/<project>.json (format below) from reading the
    #    project, BEFORE any system is run; check it (loads, anchors every answer):
    llmc eval --protocol --task questions --check --project sqlparse
    # 2. pool: every system of the protocol answers every question; each top-5 result no
    #    label covers yet is written to <eval cache>/protocol/<name>-<version>/questions-tojudge.jsonl
    #    (blind: which system returned what is in questions-tojudge-sources.jsonl beside it)
    llmc eval --protocol --task questions --pool --project sqlparse
    # 3. judge: open that file, read each span (its text is in the line), set "grade" 0-3
    #    (leave null to skip), then append the graded lines to the judged file:
    python -m llmc.eval.protocol.questions merge <to-judge file> --judge NAME
    #    (repeat 2-3 until the pool command reports 0 to judge; optionally pool ranks 6-10
    #    too, so nothing the @10 metrics see is unjudged:
    #    python -m llmc.eval.protocol.questions pool --project sqlparse --depth 10)
    # 4. report: every system, per project and pooled, CIs, paired tests, Code@3; refuses
    #    while any system's top 5 holds an unjudged result
    llmc eval --protocol --task questions [--project sqlparse]

Question file ``questions/<project>.json``::

    {"project": "sqlparse", "version": "0.6.1",
     "questions": [{"id": "sqlparse-01", "text": "how does the lexer decide ...",
                    "intent": "code",   # code | docs | mixed
                    "answers": [{"path": "sqlparse/lexer.py", "symbol": "Lexer.get_tokens", "grade": 3},
                                {"path": "docs/source/api.rst", "heading": "Formatting of SQL Statements", "grade": 2},
                                {"path": "sqlparse/filters/others.py", "start_line": 10, "end_line": 40, "grade": 1},
                                {"path": "CHANGELOG", "grade": 1}]}]}

An answer names a ``symbol`` (the qualified name llmc's chunker gives a definition:
``Lexer.get_tokens``), a ``heading`` (a section title, or the end of its heading path:
``Usage`` or ``Table of Contents > Usage``; attribute suffixes such as ``{: #id }`` are
ignored), lines (``start_line``/``end_line``, 1-based, inclusive, in the unpacked archive),
or only a path (the whole file). Grades: 3 answers the question, 2 substantially helpful,
1 related. The author writes the answers from the project, before any system ran.

Judged file ``questions/<project>.judged.jsonl``, one judgment a line::

    {"id": "sqlparse-01", "path": "sqlparse/lexer.py", "start_line": 90, "end_line": 152,
     "grade": 0, "symbol": "Lexer.get_tokens", "judge": "NAME", "note": "optional"}

``grade`` 0 = irrelevant, 1 related, 2 substantially helpful, 3 answers it; ``symbol`` (or
``heading``) is informational (the span's qualified name when the index has one); the
lines are the judged span's. Extra keys of a to-judge line (``project``, ``question``,
``systems``, ``text``) may stay.

Matching a result (an index span: path, start_line, end_line) to a label:

- an **answer** with a symbol or heading is anchored in the index of the unstripped
  archive: the spans of its file with that qualified name (a heading: whose heading path
  ends with it) and those nested in it, from the first line of the first to the last line
  of the last; a result matches it when their lines overlap (the protocol's rule). Lines
  given: overlap with those. Path only: any result in the file. An answer that does not
  anchor is an error (no silent fallback);
- a **judged span** matches a result whose lines lie within it (same path), so a judgment
  of one span never grades a wider or a neighbouring one;
- a result is **covered** when it matches an answer or lies within a judged span of any
  grade (0 included). Pooling lists the top-5 results no label covers.

Judged spans are index spans: when the chunker or a system changes what it returns, the new
spans are unjudged, the report refuses, and pooling again lists them (answers, anchored by
symbol or heading, follow the code).

Metrics per question (k = 10, ``llmc.eval.metrics``' credit rule: each label is credited at
most once, to the best-ranked result it matches, which takes the highest-graded label it
matches): nDCG@10 with gain 2^grade - 1 over every label of grade >= 1 (ideal: their grades,
best first); MRR@10 = 1 / rank of the first result matching a label of grade >= 2 (0 when
none in the top 10); Hit@5 = such a result in the top 5; Code@3 (code-intent questions) =
a code file in the top 3.

The corpus is the project's unstripped archive (``<eval cache>/<name>-<version>``, the
protocol's fetch), indexed in place once.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores, code_at, dcg

log = logging.getLogger(__name__)

TASK = "questions"
QUESTIONS_DIR = Path(__file__).parent / "questions"
INTENTS = ("code", "docs", "mixed")
POOL_DEPTH = 5
K = 10
TOJUDGE_NAME = "questions-tojudge.jsonl"
SOURCES_NAME = "questions-tojudge-sources.jsonl"  # which system returned what (not for judges)
_FILE_KEYS = {"project", "version", "questions", "author", "note"}
_QUESTION_KEYS = {"id", "text", "intent", "answers", "note"}
_ANSWER_KEYS = {"path", "symbol", "heading", "start_line", "end_line", "grade", "note"}
_JUDGED_KEYS = {"id", "path", "start_line", "end_line", "grade", "symbol", "heading", "judge",
                "note", "project", "question", "systems", "text", "kind"}  # fmt: skip
_ATTRS = re.compile(r"\s*\{\s*[:#.][^}]*\}\s*$")


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


# -- anchoring and matching ---------------------------------------------------------------
@dataclass(frozen=True)
class Label:
    """A graded place: ``rule`` "overlap" (an answer) or "within" (a judged span); no lines:
    the whole file."""

    path: str
    start_line: int | None
    end_line: int | None
    grade: int
    rule: str = "overlap"
    source: str = ""  # what it came from, for reports


def _norm(heading: str) -> str:
    parts = [_ATTRS.sub("", p).strip().strip("`").strip().lower() for p in heading.split(" > ")]
    return " > ".join(re.sub(r"\s+", " ", p) for p in parts)


def _nested(qualname: str, name: str, sep: str) -> bool:
    return qualname == name or qualname.startswith(name + sep)


def anchor(answer: Answer, spans: Sequence[Any]) -> tuple[int, int] | None:
    """The lines of ``answer``'s symbol or heading among ``spans`` (one file's index spans:
    ``qualname``, ``symbol``, ``start_line``, ``end_line``): the named spans and those nested
    in them. None when nothing matches, or when a heading names two unrelated sections."""
    if answer.symbol:
        found = [s for s in spans if _nested(s.qualname, answer.symbol, ".")] or [
            s for s in spans if s.symbol == answer.symbol
        ]
    else:
        want = _norm(answer.heading)
        tops = set()
        for s in spans:  # a heading with no text of its own has no span: match prefixes
            parts = s.qualname.split(" > ") if s.qualname else []
            for i in range(len(parts)):
                prefix = _norm(" > ".join(parts[: i + 1]))
                if prefix == want or prefix.endswith(" > " + want):
                    tops.add(" > ".join(parts[: i + 1]))
        roots = [t for t in tops if not any(t != o and t.startswith(o + " > ") for o in tops)]
        if len(roots) != 1:
            return None
        found = [s for s in spans if _nested(s.qualname, roots[0], " > ")]
    if not found:
        return None
    return min(s.start_line for s in found), max(s.end_line for s in found)


def index_spans(root: Path, paths: Iterable[str] | None = None) -> dict[str, list[Any]]:
    """The index's spans of ``root`` by path (all paths when None)."""
    from llmc.paths import db_path
    from llmc.store.db import Store

    if not db_path(root).exists():
        raise EvalError(f"{root}: no index (run the protocol or `llmc index {root}` first)")
    store = Store(db_path(root), readonly=True)
    try:
        if paths is None:
            out: dict[str, list[Any]] = {}
            for s in store.iter_spans():
                out.setdefault(s.span.path, []).append(s.span)
            return out
        return {p: [s.span for s in store.spans_for_path(p)] for p in sorted(set(paths))}
    finally:
        store.close()


def answer_labels(qf: QuestionFile, spans: dict[str, list[Any]]) -> dict[str, list[Label]]:
    """Each question's answers as labels, symbols and headings anchored; EvalError listing
    every answer that does not anchor."""
    out, errors = {}, []
    for q in qf.questions:
        labels = []
        for a in q.answers:
            lines: tuple[int | None, int | None] = (a.start_line, a.end_line)
            name = a.symbol or a.heading
            if name:
                got = anchor(a, spans.get(a.path, []))
                if got is None:
                    kind = "symbol" if a.symbol else "heading"
                    errors.append(
                        f"{q.id}: {a.path}: {kind} {name!r} is not (uniquely) in the index"
                    )
                    continue
                lines = got
            labels.append(Label(a.path, lines[0], lines[1], a.grade, "overlap", name or a.path))
        out[q.id] = labels
    if errors:
        raise EvalError(f"{len(errors)} answer(s) do not anchor:\n" + "\n".join(errors))
    return out


def judged_labels(judged: Sequence[Judged]) -> dict[str, list[Label]]:
    out: dict[str, list[Label]] = {}
    for j in judged:
        out.setdefault(j.id, []).append(
            Label(j.path, j.start_line, j.end_line, j.grade, "within", j.symbol or "judged")
        )
    return out


def label_matches(result: Any, label: Label) -> bool:
    if result.path != label.path:
        return False
    if label.start_line is None or label.end_line is None:
        return True
    if label.rule == "within":
        return label.start_line <= result.start_line and result.end_line <= label.end_line
    return result.start_line <= label.end_line and label.start_line <= result.end_line


def covered(result: Any, answers: Sequence[Label], judged: Sequence[Label]) -> bool:
    """Whether a label decides this result's grade (answers, or judged spans of any grade)."""
    return any(label_matches(result, a) for a in answers) or any(
        label_matches(result, j) for j in judged
    )


# -- scoring ------------------------------------------------------------------------------
def credited(results: Sequence[Any], labels: Sequence[Label], k: int = K) -> list[int]:
    """Each top-``k`` result's gain: the highest-graded label it matches that no better-ranked
    result took (metrics.credited_gains with this module's matching)."""
    taken = [False] * len(labels)
    gains = []
    for r in results[:k]:
        best = -1
        for i, label in enumerate(labels):
            if (
                not taken[i]
                and label_matches(r, label)
                and (best < 0 or label.grade > labels[best].grade)
            ):
                best = i
        if best >= 0:
            taken[best] = True
        gains.append(labels[best].grade if best >= 0 else 0)
    return gains


def score(
    question: Question, results: Sequence[Any], labels: Sequence[Label], took_ms: float = 0.0
) -> QueryScores:
    """The question's metrics (module docstring); ``labels``: grade >= 1 only."""
    positive = [x for x in labels if x.grade >= 1]
    strong = [x for x in positive if x.grade >= 2]
    ideal = dcg(sorted((x.grade for x in positive), reverse=True)[:K])
    ndcg = dcg(credited(results, positive, K)) / ideal if ideal > 0 else 0.0
    first = next(
        (i for i, r in enumerate(results[:K], 1) if any(label_matches(r, x) for x in strong)), None
    )

    def recall(k: int) -> float:
        top = results[:k]
        return (
            sum(any(label_matches(r, x) for r in top) for x in positive) / len(positive)
            if positive
            else 0.0
        )

    def file_recall(k: int) -> float:
        want = {x.path for x in positive}
        return len(want & {r.path for r in results[:k]}) / len(want) if want else 0.0

    return QueryScores(
        query=question.text,
        intent=question.intent,
        rr=1.0 / first if first else 0.0,
        ndcg=ndcg,
        span_recall_5=recall(5),
        span_recall_10=recall(10),
        file_recall_5=file_recall(5),
        file_recall_10=file_recall(10),
        hit_5=first is not None and first <= 5,
        code_3=code_at(results, 3) if question.intent == "code" else None,
        took_ms=took_ms,
    )


# -- running ------------------------------------------------------------------------------
@dataclass
class Prepared:
    """A project ready to search: its unpacked, indexed archive and labelled questions."""

    project: Any  # llmc.eval.projects.Project
    root: Path
    questions: QuestionFile
    answers: dict[str, list[Label]]
    judged: dict[str, list[Label]]
    cfg: Any


def with_questions(chosen: Sequence[Any], base: Path | None = None) -> list[Any]:
    """The SplitProjects among ``chosen`` that have a question file."""
    return [sp for sp in chosen if question_path(sp.project.name, base).is_file()]


def prepare(
    project: Any,
    cache_dir: Path,
    fetch: Any,
    progress: Any = None,
    base: Path | None = None,
    index: bool = True,
) -> Prepared:
    from llmc.config import load_config
    from llmc.eval.runner import ensure_index

    qf = load_question_file(question_path(project.name, base))
    if (qf.project, qf.version) != (project.name, project.version):
        raise EvalError(
            f"{qf.path}: written for {qf.project} {qf.version}, but the protocol pins "
            f"{project.name} {project.version}"
        )
    root = fetch(project, cache_dir)
    check_paths(qf, root)
    cfg = load_config(root)
    if index:
        if progress is not None:
            progress.note(f"{project.set_name}: indexing the unpacked archive")
        ensure_index(root, cfg, progress)
    answers = answer_labels(
        qf, index_spans(root, {a.path for q in qf.questions for a in q.answers})
    )
    judged = judged_labels(load_judged(judged_path(project.name, base)))
    unknown = sorted(set(judged) - {q.id for q in qf.questions})
    if unknown:
        raise EvalError(
            f"{judged_path(project.name, base)}: judgments of unknown question(s) {', '.join(unknown)}"
        )
    return Prepared(project, root, qf, answers, judged, cfg)


def search_all(
    prep: Prepared, system: str, k: int, searcher_factory: Any = None, progress: Any = None
) -> list[Any]:
    """One system's runs (``llmc.eval.runner.QueryRun``) over every question."""
    from llmc.eval.protocol.grep import GrepSearcher
    from llmc.eval.protocol.run import GREP
    from llmc.eval.queries import EvalQuery
    from llmc.eval.runner import run_variant, variant_config

    if searcher_factory is None:
        from llmc.search import Searcher

        searcher_factory = Searcher
    queries = [EvalQuery(q.text, q.intent, (), id=q.id) for q in prep.questions.questions]
    if progress is not None:
        progress.phase(f"{prep.project.name} {system}", len(queries))
    searcher = (
        GrepSearcher(prep.root)
        if system == GREP
        else searcher_factory(prep.root, variant_config(prep.cfg, system))
    )
    try:
        run = run_variant(
            system, searcher, queries, k, warmup=0 if system == GREP else prep.cfg.eval.warmup,
            on_query=(lambda: progress.advance(1)) if progress is not None else None,
        )  # fmt: skip
    finally:
        close = getattr(searcher, "close", None)
        if callable(close):
            close()
    return run.runs


def unjudged(
    prep: Prepared, runs: Sequence[Any], depth: int = POOL_DEPTH
) -> list[tuple[str, int, Any]]:
    """(question id, rank, result) of every top-``depth`` result no label covers."""
    out = []
    for run in runs:
        qid = run.query.id
        for rank, r in enumerate(run.results[:depth], start=1):
            if not covered(r, prep.answers.get(qid, []), prep.judged.get(qid, [])):
                out.append((qid, rank, r))
    return out


def _span_info(
    root: Path, spans: dict[str, list[Any]], path: str, start: int, end: int
) -> tuple[str, str]:
    name = next(
        (
            s.qualname or s.symbol
            for s in spans.get(path, [])
            if (s.start_line, s.end_line) == (start, end)
        ),
        "",
    )
    try:
        lines = (root / path).read_text(encoding="utf-8", errors="replace").split("\n")
        text = "\n".join(lines[start - 1 : end])
    except OSError:
        text = ""
    return name, text


def pool_project(
    sp: Any, systems: Sequence[str], *, cache_dir: Path, fetch: Any, searcher_factory: Any = None,
    progress: Any = None, base: Path | None = None, depth: int = POOL_DEPTH,
) -> tuple[Path, int, dict[str, int]]:  # fmt: skip
    """Run every system; write the unjudged top-``depth`` results (one line per question ×
    span, sorted by question and place, with no word of which system returned it, so the
    judge is blind to systems) to the project's to-judge file, and which systems returned
    each at what rank to a sidecar (``SOURCES_NAME``, for audits). Returns (the to-judge
    file, lines written, unjudged results per system)."""
    prep = prepare(sp.project, cache_dir, fetch, progress, base)
    todo: dict[tuple[str, str, int, int], list[str]] = {}
    per_system = {}
    for system in systems:
        found = unjudged(
            prep, search_all(prep, system, max(depth, K), searcher_factory, progress), depth
        )
        per_system[system] = len(found)
        for qid, rank, r in found:
            todo.setdefault((qid, r.path, r.start_line, r.end_line), []).append(f"{system}@{rank}")
    text_of = {q.id: q.text for q in prep.questions.questions}
    spans = index_spans(prep.root, {key[1] for key in todo})
    out = cache_dir / "protocol" / sp.project.set_name / TOJUDGE_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh, out.with_name(SOURCES_NAME).open("w") as src:
        for (qid, path, start, end), hits in sorted(todo.items()):
            name, text = _span_info(prep.root, spans, path, start, end)
            row = {"project": sp.project.name, "id": qid, "question": text_of[qid], "path": path,
                   "start_line": start, "end_line": end, "symbol": name, "grade": None,
                   "text": text}  # fmt: skip
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            where = {"id": qid, "path": path, "start_line": start, "end_line": end}
            src.write(json.dumps({**where, "systems": hits}) + "\n")
    log.info("%s: %d results to judge -> %s", sp.project.set_name, len(todo), out)
    return out, len(todo), per_system


def merge(tojudge: Path, judge: str = "", base: Path | None = None) -> dict[str, int]:
    """Append the graded lines of a to-judge file to their projects' judged files (lines
    already judged for that question and span are not added twice). Returns lines added
    per project."""
    lines = tojudge.read_text(encoding="utf-8").split("\n")
    graded = parse_judged(lines, str(tojudge), allow_null=True)
    projects = {}
    for line in lines:
        if line.strip():
            raw = json.loads(line)
            projects[(raw["id"], raw["path"], raw["start_line"], raw["end_line"])] = (
                raw.get("project") or raw["id"].rsplit("-", 1)[0]
            )
    added: dict[str, int] = {}
    for project in sorted(set(projects.values())):
        path = judged_path(project, base)
        have = {(j.id, j.path, j.start_line, j.end_line) for j in load_judged(path)}
        rows = []
        for j in graded:
            key = (j.id, j.path, j.start_line, j.end_line)
            if projects[key] != project or key in have:
                continue
            have.add(key)
            row = {"id": j.id, "path": j.path, "start_line": j.start_line, "end_line": j.end_line,
                   "grade": j.grade, "symbol": j.symbol, "judge": judge or j.judge}  # fmt: skip
            if j.note:
                row["note"] = j.note
            rows.append(json.dumps(row, ensure_ascii=False))
        if rows:
            with path.open("a", encoding="utf-8") as fh:
                fh.write("\n".join(rows) + "\n")
        added[project] = len(rows)
    return added


def run_project(
    sp: Any, systems: Sequence[str], *, cache_dir: Path, k: int = K, resamples: int = 2000,
    seed: int = 0, fetch: Any, searcher_factory: Any = None, progress: Any = None,
    base: Path | None = None, allow_unjudged: bool = False,
) -> Any:  # fmt: skip
    """One project under this task, as a ``run.ProjectRun``. Refuses (EvalError) when a
    system's top 5 holds a result no label covers, unless ``allow_unjudged`` (then each
    such system is named in the run's warnings)."""
    from llmc.eval.protocol.run import ProjectRun, _count_spans, numbers

    started = time.perf_counter()
    prep = prepare(sp.project, cache_dir, fetch, progress, base)
    scores: dict[str, list[QueryScores]] = {}
    warnings = []
    for system in systems:
        runs = search_all(prep, system, max(k, K), searcher_factory, progress)
        missing = unjudged(prep, runs)
        if missing:
            qs = len({m[0] for m in missing})
            warnings.append(
                f"UNJUDGED: {system}: {len(missing)} top-5 result(s) over {qs} question(s) have no label"
            )
        scores[system] = [
            score(q, r.results, prep.answers[q.id] + prep.judged.get(q.id, []), r.took_ms)
            for q, r in zip(prep.questions.questions, runs, strict=True)
        ]
    if warnings and not allow_unjudged:
        raise EvalError(
            f"{sp.project.set_name}: top-5 results nobody judged, so their finds would count as misses:\n"
            + "\n".join(warnings)
            + f"\npool and judge them: llmc eval --protocol --task questions --pool --project {sp.project.name}"
        )
    return ProjectRun(
        sp.project, sp.split, TASK, prep.root, prep.questions.path or Path(), _count_spans(prep.root),
        scores, numbers(scores, None, resamples=resamples, seed=seed), warnings, time.perf_counter() - started,
    )  # fmt: skip


def _resolve(
    split: str, projects: Sequence[str], systems: Sequence[str] | None, base: Path
) -> tuple[list[Any], list[str], list[str]]:
    """(projects with a question file, systems to run, systems skipped: stage not built)."""
    from llmc.config import Config
    from llmc.eval.protocol.run import GREP, SYSTEMS
    from llmc.eval.protocol.splits import select_projects
    from llmc.eval.runner import VARIANTS, available_variants

    names = list(dict.fromkeys(systems or SYSTEMS))
    bad = [s for s in names if s != GREP and s not in VARIANTS]
    if bad:
        raise EvalError(f"unknown system(s) {', '.join(bad)} (known: grep, {', '.join(VARIANTS)})")
    available = set(available_variants(Config())) | {GREP}
    chosen = with_questions(select_projects(split, list(projects)), base)
    if not chosen:
        raise EvalError(
            f"no project of the {split} split{' named' if projects else ''} has a question file in {base or QUESTIONS_DIR}"
        )
    return chosen, [s for s in names if s in available], [s for s in names if s not in available]


def _cache(cache_dir: Path | None) -> Path:
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir

    return cache_dir or default_cache_dir(load_config(None).eval.cache_dir)


def pool(
    split: str = "test", projects: Sequence[str] = (), systems: Sequence[str] | None = None, *,
    cache_dir: Path | None = None, fetch: Any = None, searcher_factory: Any = None,
    progress: Any = None, base: Path | None = None, depth: int = POOL_DEPTH,
) -> dict[str, tuple[Path, int, dict[str, int]]]:  # fmt: skip
    """``llmc eval --protocol --task questions --pool``: pool every project with questions
    (every system of ``run.SYSTEMS`` by default) to ``depth`` (5; up to k = 10 to judge
    every result the metrics see). Returns, per project, its to-judge file, the lines
    written and the unjudged top-``depth`` results of each system."""
    if not 1 <= depth <= K:
        raise EvalError(f"pool depth must be within 1..{K}, got {depth}")
    from llmc.eval.projects import fetch_project

    chosen, names, _skipped = _resolve(split, projects, systems, base)
    return {
        sp.project.name: pool_project(
            sp,
            names,
            cache_dir=_cache(cache_dir),
            fetch=fetch or fetch_project,
            searcher_factory=searcher_factory,
            progress=progress,
            base=base,
            depth=depth,
        )  # fmt: skip
        for sp in chosen
    }


def check(split: str = "test", projects: Sequence[str] = (), *, cache_dir: Path | None = None,
          fetch: Any = None, progress: Any = None, base: Path | None = None) -> dict[str, str]:  # fmt: skip
    """Load, fit and anchor every question file (indexing the archives); a line per project."""
    from llmc.eval.projects import fetch_project

    chosen, _names, _skipped = _resolve(split, projects, None, base)
    out = {}
    for sp in chosen:
        prep = prepare(sp.project, _cache(cache_dir), fetch or fetch_project, progress, base)
        n_j = sum(len(v) for v in prep.judged.values())
        out[sp.project.name] = (
            f"{len(prep.questions.questions)} questions, "
            f"{sum(len(v) for v in prep.answers.values())} answers anchored, {n_j} judgments"
        )
    return out


def run_questions(
    split: str = "test", projects: Sequence[str] = (), systems: Sequence[str] | None = None, *,
    seed: int = 0, resamples: int = 2000, cache_dir: Path | None = None, fetch: Any = None,
    searcher_factory: Any = None, progress: Any = None, base: Path | None = None,
    allow_unjudged: bool = False,
) -> Any:  # fmt: skip
    """This task alone as a ``run.ProtocolReport`` (what ``run_protocol(tasks=("questions",))``
    gives), optionally with unjudged results flagged instead of refused."""
    from llmc.eval.projects import fetch_project
    from llmc.eval.protocol.run import ProtocolReport, pooled_numbers

    chosen, names, skipped = _resolve(split, projects, systems, base)
    runs = [
        run_project(
            sp,
            names,
            cache_dir=_cache(cache_dir),
            resamples=resamples,
            seed=seed,
            fetch=fetch or fetch_project,
            searcher_factory=searcher_factory,
            progress=progress,
            base=base,
            allow_unjudged=allow_unjudged,
        )  # fmt: skip
        for sp in chosen
    ]
    pooled = {TASK: pooled_numbers(runs, resamples=resamples, seed=seed)}
    return ProtocolReport(
        split, (TASK,), tuple(names), K, 0, seed, resamples, runs, pooled, skipped
    )


def counts(base: Path | None = None) -> dict[str, dict[str, int]]:
    """Per project with a question file: questions by intent, judgments by grade."""
    out = {}
    for path in sorted((base or QUESTIONS_DIR).glob("*.json")):
        qf = load_question_file(path)
        row = {
            "questions": len(qf.questions),
            **{i: sum(q.intent == i for q in qf.questions) for i in INTENTS},
        }
        row["answers"] = sum(len(q.answers) for q in qf.questions)
        judged = load_judged(judged_path(qf.project, base))
        row["judged"] = len(judged)
        for g in range(4):
            row[f"judged_{g}"] = sum(j.grade == g for j in judged)
        out[qf.project] = row
    return out


def _main(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m llmc.eval.protocol.questions")
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="append a to-judge file's graded lines to the judged files")
    m.add_argument("tojudge", type=Path)
    m.add_argument("--judge", default="")
    sub.add_parser("counts", help="questions and judgments per project")
    for name in ("pool", "check"):
        sp = sub.add_parser(name, help=f"{name} the projects with questions")
        sp.add_argument("--project", action="append", default=[])
        sp.add_argument("--split", default="test")
        if name == "pool":
            sp.add_argument("--depth", type=int, default=POOL_DEPTH, help="results per system")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "merge":
            for project, n in merge(args.tojudge, args.judge).items():
                print(f"{project}: {n} judgment(s) added to {judged_path(project)}")
        elif args.cmd == "pool":
            for project, (path, n, per) in pool(args.split, args.project, depth=args.depth).items():
                print(f"{project}: {n} to judge -> {path} (unjudged top-{args.depth}: {per})")
        elif args.cmd == "check":
            for project, line in check(args.split, args.project).items():
                print(f"{project}: {line}")
        else:
            print(json.dumps(counts(), indent=1))
    except EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


__all__ = [
    "INTENTS",
    "QUESTIONS_DIR",
    "TASK",
    "Answer",
    "Judged",
    "Label",
    "Question",
    "QuestionFile",
    "anchor",
    "answer_labels",
    "check_paths",
    "counts",
    "covered",
    "credited",
    "judged_labels",
    "judged_path",
    "label_matches",
    "load_judged",
    "load_question_file",
    "merge",
    "parse_judged",
    "parse_question_file",
    "pool",
    "pool_project",
    "run_questions",
    "check",
    "prepare",
    "question_path",
    "run_project",
    "score",
    "unjudged",
    "with_questions",
]

if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
