"""Task (b) of the protocol: hand-written questions, anchoring, graded scoring, pooling and
the refusal of unjudged top-5 results (lab/protocol/questions.py)."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import pytest

from lab.protocol import questions as Q
from lab.protocol.splits import SplitProject
from llmc.errors import EvalError
from llmc.eval.projects import Project

GOOD = {
    "project": "proj",
    "version": "1.0",
    "questions": [
        {
            "id": "proj-01",
            "text": "where is the area of a circle computed",
            "intent": "code",
            "answers": [
                {"path": "pkg/geometry.py", "symbol": "circle_area", "grade": 3},
                {"path": "docs/guide.md", "heading": "Areas", "grade": 1},
            ],
        },
        {
            "id": "proj-02",
            "text": "how do I install proj",
            "intent": "docs",
            "answers": [{"path": "docs/guide.md", "heading": "Install", "grade": 3}],
        },
    ],
}
FILES = {
    "pkg/__init__.py": "",
    "pkg/geometry.py": '''import math


def circle_area(radius):
    """The area of a circle."""
    if radius < 0:
        raise ValueError("negative radius")
    return math.pi * radius * radius


class Polygon:
    def __init__(self, sides):
        self.sides = list(sides)

    def perimeter(self):
        total = 0
        for side in self.sides:
            total += side
        return total
''',
    "docs/guide.md": """# Guide

## Install

Run pip install proj to install the circle helpers.

## Areas {: #areas }

