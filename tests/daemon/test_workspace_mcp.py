"""The MCP ``search`` tool with ``workspace``, driven by the official SDK client over stdio,
and ``/v1/search`` with ``workspace`` on a running daemon.

`llmc mcp` runs in repository A with no daemon; the workspace (A, B, C and a directory with
no index) lives in the user's config dir, so the call searches A, B and C in one ranking
and says in one warning that the fourth was left out. Then B runs a daemon: its
`/v1/search` answers for B and searches A and C beside it, and `llmc search --workspace`
asks B's daemon.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_helpers import FILES, child_env, llmc, make_git_repo, start_daemon, stop_daemon
from waiting import HANG_S

SMALL = {
    "billing/invoice.py": (
        "def retry_invoice_webhook(event):\n"
        '    """Retry the invoice webhook delivery with backoff."""\n'
        "    return event\n"
    ),
}
THIRD = {
    "shipping/labels.py": (
        "def print_parcel_label(parcel):\n"
        '    """Print the carrier label for a parcel, with its barcode."""\n'
        "    return parcel\n"
    ),
}


@pytest.fixture(scope="module")
def workspace_env(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("mcp-ws")
    a = make_git_repo(base / "a", FILES)
    b = make_git_repo(base / "b", SMALL)
    c = make_git_repo(base / "c", THIRD)
    bare = make_git_repo(base / "bare", {"x.py": "y = 1\n"})
    env = child_env(tmp_path_factory.mktemp("mcp-ws-xdg"), LLMC_NO_DAEMON="1")
    for root in (a, b, c):
        llmc("index", str(root), "--quiet", "--no-vectors", env=env)
    llmc("workspace", "add", "team", str(a), str(b), str(c), str(bare), env=env)
    return a, b, env


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_mcp_search_takes_a_workspace(workspace_env, tmp_path) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root, _, env = workspace_env
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "llmc", "mcp", "--repo", str(root)], env=env
    )
    errlog = tmp_path / "mcp.stderr"

    async def run() -> None:
        with anyio.fail_after(4 * HANG_S), errlog.open("w") as err:  # a hang guard only
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {t.name: t for t in (await session.list_tools()).tools}
                    schema = tools["search"].input_schema["properties"]
                    assert schema["workspace"]["type"] == "string"

                    args = {"query": "retry the invoice webhook", "workspace": "team", "k": 5}
                    found = await session.call_tool("search", args)
                    assert not found.is_error, _text(found)
                    out = found.structured_content
                    assert out["workspace"] == "team"
                    assert {r["repo"] for r in out["results"]} <= {"a", "b", "c"}
                    assert out["results"][0]["repo"] == "b", out["results"]
                    assert "b: billing/invoice.py:1-3" in _text(found)
                    searched = {m["name"] for m in out["members"] if "error" not in m}
                    assert searched == {"a", "b", "c"}
                    args = {"query": "print the parcel label", "workspace": "team", "k": 5}
                    third = (await session.call_tool("search", args)).structured_content
                    assert third["results"][0]["repo"] == "c", third["results"]
                    left_out = [w for w in out["warnings"] if "left out" in w]
                    assert len(left_out) == 1 and "bare" in left_out[0]

                    plain = await session.call_tool("search", {"query": "session store"})
                    assert not plain.is_error and "workspace" not in plain.structured_content

                    unknown = await session.call_tool("search", {"query": "x", "workspace": "no"})
                    assert unknown.is_error and "no workspace 'no'" in _text(unknown)

    try:
        anyio.run(run)
    except BaseException:
        print(errlog.read_text(errors="replace"), file=sys.stderr)  # the server's stderr
        raise


def test_a_daemon_answers_a_workspace_search(workspace_env) -> None:
    import json

    a, b, env = workspace_env
    env = {k: v for k, v in env.items() if k != "LLMC_NO_DAEMON"}
    handle = start_daemon(b, env)
    try:
        out = handle.search("retry the invoice webhook", workspace="team", k=5)
        assert out["workspace"] == "team" and out["results"][0]["repo"] == "b"
        assert {m["name"] for m in out["members"] if "error" not in m} == {"a", "b", "c"}
        third = handle.search("print the parcel label", workspace="team", k=5)
        assert third["results"][0]["repo"] == "c", third["results"]
        cli = llmc("search", "--workspace", "team", "retry the invoice webhook", "--json", env=env)
        merged = json.loads(cli.stdout)
        assert merged["results"][0]["repo"] == "b" and merged["results"][0]["repo_root"] == str(b)
        cli = llmc("search", "--workspace", "team", "print the parcel label", "--json", env=env)
        assert json.loads(cli.stdout)["results"][0]["repo"] == "c"
    finally:
        stop_daemon(b, env)
