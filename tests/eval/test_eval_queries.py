"""Query file validation, and the shipped sets themselves."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from llmc.errors import EvalError
from llmc.eval.projects import PROJECTS, SETS_DIR, llmc_checkout, shipped_sets
from llmc.eval.queries import Judgment, check_against_repo, load_queries

GOOD = {
    "query": "where is the session saved",
    "intent": "code",
    "relevant": [{"path": "app/store.py", "start_line": 3, "end_line": 9, "grade": 3}],
}


def write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
        encoding="utf-8",
    )
    return path


def test_load_good_file(tmp_path):
    docs = {"query": "install", "intent": "docs", "relevant": [{"path": "README.md", "grade": 2}]}
    qs = load_queries(write(tmp_path, GOOD, "", {**docs, "id": "q2", "note": "file level"}))
    assert [q.intent for q in qs] == ["code", "docs"]
    assert qs[0].relevant == (Judgment("app/store.py", 3, 3, 9),)
    assert qs[1].relevant[0].file_level
    assert qs[1].source.endswith("q.jsonl:3") and qs[1].id == "q2"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({**GOOD, "intent": "howto"}, "intent must be one of code, docs, mixed"),
        ({**GOOD, "query": "  "}, "query must be a non-empty string"),
        ({**GOOD, "relevant": []}, "relevant must be a non-empty list"),
        ({**GOOD, "relevent": []}, "unknown key(s) relevent"),
        ({**GOOD, "relevant": [{"path": "a.py", "grade": 4}]}, "grade must be 1, 2 or 3"),
        ({**GOOD, "relevant": [{"path": "a.py", "grade": True}]}, "grade must be 1, 2 or 3"),
        ({**GOOD, "relevant": [{"path": "/etc/passwd", "grade": 1}]}, "relative"),
        ({**GOOD, "relevant": [{"path": "../x.py", "grade": 1}]}, "relative"),
        ({**GOOD, "relevant": [{"path": "a\\b.py", "grade": 1}]}, "relative"),
        ({**GOOD, "relevant": [{"path": "a.py", "grade": 1, "start_line": 3}]}, "both"),
        (
            {**GOOD, "relevant": [{"path": "a.py", "grade": 1, "start_line": 9, "end_line": 3}]},
            "end_line 3 is before start_line 9",
        ),
        (
            {**GOOD, "relevant": [{"path": "a.py", "grade": 1, "start_line": 0, "end_line": 3}]},
            "positive integers",
        ),
        ({**GOOD, "relevant": [{"path": "a.py", "grade": 1, "line": 2}]}, "unknown key(s) line"),
    ],
)
def test_errors_name_file_and_line(tmp_path, line, message):
    path = write(tmp_path, GOOD, line)
    with pytest.raises(EvalError) as e:
        load_queries(path)
    assert f"{path}:2:" in str(e.value)
    assert message in str(e.value)


def test_every_error_is_reported(tmp_path):
    path = write(tmp_path, {**GOOD, "intent": "x"}, GOOD, "{", {**GOOD, "query": ""})
    text = str(pytest.raises(EvalError, load_queries, path).value)
    assert f"{path}:1:" in text and f"{path}:3:" in text and f"{path}:4:" in text
    assert f"{path}:2:" not in text


def test_duplicate_ids_and_empty_and_missing_files(tmp_path):
    dup = write(tmp_path, {**GOOD, "id": "a"}, {**GOOD, "id": "a"})
    assert "id 'a' already used on line 1" in str(pytest.raises(EvalError, load_queries, dup).value)
    empty = write(tmp_path, "", "  ")
    assert "no queries" in str(pytest.raises(EvalError, load_queries, empty).value)
    missing = tmp_path / "nope.jsonl"
    assert "no such query file" in str(pytest.raises(EvalError, load_queries, missing).value)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in str(pytest.raises(EvalError, load_queries, binary).value)


def test_check_against_repo(tmp_path):
    (tmp_path / "a.py").write_text("x\n" * 10)
    qs = load_queries(
        write(
            tmp_path,
            {**GOOD, "relevant": [{"path": "a.py", "grade": 3, "start_line": 1, "end_line": 10}]},
            {**GOOD, "relevant": [{"path": "a.py", "grade": 3, "start_line": 5, "end_line": 11}]},
            {**GOOD, "relevant": [{"path": "gone.py", "grade": 1}]},
        )
    )
    problems = check_against_repo(qs, tmp_path)
    assert len(problems) == 2
    assert "past the end of the file (10 lines)" in problems[0]
    assert "gone.py: no such file" in problems[1]


# -- the shipped sets ---------------------------------------------------------------------
def test_shipped_sets_are_valid_and_big_enough():
    names = shipped_sets()
    assert "llmc" in names
    for p in PROJECTS.values():
        assert p.set_name in names
    for name in names:
        qs = load_queries(SETS_DIR / f"{name}.jsonl")
        intents = Counter(q.intent for q in qs)
        assert len(qs) >= (20 if name == "llmc" else 40), name
        assert set(intents) == {"code", "docs", "mixed"}, (name, intents)
        assert len({q.query for q in qs}) == len(qs), f"{name}: duplicate questions"
        assert any(len(q.query.split()) <= 3 for q in qs), f"{name}: no terse query"
        assert any(len(q.query.split()) >= 12 for q in qs), f"{name}: no long query"
        assert all(any(j.grade == 3 for j in q.relevant) for q in qs), name


def test_no_reserved_projects():
    reserved = {"flask", "click", "werkzeug", "jinja2", "itsdangerous", "markupsafe"}
    assert not reserved & set(PROJECTS)
    assert not any(name.split("-")[0] in reserved for name in shipped_sets())


def test_llmc_set_fits_this_checkout():
    root = llmc_checkout()
    if root is None:
        pytest.skip("llmc is not installed from a source checkout")
    problems = check_against_repo(load_queries(SETS_DIR / "llmc.jsonl"), root)
    assert problems == []
