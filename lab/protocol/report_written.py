"""Task (d)'s **written** reports: where a history has few commits that read like a report,
a question writer writes one from a real change (issue 28: "reports written by a question
writer from the fix's diff and the code before the fix").

The writer sees one task (c) commit at a time (its message, its diff, the code before it)
and writes what the person who hit the problem would have filed before the change: a title
and a body describing the symptom or the need, never naming a changed file or an internal
definition unless a traceback the user saw would show it. No search system has run when the
reports are written. The **answer** is the commit's task (c) answer cut as a mined report's
is (``report_queries.answer_files``: grade 2 and 3, the non-test source and docs present in
the base), taken from ``commits/<project>.jsonl``, so the writer never touches a label.

``reports/<project>.written.jsonl`` holds the assembled queries (``id`` ``written:<sha12>``,
the writer and the commit in ``note``); ``load_report_queries`` reads them after the mined
ones. Assemble from a writer's file (``{"commit", "title", "body", "kind"}`` or
``{"commit", "skipped"}`` a line)::

    python -m lab.protocol.report_written NAME WRITER_FILE --author "helper-x (LLM)"
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.protocol.report_queries import report_text
from llmc.errors import EvalError
from llmc.eval.queries import EvalQuery, load_queries, write_eval_queries

SETS_DIR = Path(__file__).parent / "reports"
COMMITS_DIR = Path(__file__).parent / "commits"
ID_PREFIX = "written:"
MIN_ANSWER_GRADE = 2  # as a mined report's answer (report_queries.answer_files)


def written_path(name: str, sets_dir: Path | None = None) -> Path:
    return (sets_dir or SETS_DIR) / f"{name.lower()}.written.jsonl"


def load_written(name: str, sets_dir: Path | None = None) -> list[EvalQuery]:
    """The written reports of ``name`` ([] when it has none)."""
    path = written_path(name, sets_dir)
    return load_queries(path) if path.is_file() else []


def commit_answers(name: str, commits_dir: Path | None = None) -> dict[str, EvalQuery]:
    """Task (c)'s queries of ``name`` by full commit sha (from their ``note``)."""
    path = (commits_dir or COMMITS_DIR) / f"{name.lower()}.jsonl"
    out = {}
    for q in load_queries(path):
        parts = (q.note or "").split()
        if len(parts) >= 2 and parts[0] == "commit":
            out[parts[1]] = q
    return out


def assemble(
    name: str, rows: Sequence[dict[str, Any]], author: str, commits_dir: Path | None = None
) -> tuple[list[EvalQuery], dict[str, int]]:
    """The queries of a writer's rows and counts (written, skipped, no answer left)."""
    by_sha = commit_answers(name, commits_dir)
    queries: list[EvalQuery] = []
    counts = {"written": 0, "skipped by the writer": 0, "no source or docs answer": 0}
    for i, row in enumerate(rows):
        sha = str(row.get("commit", ""))
        commit = by_sha.get(sha)
        if commit is None:
            raise EvalError(f"row {i}: commit {sha[:12] or '?'} is not a task (c) query of {name}")
        if row.get("skipped"):
            counts["skipped by the writer"] += 1
            continue
        title, body = str(row.get("title", "")).strip(), str(row.get("body", "")).strip()
        if not title or not body:
            raise EvalError(f"row {i}: a written report needs a title and a body")
        answer = tuple(j for j in commit.relevant if j.grade >= MIN_ANSWER_GRADE)
        if not answer:
            counts["no source or docs answer"] += 1
            continue
        kind = str(row.get("kind", "other"))
        queries.append(
            EvalQuery(
                query=report_text(title, body),
                intent=commit.intent,
                relevant=answer,
                id=f"{ID_PREFIX}{sha[:12]}",
                note=f"written by {author} from commit {sha} ({kind})",
            )
        )
        counts["written"] += 1
    return queries, counts


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m lab.protocol.report_written")
    ap.add_argument("name")
    ap.add_argument("writer_file", type=Path)
    ap.add_argument("--author", required=True)
    args = ap.parse_args(argv)
    lines = args.writer_file.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(ln) for ln in lines if ln.strip()]
    queries, counts = assemble(args.name, rows, args.author)
    path = write_eval_queries(queries, written_path(args.name))
    print(f"{args.name}: {counts} -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["ID_PREFIX", "assemble", "commit_answers", "load_written", "written_path"]