The circle area helper multiplies pi by the radius squared.
""",
}


def _span(path, start, end, qualname="", symbol=""):
    return SimpleNamespace(
        path=path, start_line=start, end_line=end, qualname=qualname, symbol=symbol or qualname
    )


def _doc(**changes):
    doc = copy.deepcopy(GOOD)
    doc["questions"][0].update(changes)
    return doc


# -- files ----------------------------------------------------------------------------------
def test_question_file_loads_and_every_problem_is_reported_at_once():
    qf = Q.parse_question_file(GOOD, "proj.json")
    assert [q.id for q in qf.questions] == ["proj-01", "proj-02"]
    assert qf.questions[0].answers[0] == Q.Answer("pkg/geometry.py", 3, symbol="circle_area")

    bad = _doc(
        intent="howto",
        answers=[
            {"path": "pkg/geometry.py", "symbol": "circle_area", "grade": 4},
            {"symbol": "Polygon", "grade": 2},
            {"path": "/abs/guide.md", "grade": 0},
        ],
    )
    with pytest.raises(EvalError) as err:
        Q.parse_question_file(bad, "proj.json")
    msg = str(err.value)
    assert "proj.json: questions[0] (proj-01).intent must be one of code, docs, mixed" in msg
    assert "answers[0].grade must be 1, 2 or 3" in msg and "got 4" in msg
    assert "answers[1].path is missing or empty" in msg
    assert "answers[2].path must be relative" in msg and "got 0" in msg


def test_question_file_refuses_duplicate_ids_weak_answers_and_two_anchors():
    doc = copy.deepcopy(GOOD)
    doc["questions"][1]["id"] = "proj-01"
    with pytest.raises(EvalError, match="used twice"):
        Q.parse_question_file(doc)
    with pytest.raises(EvalError, match="needs an answer of grade 2 or 3"):
        Q.parse_question_file(_doc(answers=[{"path": "a.py", "grade": 1}]))
    two = {"path": "a.py", "symbol": "f", "heading": "F", "grade": 3}
    with pytest.raises(EvalError, match="one of symbol, heading or lines"):
        Q.parse_question_file(_doc(answers=[two]))


def test_answer_files_must_exist_in_the_project(tmp_path):
    root = tmp_path / "proj"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    Q.check_paths(Q.parse_question_file(GOOD), root)
    doc = _doc(answers=[{"path": "pkg/missing.py", "grade": 3}])
    with pytest.raises(EvalError, match="pkg/missing.py: no such file"):
        Q.check_paths(Q.parse_question_file(doc), root)
    doc = _doc(answers=[{"path": "docs/guide.md", "start_line": 3, "end_line": 99, "grade": 3}])
    with pytest.raises(EvalError, match="end_line 99 past"):
        Q.check_paths(Q.parse_question_file(doc), root)


def test_judged_lines_take_grade_zero_and_refuse_bad_ones():
    line = {"id": "proj-01", "path": "a.py", "start_line": 3, "end_line": 9, "grade": 0}
    assert Q.parse_judged([json.dumps(line)])[0].grade == 0
    with pytest.raises(EvalError, match="grade must be 0, 1, 2 or 3"):
        Q.parse_judged([json.dumps({**line, "grade": 5})], "j.jsonl")
    with pytest.raises(EvalError, match="needs start_line and end_line"):
        Q.parse_judged([json.dumps({"id": "proj-01", "path": "a.py", "grade": 1})])
    assert Q.parse_judged([json.dumps({**line, "grade": None})], allow_null=True) == []


# -- anchoring and matching -------------------------------------------------------------------
def test_symbols_and_headings_anchor_to_their_spans_and_the_nested_ones():
    code = [
        _span("m.py", 1, 3, "m"),
        _span("m.py", 5, 9, "Polygon"),
        _span("m.py", 11, 20, "Polygon.perimeter", "perimeter"),
        _span("m.py", 22, 30, "PolygonSet"),
    ]
    assert Q.anchor(Q.Answer("m.py", 3, symbol="Polygon"), code) == (5, 20)
    assert Q.anchor(Q.Answer("m.py", 3, symbol="perimeter"), code) == (11, 20)
    assert Q.anchor(Q.Answer("m.py", 3, symbol="Missing"), code) is None
    docs = [
        _span("g.md", 1, 4, "Guide"),
        # "Phases {: #stages }" has no text of its own: only its subsections have spans
        _span("g.md", 6, 10, "Guide > Phases {: #stages } > Pre"),
        _span("g.md", 11, 15, "Guide > Phases {: #stages } > Post"),
        _span("g.md", 16, 20, "Guide > Usage"),
        _span("g.md", 21, 25, "Guide > Phases {: #stages } > Post > Usage"),
    ]
    assert Q.anchor(Q.Answer("g.md", 2, heading="Phases"), docs) == (6, 25)
    assert Q.anchor(Q.Answer("g.md", 2, heading="Guide > Phases > Pre"), docs) == (6, 10)
    assert Q.anchor(Q.Answer("g.md", 2, heading="`post`"), docs) == (11, 25)
    # two unrelated sections called Usage: ambiguous, the author must say which
    assert Q.anchor(Q.Answer("g.md", 2, heading="Usage"), docs) is None
    assert Q.anchor(Q.Answer("g.md", 2, heading="Post > Usage"), docs) == (21, 25)


def test_answers_match_by_overlap_judged_spans_only_what_lies_within():
    answer = Q.Label("a.py", 10, 20, 3, "overlap")
    judged = Q.Label("a.py", 30, 40, 0, "within")
    whole = Q.Label("b.md", None, None, 1)
    r = lambda p, s, e: _span(p, s, e)  # noqa: E731
    assert Q.label_matches(r("a.py", 18, 25), answer)
    assert not Q.label_matches(r("a.py", 21, 25), answer)
    assert Q.label_matches(r("a.py", 30, 40), judged) and Q.label_matches(r("a.py", 32, 35), judged)
    assert not Q.label_matches(r("a.py", 25, 35), judged)  # wider: its grade is unknown
    assert Q.label_matches(r("b.md", 500, 510), whole) and not Q.label_matches(
        r("c.md", 1, 2), whole
    )
    assert Q.covered(r("a.py", 35, 38), [answer], [judged])  # a grade-0 judgment covers
    assert not Q.covered(r("a.py", 25, 35), [answer], [judged])


def test_graded_ndcg_mrr_and_hit_by_hand():
    q = Q.Question("q", "where", "code", ())
    labels = [
        Q.Label("a.py", 10, 20, 3, "overlap"),
        Q.Label("a.py", 30, 40, 2, "within"),
        Q.Label("b.md", None, None, 1),
        Q.Label("a.py", 50, 60, 0, "within"),  # judged irrelevant: no gain, not in the ideal
    ]
    results = [
        _span("a.py", 30, 35),  # 2
        _span("a.py", 12, 14),  # 3
        _span("a.py", 15, 16),  # the grade-3 answer again: credited once, gain 0
        _span("b.md", 1, 5),  # 1
        _span("a.py", 50, 60),  # 0
    ]
    s = Q.score(q, results, labels)
    got = 3 + 7 / math.log2(3) + 0 + 1 / math.log2(5) + 0
    ideal = 7 + 3 / math.log2(3) + 1 / math.log2(4)
    assert s.ndcg == pytest.approx(got / ideal)
    assert s.rr == 1.0 and s.hit_5 and s.code_3 is True
    # MRR and Hit@5 count grade >= 2 only: a grade-1 find first is not a hit
    late = [_span("b.md", 1, 5)] * 5 + [_span("a.py", 12, 14)]
    s = Q.score(q, late, labels)
    assert s.rr == pytest.approx(1 / 6) and not s.hit_5
    assert s.ndcg == pytest.approx((1 + 7 / math.log2(7)) / ideal)
    assert Q.score(Q.Question("d", "x", "docs", ()), late, labels).code_3 is None


# -- pooling, judging, refusing -----------------------------------------------------------------
@pytest.fixture
def fixture_project(tmp_path):
    source = tmp_path / "src"
    for rel, text in FILES.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text, encoding="utf-8")
    base = tmp_path / "questions"
    base.mkdir()
    (base / "proj.json").write_text(json.dumps(GOOD), encoding="utf-8")
    sp = SplitProject(Project("proj", "1.0", "0" * 64), "test")
    return SimpleNamespace(
        source=source, base=base, sp=sp, cache=tmp_path / "cache", fetch=lambda p, c: source
    )


def test_unjudged_top5_results_are_pooled_refused_then_judged(fixture_project):
    fx = fixture_project
    kw = {"cache_dir": fx.cache, "fetch": fx.fetch, "base": fx.base}
    with pytest.raises(EvalError) as err:
        Q.run_project(fx.sp, ["grep"], resamples=50, **kw)
    assert "UNJUDGED: grep:" in str(err.value) and "--pool" in str(err.value)
    flagged = Q.run_project(fx.sp, ["grep"], resamples=50, allow_unjudged=True, **kw)
    assert any(w.startswith("UNJUDGED: grep") for w in flagged.warnings)

    out, n, per_system = Q.pool_project(fx.sp, ["grep"], **kw)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(rows) == per_system["grep"] > 0
    for row in rows:
        assert row["grade"] is None and "systems" not in row  # the judge is blind to systems
        assert row["text"] and row["question"] and row["project"] == "proj"
    sources = [json.loads(line) for line in out.with_name(Q.SOURCES_NAME).read_text().splitlines()]
    assert len(sources) == n and all(s["systems"][0].startswith("grep@") for s in sources)
    # the author's answers are never pooled
    assert not any(r["path"] == "pkg/geometry.py" and r["symbol"] == "circle_area" for r in rows)

    for row in rows:
        row["grade"] = 0
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert Q.merge(out, "tester", fx.base) == {"proj": n}
    assert Q.merge(out, "tester", fx.base) == {"proj": 0}  # never twice
    judged = Q.load_judged(fx.base / "proj.judged.jsonl")
    assert len(judged) == n and {j.judge for j in judged} == {"tester"}

    run = Q.run_project(fx.sp, ["grep"], resamples=50, **kw)
    assert run.warnings == [] and run.task == "questions" and run.numbers.n == 2
    assert Q.pool_project(fx.sp, ["grep"], **kw)[1] == 0


def test_cli_pool_goes_with_the_questions_task_alone():
    from click.testing import CliRunner

    from lab.cli import main

    out = CliRunner().invoke(main, ["protocol", "--pool"])
    assert out.exit_code == 2 and "--task questions alone" in out.output


def test_run_protocol_runs_the_questions_task_through_run_py(fixture_project, monkeypatch):
    from lab.protocol import question_files, run_protocol

    fx = fixture_project
    monkeypatch.setattr(question_files, "QUESTIONS_DIR", fx.base)
    kw = {"cache_dir": fx.cache, "fetch": fx.fetch}
    out, n, _ = Q.pool_project(fx.sp, ["grep"], depth=10, **kw)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    out.write_text("".join(json.dumps({**r, "grade": 1}) + "\n" for r in rows))
    assert Q.merge(out, "tester") == {"proj": n}
    other = SplitProject(Project("noquestions", "1.0", "0" * 64), "test")
    report = run_protocol(
        projects=[fx.sp, other], tasks=("questions",), systems=("grep",), resamples=50, **kw
    )
    assert [r.project.name for r in report.runs] == ["proj"]  # no question file: not run
    assert report.runs[0].task == "questions" and report.pooled["questions"].n == 2


def test_shipped_question_files_follow_their_project_into_validation():
    """A question file serves whichever split its project is in: express, then jsonschema,
    markdown and sqlparse moved from test to validation (docs/evaluation.md, Splits) and
    their questions went with them."""
    from lab.protocol.question_pool import with_questions
    from lab.protocol.splits import protocol_projects, select_projects

    splits = {p.name: p.split for p in protocol_projects()}
    for path in sorted(Q.QUESTIONS_DIR.glob("*.json")):
        qf = Q.load_question_file(path)
        assert splits.get(qf.project) in ("validation", "test"), qf.project
    validation = [sp.name for sp in with_questions(select_projects("validation"))]
    assert validation == ["express", "koa", "ws", "jsonschema", "markdown", "sqlparse"]
    test = [sp.name for sp in with_questions(select_projects("test"))]
    assert not set(test) & set(validation) and len(test) >= 4
    chosen, names, _ = Q._resolve("validation", ["express"], ("grep", "fusion"), None)
    assert [sp.name for sp in chosen] == ["express"] and names == ["grep", "fusion"]
