"""Task (b)'s labels: answers anchored in the index, judged spans, how a result matches
them, and a question's metrics (the rules: ``questions.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.protocol.question_files import Answer, Judged, Question, QuestionFile
from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores, code_at, dcg

K = 10
_ATTRS = re.compile(r"\s*\{\s*[:#.][^}]*\}\s*$")


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


__all__ = [
    "K",
    "Label",
    "anchor",
    "answer_labels",
    "covered",
    "credited",
    "index_spans",
    "judged_labels",
    "label_matches",
    "score",
]
