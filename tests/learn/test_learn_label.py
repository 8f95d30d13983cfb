"""Labeling through the CLI (CliRunner input), the query log, feedback, judgments as a set."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from repo_fixtures import user_config

from llmc.cli import main
from llmc.errors import LearnError
from llmc.learn.judgments import (
    Label,
    append_labels,
    judgments_path,
    load_labels,
    to_eval_queries,
)
from llmc.learn.label import item_disagreement, parse_answer
from llmc.learn.querylog import log_search, logged_queries, query_log_path


def _labels(root: Path) -> list[Label]:
    labels, problems = load_labels(judgments_path(root))
    assert not problems
    return labels


def test_label_query_through_the_prompt(learn_repo):
    runner = CliRunner()
    # first result: 3 (direct answer); second: "?" shows the rubric, "7" is refused,
    # then 0 retagged as doc; third: skipped; then quit.
    result = runner.invoke(
        main,
        ["label", "save_session", "--repo", str(learn_repo), "-k", "4"],
        input="3\n?\n7\n0d\ns\nq\n",
    )
    assert result.exit_code == 0, result.output
    assert "save_session" in result.output
    assert "3 = the direct answer or the implementation" in result.output
    assert "'7': type 0-3" in result.output
    assert "labeled 2, skipped 1" in result.output
    first, second = _labels(learn_repo)
    assert (first.query, first.path, first.grade, first.tag) == (
        "save_session", "app/store.py", 3, "code",
    )  # fmt: skip
    assert first.symbol == "SessionStore.save_session"
    assert first.labeler == "tester" and first.source == "label"  # learn.labeler
    assert (second.grade, second.tag) == (0, "doc")
    # labeled results are not offered again to the same labeler
    again = runner.invoke(
        main, ["label", "save_session", "--repo", str(learn_repo), "-k", "4"], input="q\n"
    )
    assert again.exit_code == 0, again.output
    assert f"{first.path}:{first.start_line}-" not in again.output.split("»", 1)[1]


def test_kappa_export_and_eval_of_judgments(learn_repo, tmp_path):
    runner = CliRunner()
    base = ["label", "save_session", "--repo", str(learn_repo), "-k", "2"]
    assert runner.invoke(main, [*base, "--labeler", "ana"], input="3\n1\n").exit_code == 0
    assert runner.invoke(main, [*base, "--labeler", "bo"], input="3\n0\n").exit_code == 0
    result = runner.invoke(main, ["label", "--kappa", "--json", "--repo", str(learn_repo)])
    assert result.exit_code == 0, result.output
    (pair,) = json.loads(result.stdout)["agreement"]
    assert (pair["a"], pair["b"], pair["n"]) == ("ana", "bo", 2)
    assert pair["observed"] == 0.5
    text = runner.invoke(main, ["label", "--kappa", "--repo", str(learn_repo)]).output
    assert "ana vs bo: 2 items, agree 50%" in text
    out = tmp_path / "labels.jsonl"
    result = runner.invoke(main, ["label", "--export", str(out), "--repo", str(learn_repo)])
    assert result.exit_code == 0, result.output
    (q,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert q["query"] == "save_session" and q["intent"] == "code"
    # median of 1 and 0 rounds to 1 (half up): the second item stays, at grade 1
    assert sorted(j["grade"] for j in q["relevant"]) == [1, 3]
    result = runner.invoke(main, ["eval", "judgments", "--repo", str(learn_repo), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["queries"] == 1
    assert data["variants"]["default"]["all"]["mrr@10"] == 1.0


def test_query_log_and_label_from_log(learn_repo):
    runner = CliRunner()
    for q in ("where are user sessions stored", "refund policy"):
        result = runner.invoke(main, ["search", q, "--repo", str(learn_repo), "--json"])
        assert result.exit_code == 0, result.output
    entries = [json.loads(x) for x in query_log_path(learn_repo).read_text().splitlines()]
    assert [e["query"] for e in entries] == ["where are user sessions stored", "refund policy"]
    top_path, top_start, _ = entries[1]["results"][0]
    assert top_path in ("docs/billing.md", "app/billing.py") and top_start >= 1
    assert logged_queries(learn_repo) == ["refund policy", "where are user sessions stored"]
    result = runner.invoke(
        main, ["label", "--from-log", "1", "--repo", str(learn_repo), "-k", "1"], input="3\n"
    )
    assert result.exit_code == 0, result.output
    (label,) = _labels(learn_repo)
    assert (label.query, label.source, label.grade) == ("refund policy", "log", 3)
    assert (label.path, label.start_line) == (top_path, top_start)


def test_query_log_is_opt_out_and_trimmed(learn_repo, learn_config):
    user_config(learn_config.replace("[learn]\n", "[learn]\nlog_queries = false\n"))
    result = CliRunner().invoke(main, ["search", "refund", "--repo", str(learn_repo), "--json"])
    assert result.exit_code == 0, result.output
    assert not query_log_path(learn_repo).exists()
    for i in range(300):
        log_search(learn_repo, {"query": f"q{i}", "results": []}, max_entries=10)
    # trimmed back to the newest 10 whenever it outgrows ~400 bytes per kept entry
    assert 10 <= len(query_log_path(learn_repo).read_text().splitlines()) < 100
    assert logged_queries(learn_repo, 2) == ["q299", "q298"]


def test_label_suggest_picks_disagreements(learn_repo):
    runner = CliRunner()
    for q in ("refund", "compute invoice total with tax", "Router addRoute"):
        runner.invoke(main, ["search", q, "--repo", str(learn_repo), "--json"])
    result = runner.invoke(
        main,
        ["label", "--suggest", "2", "--repo", str(learn_repo), "-k", "2"],
        input="2\n1\n3\n0\n",
    )
    assert result.exit_code == 0, result.output
    assert "disagreement" in result.output
    labels = _labels(learn_repo)
    assert len(labels) == 4 and {lb.source for lb in labels} == {"suggest"}
    assert len({lb.query for lb in labels}) == 2


def test_item_disagreement_by_hand():
    assert item_disagreement({"bm25": 1}) == 1.0  # first for BM25, missed by dense
    assert item_disagreement({"bm25": 1, "dense": 4}) == pytest.approx(0.75)
    assert item_disagreement({"bm25.code": 2, "bm25.doc": 5, "dense.code": 2}) == 0.0
    assert item_disagreement({"exact": 1}) == 0.0


def test_parse_answer():
    assert parse_answer("3").grade == 3
    assert parse_answer(" 2d ").tag == "doc" and parse_answer("1c").tag == "code"
    assert parse_answer("").action == "skip" and parse_answer("q").action == "quit"
    assert parse_answer("?").action == "help"
    for bad in ("4", "x", "3x", "-1"):
        with pytest.raises(ValueError):
            parse_answer(bad)


def test_feedback_endpoint_appends_a_label(learn_repo):
    from llmc.daemon import api

    ctx = api.Context(engine=SimpleNamespace(root=learn_repo))
    out = api.call(
        ctx,
        "feedback",
        {"query": "refund", "path": "docs/billing.md", "start_line": "3", "end_line": 6,
         "vote": "up", "client": "vim"},
    )  # fmt: skip
    assert out["ok"] and out["label"]["grade"] == 2
    api.call(ctx, "feedback", {"query": "refund", "path": "app/store.py", "start_line": 1,
                               "end_line": 2, "vote": "down"})  # fmt: skip
    up, down = _labels(learn_repo)
    assert (up.labeler, up.source, up.tag) == ("feedback:vim", "feedback", "doc")
    assert (down.grade, down.labeler) == (0, "feedback")
    for params in (
        {"query": "x", "path": "../etc/passwd", "start_line": 1, "end_line": 1, "vote": "up"},
        {"query": "x", "path": "a.py", "start_line": 3, "end_line": 1, "vote": "up"},
        {"query": "x", "path": "a.py", "start_line": 1, "end_line": 1, "vote": "meh"},
        {"query": "x", "path": "a.py", "start_line": 1, "end_line": 1, "color": "red"},
    ):
        with pytest.raises(api.ApiError):
            api.call(ctx, "feedback", params)
    with pytest.raises(LearnError, match="either vote"):
        api.call(ctx, "feedback", {"query": "x", "path": "a.py", "start_line": 1,
                                   "end_line": 1, "vote": "up", "grade": 3})  # fmt: skip


def test_judgments_file_tolerates_damage_and_aggregates(tmp_path):
    root = tmp_path
    append_labels(root, [
        Label("Where is X", "a.py", 1, 9, 3, "code", "ana"),
        Label("where is  x", "a.py", 1, 9, 2, "code", "bo"),  # same query, spaced and cased
        Label("where is x", "a.py", 1, 9, 3, "code", "cy"),
        Label("where is x", "docs/x.md", 1, 4, 0, "doc", "ana"),  # unrelated: left out
        Label("where is x", "docs/y.md", 1, 4, 1, "doc", "ana"),
        Label("nothing relevant", "b.py", 1, 2, 0, "code", "ana"),  # no relevant item
    ])  # fmt: skip
    with open(judgments_path(root), "a") as f:
        f.write('{"query": "torn", "path": "a.py", "start_li\n')
    labels, problems = load_labels(judgments_path(root))
    assert len(labels) == 6 and len(problems) == 1 and ":7: skipped" in problems[0]
    (q,) = to_eval_queries(labels)
    assert q.query == "Where is X" and q.intent == "code"  # relevant >= 2 are all code
    assert [(j.path, j.grade) for j in q.relevant] == [("a.py", 3), ("docs/y.md", 1)]
    with pytest.raises(LearnError, match="grade"):
        append_labels(root, [Label("q", "a.py", 1, 2, 5, "code", "ana")])
