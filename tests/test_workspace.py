"""Workspaces (llmc/workspace.py, llmc/cli/workspace.py): several repositories, one ranking.

The merge is reciprocal-rank fusion of each member's own ranked list, so a small
repository's answer is not buried by a large repository's near misses; a member without
an index, or with a broken one, is one warning and the others answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import make_repo

from llmc import workspace
from llmc.cli import main
from llmc.workspace import Member, merge


def _cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    return result.output


def _index(root: Path) -> None:
    _cli("index", str(root), "--no-vectors", "-q")


# -- the merge, by hand ----------------------------------------------------------------------
def _hit(path: str, score: float, sources: tuple[str, ...] = ("bm25.code",)) -> dict:
    return {"path": path, "score": score, "sources": list(sources)}


def test_merge_is_reciprocal_rank_fusion_of_each_members_list() -> None:
    a, b = Member("a", Path("/r/a")), Member("b", Path("/r/b"))
    big = [_hit(f"a{i}.py", 30.0 - i) for i in range(5)]  # large raw scores
    small = [_hit("b0.py", 0.2), _hit("b1.py", 0.1)]
    out = merge([(a, big), (b, small)], k=4)
    assert [(r["repo"], r["path"]) for r in out] == [
        ("a", "a0.py"), ("b", "b0.py"), ("a", "a1.py"), ("b", "b1.py"),
    ]  # fmt: skip
    assert out[0]["score"] == round(1 / 61, 6) and out[2]["score"] == round(1 / 62, 6)
    assert out[1]["repo_score"] == 0.2 and out[1]["repo_root"] == "/r/b"


def test_exact_evidence_wins_a_tie_of_ranks() -> None:
    a, b = Member("a", Path("/r/a")), Member("b", Path("/r/b"))
    out = merge([(a, [_hit("x.py", 9.0)]), (b, [_hit("y.py", 0.1, ("exact", "bm25.code"))])], 2)
    assert [r["repo"] for r in out] == ["b", "a"]


def test_then_the_share_of_query_words_breaks_the_tie() -> None:
    a, b = Member("a", Path("/r/a")), Member("b", Path("/r/b"))
    near = {**_hit("mail.py", 9.0), "symbol": "retry_email", "snippet": "retry"}
    answer = {**_hit("inv.py", 0.1), "symbol": "retryInvoiceWebhook", "snippet": ""}
    out = merge([(a, [near]), (b, [answer])], 2, query="retry invoice webhook")
    assert [r["repo"] for r in out] == ["b", "a"]
    assert [r["repo"] for r in merge([(a, [near]), (b, [answer])], 2)] == ["a", "b"]


def test_short_names_disambiguate_same_directory_names() -> None:
    roots = [Path("/w/one/app"), Path("/w/two/app"), Path("/w/lib")]
    assert workspace.short_names(roots) == ["one/app", "two/app", "lib"]


# -- storage -----------------------------------------------------------------------------------
def test_add_list_remove_in_the_user_config_dir(tmp_path, isolated_config) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _cli("workspace", "add", "team", str(a), str(b))
    _cli("workspace", "add", "team", str(a))  # already there: no duplicate
    stored = isolated_config / "llmc" / "workspaces.toml"
    assert stored.is_file() and stored.stat().st_mode & 0o077 == 0
    listed = json.loads(_cli("workspace", "list", "--json"))["workspaces"]["team"]
    assert [m["root"] for m in listed] == [str(a.resolve()), str(b.resolve())]
    assert [m["indexed"] for m in listed] == [False, False]
    _cli("workspace", "remove", "team", str(a))
    assert workspace.load_workspaces()["team"] == (b.resolve(),)
    _cli("workspace", "remove", "team")
    assert workspace.load_workspaces() == {}
    assert "no workspace 'team'" in _cli("workspace", "remove", "team", code=1)
    assert "not a workspace name" in _cli("workspace", "add", "../x", str(a), code=1)


def test_a_repositorys_llmc_toml_cannot_declare_a_workspace(tmp_path) -> None:
    """Workspaces come from the user's config only: a cloned repository cannot make llmc
    read another repository's index by naming it."""
    repo = make_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    (repo / "llmc.toml").write_text(f'[workspace.evil]\npaths = ["{tmp_path}"]\n')
    with pytest.raises(workspace.UnknownWorkspace):
        workspace.members("evil")


# -- search across repositories -------------------------------------------------------------------
def _large_repo(root: Path, files: int = 120) -> Path:
    """Many near misses: retry and backoff everywhere, never for invoices."""
    body = {
        f"svc/mod{i:03d}.py": (
            f"def retry_backoff_{i}(request):\n"
            f'    """Retry the {["email", "sms", "push", "audit"][i % 4]} webhook with '
            f'exponential backoff and jitter."""\n'
            f"    for attempt in range(5):\n"
            f"        backoff = 2 ** attempt  # retry webhook backoff\n"
            f"    return request\n"
        )
        for i in range(files)
    }
    return make_repo(root, body)


