"""One answer path (llmc/search/answer.py): the same index and query give the same answer
through `llmc search` without a daemon, `llmc search` with one, the daemon's /v1/search
(what MCP's search tool calls) and the lab's runner; and results of files deleted since the
index run are dropped, with a warning, whichever answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon_helpers import child_env, llmc, make_git_repo

QUERY = "save a session token"


def _spans(answer: dict[str, Any]) -> list[tuple]:
    return [(r["path"], r["start_line"], r["end_line"], r["symbol"], round(r["score"], 4))
            for r in answer["results"]]  # fmt: skip


def _files(answer: dict[str, Any]) -> list[tuple]:
    return [(f["path"], round(f["score"], 4), [(s["start_line"], s["end_line"])
             for s in f["spans"]]) for f in answer["files"]]  # fmt: skip


def _cli(root: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    out = llmc("search", "--json", "--repo", str(root), *args, QUERY, env=env)
    return json.loads(out.stdout.strip())


def _lab(root: Path, group: str) -> list[tuple]:
    """The lab's runner on the same index: spans as `llmc eval` and the protocol's span
    tasks ask (``llmc.eval.runner.ask``), files as its file tasks do
    (``GroupedFileSearcher``)."""
    from lab.protocol.reports import GroupedFileSearcher
    from llmc.config import load_config
    from llmc.eval.runner import ask
    from llmc.search import Searcher

    with Searcher(root, load_config(root)) as searcher:
        if group == "span":
            found = ask(searcher, QUERY, 10).results
            return [(r.path, r.start_line, r.end_line, r.symbol, round(r.score, 4)) for r in found]
        found = GroupedFileSearcher(searcher).search(QUERY, k=10).results
        return [(r.path, r.start_line, r.end_line) for r in found]


def test_cli_daemon_and_lab_give_the_same_answer(shared_daemon, daemon_env):
    root = shared_daemon.root
    alone = {**daemon_env, "LLMC_NO_DAEMON": "1"}
    spans = {
        "cli without a daemon": _spans(_cli(root, alone)),
        "cli with the daemon": _spans(_cli(root, daemon_env)),
        "daemon /v1/search": _spans(shared_daemon.search(QUERY)),
        "lab runner": _lab(root, "span"),
    }
    assert spans["cli without a daemon"][0][0] == "app/store.py"
    assert all(v == spans["cli without a daemon"] for v in spans.values()), spans
    files = {
        "cli without a daemon": _cli(root, alone, "--files"),
        "cli with the daemon": _cli(root, daemon_env, "--files"),
        "daemon /v1/search": shared_daemon.search(QUERY, group="file"),
    }
    first = _files(files["cli without a daemon"])
    assert first[0][0] == "app/store.py"
    assert all(_files(v) == first for v in files.values()), files
    for key in ("whole_file_weight", "file_ranker", "warnings"):
        assert len({json.dumps(v[key]) for v in files.values()}) == 1, key
    # the lab scores a file at its best span, as --files lists it
    assert _lab(root, "file") == [(f[0], *f[2][0]) if f[2] else (f[0], 1, 1) for f in first]


def test_results_of_a_deleted_file_are_dropped_without_a_daemon(tmp_path):
    root = make_git_repo(tmp_path / "repo", {
        "app/store.py": "def save_session(user, token):\n    '''Save a session token.'''\n",
        "app/other.py": "def save_session_token(token):\n    '''Save a session token.'''\n",
    })  # fmt: skip
    env = child_env(tmp_path / "xdg", LLMC_NO_DAEMON="1")
    llmc("index", str(root), "--quiet", env=env)
    before = {r["path"] for r in _cli(root, env)["results"]}
    assert before == {"app/store.py", "app/other.py"}  # then one goes, the index kept
    (root / "app" / "other.py").unlink()
    for args in ((), ("--files",)):
        out = _cli(root, env, *args)
        rows = out["files"] if args else out["results"]
        assert [r["path"] for r in rows] == ["app/store.py"], args
        assert any(
            w.startswith("skipped results in 1 file(s) deleted since indexing")
            for w in out["warnings"]
        )
