"""Task (b)'s pooling: a project prepared (archive indexed, questions labelled), every
system's results, the unjudged top results written blind for a judge, and graded lines
merged back into the judged files (the workflow: ``questions.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.protocol.core import GREP
from lab.protocol.question_files import (
    QuestionFile,
    check_paths,
    judged_path,
    load_judged,
    load_question_file,
    parse_judged,
    question_path,
)
from lab.protocol.question_labels import (
    K,
    Label,
    answer_labels,
    covered,
    index_spans,
    judged_labels,
)
from llmc.errors import EvalError

log = logging.getLogger(__name__)

POOL_DEPTH = 5
TOJUDGE_NAME = "questions-tojudge.jsonl"
SOURCES_NAME = "questions-tojudge-sources.jsonl"  # which system returned what (not for judges)


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
    from lab.protocol.grep import GrepSearcher
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


__all__ = [
    "POOL_DEPTH",
    "SOURCES_NAME",
    "TOJUDGE_NAME",
    "Prepared",
    "merge",
    "pool_project",
    "prepare",
    "search_all",
    "unjudged",
    "with_questions",
]