SMALL = {
    "billing/invoice.py": (
        "def retry_invoice_webhook(event):\n"
        '    """Retry the invoice webhook delivery with backoff."""\n'
        "    return event\n"
    ),
    "billing/tax.py": "def tax_rate(country):\n    return 0.2\n",
}


@pytest.fixture(scope="module")
def two_repos(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("ws")
    big, small = _large_repo(base / "big"), make_repo(base / "small", SMALL)
    _index(big)
    _index(small)
    return big, small


def test_the_small_repositorys_answer_is_not_buried(two_repos, monkeypatch) -> None:
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    big, small = two_repos
    _cli("workspace", "add", "w", str(big), str(small))
    out = json.loads(_cli("search", "--workspace", "w", "retry invoice webhook backoff", "--json"))
    top = [(r["repo"], r["path"]) for r in out["results"][:3]]
    assert ("small", "billing/invoice.py") in top, out["results"][:5]
    assert {m["name"] for m in out["members"]} == {"big", "small"}
    assert all(r["repo_root"] in (str(big), str(small)) for r in out["results"])
    human = _cli("search", "--workspace", "w", "retry invoice webhook backoff")
    assert "small" in human and "billing/invoice.py" in human


def test_a_member_without_or_with_a_broken_index_is_one_warning(two_repos, tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    big, small = two_repos
    bare = make_repo(tmp_path / "bare", {"x.py": "y = 1\n"})
    broken = make_repo(tmp_path / "broken", {"x.py": "y = 1\n"})
    (broken / ".llmc").mkdir(mode=0o700)
    (broken / ".llmc" / "index.db").write_bytes(b"this is not a database" * 100)
    _cli("workspace", "add", "w2", str(bare), str(small), str(broken))
    result = CliRunner().invoke(main, ["search", "--workspace", "w2", "invoice", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [r["repo"] for r in out["results"]][:1] == ["small"]
    left_out = [w for w in out["warnings"] if "left out" in w]
    assert len(left_out) == 2 and any("bare" in w for w in left_out), out["warnings"]
    assert any("broken" in w for w in left_out)
    assert [m.get("error") is not None for m in out["members"]] == [True, False, True]


def test_an_unknown_workspace_is_one_line(tmp_path) -> None:
    assert "no workspace 'nope'" in _cli("search", "--workspace", "nope", "q", code=1)


def test_the_daemon_endpoint_takes_a_workspace(two_repos, monkeypatch) -> None:
    """`/v1/search` with "workspace": the endpoint function the daemon and `llmc mcp` run;
    the engine answers for its own repository, the other member is searched beside it."""
    from llmc.config import load_config
    from llmc.daemon import api
    from llmc.daemon.engine import Engine
    from llmc.errors import ApiError

    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    big, small = two_repos
    _cli("workspace", "add", "w3", str(big), str(small))
    ctx = api.Context(Engine(small, load_config(small), start_worker=False))
    try:
        out = api.call(ctx, "search", {"query": "invoice webhook", "workspace": "w3", "k": 5})
        assert out["workspace"] == "w3" and len(out["results"]) <= 5
        assert out["results"][0]["repo"] == "small"  # the tie of first places, by words
        with pytest.raises(ApiError) as e:
            api.call(ctx, "search", {"query": "x", "workspace": "missing"})
        assert e.value.status == 404
        with pytest.raises(ApiError) as e:
            api.call(ctx, "search", {"query": "x", "workspace": 3})
        assert e.value.status == 400
    finally:
        ctx.engine.close()


def test_a_path_toml_cannot_hold_is_one_line_and_loses_nothing(tmp_path) -> None:
    """A directory name that is not UTF-8 cannot be written in workspaces.toml: the add is
    refused in one line and the workspaces already there stay as they were."""
    good = tmp_path / "good"
    good.mkdir()
    _cli("workspace", "add", "team", str(good))
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/odd\xffname"))
    odd.mkdir()
    result = CliRunner().invoke(main, ["workspace", "add", "team", str(odd)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.exception
    assert "not valid UTF-8" in result.output and len(result.output.strip().splitlines()) == 1
    assert workspace.load_workspaces()["team"] == (good.resolve(),)
    assert not list(workspace.workspaces_path().parent.glob(".*.tmp"))


def test_every_control_character_in_a_path_round_trips(tmp_path) -> None:
    """workspaces.toml holds any path a directory can have: C0, DEL, C1, quotes, backslash."""
    odd = "".join(chr(c) for c in range(1, 0xA0) if chr(c) != "/") + '"\\\u2028'
    roots = (tmp_path / odd, tmp_path / "plain")
    stored = workspace.save_workspaces({"team": roots}, tmp_path / "workspaces.toml")
    assert workspace.load_workspaces(stored) == {"team": roots}
