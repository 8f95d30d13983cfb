"""Task (d), long reports → changed files: which commits read as reports, their text and
answer, the file-level metrics and BM25 by hand, the bm25-file searcher, the pinned sets."""

from __future__ import annotations

import json
import math

import pytest

from lab.protocol import reports
from lab.protocol.file_rank import FileBM25Searcher, bm25_scores, file_scores
from lab.protocol.report_queries import (
    mine_reports,
    prose_words,
    report_body,
    report_kind,
    report_skip_reason,
    report_text,
    title_and_body,
)
from llmc.eval.queries import load_queries
from llmc.gitlog import Commit, FileDiff

LONG = " ".join(["the parser drops the trailing comment when a block ends early"] * 4)
TRACE = 'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\nKeyError: 1'


def commit(subject: str, body: str, paths: tuple[str, ...], sha: str = "a" * 40,
           parents: tuple[str, ...] = ("p",)) -> Commit:  # fmt: skip
    files = tuple(FileDiff(p, ((1, 1),), ("x = compute(y)",), ("x = y",)) for p in paths)
    return Commit(sha, parents, 0, subject, body, files)


def test_report_kind_long_body_or_traceback() -> None:
    assert report_kind(LONG) == "long body"
    assert report_kind("Fixes a crash:\n\n" + TRACE) == "traceback"
    assert report_kind("short body, nine words in it here now") is None
    js = "TypeError: x is undefined\n    at Object.parse (lib/parse.js:12:7)"
    assert report_kind(js) == "traceback"


def test_squash_bullets_and_trailers_do_not_count() -> None:
    squash = "\n\n".join(["* Update Readme.md", "* fix tests", "* lint"] * 10)
    assert prose_words(squash) == 0 and report_kind(squash) is None
    body = "Explain it.\n\nSigned-off-by: A <a@x>\nCo-authored-by: B <b@x>\n---------"
    assert report_body(body) == "Explain it."


def test_title_and_body_of_a_pull_request_merge() -> None:
    merge = commit("Merge pull request #12 from me/fix", "Fix the parser\n" + LONG,
                   (), parents=("p1", "p2"))  # fmt: skip
    assert title_and_body(merge) == ("Fix the parser", LONG)
    plain = commit("fix(parser): keep trailing comments (#3)", LONG, ("src/p.py",))
    assert title_and_body(plain) == ("keep trailing comments", LONG)
    assert report_skip_reason(commit("Merge branch 'main'", LONG, (), parents=("a", "b"))) == (
        "merge without a pull request description"
    )


def test_report_text_is_cut_on_a_line() -> None:
    text = report_text("T", "\n".join(["word " * 10] * 20), limit=200)
    assert len(text) <= 200 and text.startswith("T\n\n") and not text.endswith(" ")


def test_mine_reports_answer_is_non_test_source_and_docs() -> None:
    present = {"src/p.py", "docs/p.md", "tests/test_p.py", "setup.cfg"}
    commits = [
        commit(
            "Keep trailing comments",
            LONG,
            ("src/p.py", "docs/p.md", "tests/test_p.py", "setup.cfg"),
            sha="1" * 40,
        ),  # fmt: skip
        commit("Short one", "nothing much", ("src/p.py",), sha="2" * 40),
        commit(
            "Only tests", LONG.replace("parser", "suite"), ("tests/test_p.py",), sha="3" * 40
        ),  # fmt: skip
        commit("Keep trailing comments", LONG, ("src/p.py",), sha="4" * 40),  # seen before
    ]
    mined = mine_reports(commits, present)
    assert [q.id for q in mined.queries] == ["report:111111111111"]
    q = mined.queries[0]
    assert q.query.startswith("Keep trailing comments\n\nthe parser")
    assert {(j.path, j.grade) for j in q.relevant} == {("src/p.py", 3), ("docs/p.md", 2)}
    assert q.intent == "mixed"
    assert mined.summary()["kept"] == 1 and mined.read == 4
    assert mined.skipped["body shorter than 40 words, no traceback"] == 1
    assert mined.skipped["no source or documentation file of the base changed"] == 1
    assert mined.skipped["report seen before"] == 1


def test_file_scores_by_hand() -> None:
    ranked = ["a", "b", "c", "a", "d", "e", "f", "g", "h", "i", "j", "k"]
    s = file_scores(ranked, ["b", "d"])  # ranks 2 and 4 (the repeated "a" counts once)
    assert (s.acc_1, s.acc_5, s.acc_10, s.rr_10) == (0.0, 1.0, 1.0, 0.5)
    s = file_scores(ranked, ["a"])
    assert (s.acc_1, s.acc_5, s.acc_10, s.rr_10) == (1.0, 1.0, 1.0, 1.0)
    s = file_scores(ranked, ["c", "k"])  # k is 11th: never all within 10
    assert (s.acc_1, s.acc_5, s.acc_10, s.rr_10) == (0.0, 0.0, 0.0, pytest.approx(1 / 3))
    assert file_scores(ranked, ["zz"]).rr_10 == 0.0


def test_bm25_scores_by_hand() -> None:
    docs = [["a", "b"], ["b", "b", "c", "d"]]
    got = bm25_scores(docs, ["a"])
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))  # ln 2
    tf_part = 1 * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 3))
    assert got == [pytest.approx(idf * tf_part), 0.0]
    assert bm25_scores([], ["a"]) == []


