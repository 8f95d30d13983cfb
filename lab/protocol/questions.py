"""Task (b) of the protocol: hand-written developer questions, graded 0-3, labels pooled
from the top 5 of every system (docs/evaluation.md, "Hand-written questions (task (b))").

Judging workflow (for anyone writing questions for a project)::

    # 1. write lab/protocol/questions/<project>.json (format below) from reading the
    #    project, BEFORE any system is run; check it (loads, anchors every answer):
    python -m lab protocol --task questions --check --project sqlparse
    # 2. pool: every system of the protocol answers every question; each top-5 result no
    #    label covers yet is written to <eval cache>/protocol/<name>-<version>/questions-tojudge.jsonl
    #    (blind: which system returned what is in questions-tojudge-sources.jsonl beside it)
    python -m lab protocol --task questions --pool --project sqlparse
    # 3. judge: open that file, read each span (its text is in the line), set "grade" 0-3
    #    (leave null to skip), then append the graded lines to the judged file:
    python -m lab.protocol.questions merge <to-judge file> --judge NAME
    #    (repeat 2-3 until the pool command reports 0 to judge; optionally pool ranks 6-10
    #    too, so nothing the @10 metrics see is unjudged:
    #    python -m lab.protocol.questions pool --project sqlparse --depth 10)
    # 4. report: every system, per project and pooled, CIs, paired tests, Code@3; refuses
    #    while any system's top 5 holds an unjudged result
    python -m lab protocol --task questions [--project sqlparse]

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
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.protocol import question_files as _files
from lab.protocol.core import (
    GREP,
    QUESTIONS,
    SYSTEMS,
    ProjectRun,
    ProtocolReport,
    _count_spans,
    numbers,
    pooled_numbers,
)
from lab.protocol.question_files import (
    INTENTS,
    QUESTIONS_DIR,
    Answer,
    Judged,
    Question,
    QuestionFile,
    check_paths,
    judged_path,
    load_judged,
    load_question_file,
    parse_judged,
    parse_question_file,
    question_path,
)
from lab.protocol.question_labels import (
    K,
    Label,
    anchor,
    answer_labels,
    covered,
    credited,
    index_spans,
    judged_labels,
    label_matches,
    score,
)
from lab.protocol.question_pool import (
    POOL_DEPTH,
    SOURCES_NAME,
    TOJUDGE_NAME,
    Prepared,
    merge,
    pool_project,
    prepare,
    search_all,
    unjudged,
    with_questions,
)
from llmc.errors import EvalError
from llmc.eval.metrics import QueryScores

TASK = QUESTIONS


def run_project(
    sp: Any, systems: Sequence[str], *, cache_dir: Path, k: int = K, resamples: int = 2000,
    seed: int = 0, fetch: Any, searcher_factory: Any = None, progress: Any = None,
    base: Path | None = None, allow_unjudged: bool = False,
) -> Any:  # fmt: skip
    """One project under this task, as a ``run.ProjectRun``. Refuses (EvalError) when a
    system's top 5 holds a result no label covers, unless ``allow_unjudged`` (then each
    such system is named in the run's warnings)."""

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
            + f"\npool and judge them: python -m lab protocol --task questions --pool --project {sp.project.name}"
        )
    return ProjectRun(
        sp.project, sp.split, TASK, prep.root, prep.questions.path or Path(), _count_spans(prep.root),
        scores, numbers(scores, None, resamples=resamples, seed=seed), warnings, time.perf_counter() - started,
    )  # fmt: skip


def _resolve(
    split: str, projects: Sequence[str], systems: Sequence[str] | None, base: Path
) -> tuple[list[Any], list[str], list[str]]:
    """(projects with a question file, systems to run, systems skipped: stage not built)."""
    from lab.protocol.splits import select_projects
    from llmc.config import Config
    from llmc.eval.runner import VARIANTS, available_variants

    names = list(dict.fromkeys(systems or SYSTEMS))
    bad = [s for s in names if s != GREP and s not in VARIANTS]
    if bad:
        raise EvalError(f"unknown system(s) {', '.join(bad)} (known: grep, {', '.join(VARIANTS)})")
    available = set(available_variants(Config())) | {GREP}
    chosen = with_questions(select_projects(split, list(projects)), base)
    if not chosen:
        raise EvalError(
            f"no project of the {split} split{' named' if projects else ''} has a question file in {base or _files.QUESTIONS_DIR}"
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
    """``python -m lab protocol --task questions --pool``: pool every project with questions
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
    for path in sorted((base or _files.QUESTIONS_DIR).glob("*.json")):
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

    parser = argparse.ArgumentParser(prog="python -m lab.protocol.questions")
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
    "K",
    "POOL_DEPTH",
    "SOURCES_NAME",
    "TOJUDGE_NAME",
    "Prepared",
    "index_spans",
    "search_all",
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
