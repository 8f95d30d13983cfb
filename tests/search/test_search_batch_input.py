"""Batch input and option combinations of `llmc search` (issue 40, item 10)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def test_blank_lines_in_batch_input_keep_their_place_and_are_not_failures(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    result = CliRunner().invoke(
        main,
        ["search", "--repo", str(root), "--json", "--no-hyde", "--no-dense", "-"],
        input="session store\n\n   \nstart the server\n\n",
    )
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["query"] for a in answers] == ["session store", "", "   ", "start the server", ""]
    assert answers[0]["results"][0]["path"] == "app/store.py"
    assert answers[1]["results"] == [] and answers[1]["warnings"] == [
        "blank line: nothing to search"
    ]


def test_files_with_a_workspace_is_refused_not_answered_with_spans(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert CliRunner().invoke(main, ["workspace", "add", "team", str(root)]).exit_code == 0
    result = CliRunner().invoke(main, ["search", "--workspace", "team", "--files", "store"])
    assert result.exit_code == 2
    assert "--files does not work with --workspace" in result.output


def test_explain_prints_no_empty_list_weights(tmp_path, monkeypatch):
    import re

    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    result = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--explain", "--no-hyde", "--no-dense", "session"]
    )
    assert result.exit_code == 0, result.output
    route = next(line for line in result.output.splitlines() if line.startswith("route "))
    assert "list weights" not in route or re.search(r"list weights \w+ \d", route), route