def test_bm25_file_searcher_ranks_whole_files(tmp_path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "parser.py").write_text("def parse_comment(text):\n    return text\n")
    (tmp_path / "pkg" / "other.py").write_text("def unrelated():\n    return 1\n")
    out = FileBM25Searcher(tmp_path).search("the comment parser drops text", k=5)
    assert [r.path for r in out.results] == ["pkg/parser.py"]
    assert out.results[0].start_line == 1 and out.results[0].end_line == 3


def test_pinned_report_sets_parse_and_match_their_summary() -> None:
    pinned = reports.report_projects()
    assert {"attrs", "markdown", "sqlparse"} <= set(pinned)
    for name, row in pinned.items():
        queries = load_queries(reports.queries_path(name)) if row["mined"]["kept"] else []
        assert len(queries) == row["mined"]["kept"], name
        for q in queries:
            assert q.id.startswith("report:") and q.relevant
            assert all(j.grade >= 2 and "test" not in j.path.split("/")[0] for j in q.relevant)
    doc = json.loads(reports.PROJECTS_FILE.read_text(encoding="utf-8"))
    assert doc["task"] == "reports"


def _commit_set(tmp_path):
    """A task (c) query file of two commits: one with a source answer, one docs-only at
    grade 1 (no answer left for a report)."""
    d = tmp_path / "commits"
    d.mkdir()
    rows = [
        {"query": "Fix parser", "intent": "code", "id": "commit:" + "a" * 12,
         "note": "commit " + "a" * 40,
         "relevant": [{"path": "pkg/parser.py", "grade": 3}, {"path": "docs/p.md", "grade": 2},
                      {"path": "CHANGES.md", "grade": 1}]},
        {"query": "Typo", "intent": "docs", "id": "commit:" + "b" * 12,
         "note": "commit " + "b" * 40, "relevant": [{"path": "README.md", "grade": 1}]},
    ]  # fmt: skip
    (d / "proj.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return d


def test_written_reports_take_the_commits_answer_not_the_writers(tmp_path) -> None:
    from lab.protocol.report_written import assemble

    rows = [
        {"commit": "a" * 40, "title": "Comments vanish", "body": "I parse x and y.",
         "kind": "bug", "relevant": [{"path": "evil.py", "grade": 3}]},
        {"commit": "b" * 40, "title": "Docs", "body": "The readme is wrong."},
    ]  # fmt: skip
    queries, counts = assemble("proj", rows, "writer-1", commits_dir=_commit_set(tmp_path))
    assert counts == {"written": 1, "skipped by the writer": 0, "no source or docs answer": 1}
    (q,) = queries
    assert q.id == "written:" + "a" * 12 and q.intent == "code"
    assert q.query == "Comments vanish\n\nI parse x and y."
    assert [(j.path, j.grade) for j in q.relevant] == [("pkg/parser.py", 3), ("docs/p.md", 2)]
    assert "writer-1" in q.note and "a" * 40 in q.note


def test_written_reports_refuse_an_unknown_commit_and_count_skips(tmp_path) -> None:
    from lab.protocol.report_written import assemble
    from llmc.errors import EvalError

    commits_dir = _commit_set(tmp_path)
    skipped = [{"commit": "a" * 40, "skipped": "internal rename"}]
    assert assemble("proj", skipped, "w", commits_dir)[1]["skipped by the writer"] == 1
    with pytest.raises(EvalError, match="not a task \\(c\\) query"):
        assemble("proj", [{"commit": "c" * 40, "title": "t", "body": "b"}], "w", commits_dir)
    with pytest.raises(EvalError, match="title and a body"):
        assemble("proj", [{"commit": "a" * 40, "title": "t", "body": " "}], "w", commits_dir)


def test_shipped_written_reports_answer_as_their_commits_do() -> None:
    from lab.protocol.report_written import ID_PREFIX, commit_answers, load_written

    names = [p.name.split(".")[0] for p in reports.SETS_DIR.glob("*.written.jsonl")]
    for name in names:
        by_sha = commit_answers(name)
        for q in load_written(name):
            sha = q.note.split(" from commit ")[1].split()[0]
            assert q.id == ID_PREFIX + sha[:12]
            want = [(j.path, j.grade) for j in by_sha[sha].relevant if j.grade >= 2]
            assert [(j.path, j.grade) for j in q.relevant] == want
        path = reports.queries_path(name)
        mined = load_queries(path) if path.stat().st_size else []  # typer: none kept
        loaded = reports.load_report_queries(name)
        assert [q.id for q in loaded] == [q.id for q in mined] + [q.id for q in load_written(name)]


def test_a_project_with_written_reports_only_has_a_report_set(tmp_path, monkeypatch) -> None:
    """A history with no report-length commit (mined set empty) still runs task (d) on its
    written reports; a project with neither has no report set."""
    from lab.protocol import report_written

    monkeypatch.setattr(reports, "SETS_DIR", tmp_path)
    monkeypatch.setattr(report_written, "SETS_DIR", tmp_path)
    (tmp_path / "only-written.jsonl").write_text("", encoding="utf-8")  # mined: none kept
    row = {"query": "Crash\n\nIt crashes.", "intent": "code", "id": "written:" + "a" * 12,
           "relevant": [{"path": "pkg/a.py", "grade": 3}]}  # fmt: skip
    (tmp_path / "only-written.written.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    (tmp_path / "nothing.jsonl").write_text("", encoding="utf-8")
    assert reports.has_reports("only-written") and not reports.has_reports("nothing")
    assert [q.id for q in reports.load_report_queries("only-written")] == ["written:" + "a" * 12]
