"""Team searches through the daemon's ``/v1/search`` and the MCP ``search`` tool (the
official SDK client over stdio), against a real PostgreSQL + pgvector holding two published
repositories: each answers from the right repository, naming it and its commit; a request
cannot bring settings of its own to a team search."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_helpers import child_env, git, llmc, make_git_repo, start_daemon, stop_daemon
from waiting import HANG_S

from llmc.daemon.client import DaemonError

SHOP = {
    "shop/discount.py": (
        "def apply_discount(total, code):\n"
        "    '''Take a discount code off the total.'''\n"
        "    return total * 0.9 if code else total\n"
    ),
}
BILLING = {
    "billing/invoice.py": (
        "def retry_invoice_webhook(event):\n"
        "    '''Retry the invoice webhook delivery with backoff.'''\n"
        "    return event\n"
    ),
}


@pytest.fixture
def team(tmp_path, team_url) -> tuple[Path, Path, dict[str, str]]:
    xdg = tmp_path / "xdg"
    (xdg / "llmc").mkdir(parents=True)
    (xdg / "llmc" / "config.toml").write_text(f'[team]\nurl = "{team_url}"\n')
    env = child_env(xdg)
    shop, billing = (
        make_git_repo(tmp_path / "shop", SHOP),
        make_git_repo(tmp_path / "billing", BILLING),
    )
    for root in (shop, billing):
        llmc("index", str(root), "--quiet", "--no-vectors", env=env)
        llmc("team", "push", "--repo", str(root), env=env)
    return shop, billing, env


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_the_daemon_answers_team_searches(team) -> None:
    shop, billing, env = team
    commit = git(billing, "rev-parse", "HEAD").stdout.strip()
    handle = start_daemon(shop, env, "--no-watch")
    try:
        out = handle.search("retry the invoice webhook", team=True, k=5)
        top = out["results"][0]
        assert (top["repo"], top["path"], top["commit"]) == (
            "billing",
            "billing/invoice.py",
            commit,
        )
        assert {r["repo"] for r in out["repos"]} == {"shop", "billing"}
        only = handle.search("retry the invoice webhook", repos=["shop"], k=5)
        assert {r["repo"] for r in only["results"]} <= {"shop"}
        with pytest.raises(DaemonError) as refused:  # settings are the daemon user's own
            handle.search("x", team=True, config={"search.bm25": False})
        assert refused.value.status == 400
        with pytest.raises(DaemonError) as unknown:
            handle.search("x", repos=["nope"])
        assert unknown.value.status == 503 and "nope" in str(unknown.value)
        cli = llmc("search", "--team", "apply a discount code", "--json", "--repo", str(shop),
                   env=env)  # fmt: skip
        assert json.loads(cli.stdout)["results"][0]["repo"] == "shop"
    finally:
        stop_daemon(shop, env)


def test_mcp_search_takes_team(team, tmp_path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    shop, billing, env = team
    commit = git(billing, "rev-parse", "HEAD").stdout.strip()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "llmc", "mcp", "--repo", str(shop)],
        env={**env, "LLMC_NO_DAEMON": "1"},
    )  # fmt: skip
    errlog = tmp_path / "mcp.stderr"

    async def run() -> None:
        with anyio.fail_after(4 * HANG_S), errlog.open("w") as err:  # a hang guard only
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    assert tools["search"].input_schema["properties"]["team"]["type"] == "boolean"
                    args = {"query": "retry the invoice webhook", "team": True, "k": 5}
                    found = await session.call_tool("search", args)
                    assert not found.is_error, _text(found)
                    top = found.structured_content["results"][0]
                    assert (top["repo"], top["commit"]) == ("billing", commit)
                    assert f"billing@{commit[:12]}: billing/invoice.py:1-3" in _text(found)
                    args = {"query": "apply a discount code", "team": True, "repos": ["shop"]}
                    shop_only = (await session.call_tool("search", args)).structured_content
                    assert {r["repo"] for r in shop_only["results"]} == {"shop"}

    try:
        anyio.run(run)
    except BaseException:
        print(errlog.read_text(errors="replace"), file=sys.stderr)  # the server's stderr
        raise
