"""The CLI through a running daemon: `llmc search` (human output, --explain, batch) and
`llmc graph` print what they print in-process, and the daemon is the one that answered."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from llmc.cli import main

SCORE = re.compile(r"\b\d+\.\d{4}\b")  # the JSON rounds scores to 6 places; print shows 4


def _served(shared_daemon) -> int:
    return shared_daemon.status()["requests"]["served"]


def _both(shared_daemon, monkeypatch, args: list[str], input: str | None = None):
    """(output through the daemon, output in-process, requests the daemon served for it)."""
    args = [*args, "--repo", str(shared_daemon.root)]
    before = _served(shared_daemon)
    via = CliRunner().invoke(main, args, input=input)
    served = _served(shared_daemon) - before - 1  # less the status call that counted
    assert via.exit_code == 0, via.output
    with monkeypatch.context() as m:
        m.setenv("LLMC_NO_DAEMON", "1")
        local = CliRunner().invoke(main, args, input=input)
    assert local.exit_code == 0, local.output
    return via.stdout, local.stdout, served


def test_human_search_output_comes_from_the_daemon(shared_daemon, monkeypatch):
    via, local, served = _both(shared_daemon, monkeypatch, ["search", "save a session token"])
    assert served == 1
    assert "app/store.py:" in via
    assert SCORE.sub("S", via) == SCORE.sub("S", local)


def test_explain_comes_from_the_daemon_too(shared_daemon, monkeypatch):
    via, local, served = _both(shared_daemon, monkeypatch, ["search", "Router", "--explain"])
    assert served == 1
    assert via.startswith("route ") and "fusion" in via
    strip = lambda text: [  # noqa: E731 - timings differ between two runs of anything
        SCORE.sub("S", line) for line in text.splitlines() if "timings ms" not in line
    ]
    assert strip(via) == strip(local)


def test_batch_search_through_the_daemon(shared_daemon, monkeypatch):
    queries = "Router\nsave a session token\n"
    via, local, served = _both(shared_daemon, monkeypatch, ["search", "-", "--json"], queries)
    assert served == 2
    drop = ("timings_ms", "took_ms")
    rows = [[{k: v for k, v in json.loads(x).items() if k not in drop} for x in out.splitlines()]
            for out in (via, local)]  # fmt: skip
    assert rows[0] == rows[1] and rows[0][0]["results"][0]["path"] == "app/server.js"
    via, local, _ = _both(shared_daemon, monkeypatch, ["search", "-"], queries)
    assert "» Router" in via and SCORE.sub("S", via) == SCORE.sub("S", local)


@pytest.mark.parametrize(
    "args",
    [
        ["graph", "where-used", "SessionStore"],
        ["graph", "deps", "open_store"],
        ["graph", "neighbors", "open_store", "--type", "calls"],
        ["graph", "stats", "--top", "3"],
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_graph_commands_come_from_the_daemon(shared_daemon, monkeypatch, args, as_json):
    args = [*args, "--json"] if as_json else args
    via, local, served = _both(shared_daemon, monkeypatch, args)
    assert served == 1
    if as_json and args[1] == "stats":  # built_at and build_seconds are the same file's
        assert json.loads(via) == json.loads(local)
    else:
        assert via == local
    assert via.strip()


def test_an_unknown_symbol_through_the_daemon_is_one_line(shared_daemon):
    root = str(shared_daemon.root)
    missing = CliRunner().invoke(
        main, ["graph", "where-used", "NoSuchThingAnywhere", "--repo", root]
    )
    assert missing.exit_code == 1 and "NoSuchThingAnywhere" in missing.output
