"""`llmc mcp` driven by the official MCP SDK's own client over stdio.

The server runs as `python -m llmc mcp` on an indexed fixture repository with no daemon,
so every call runs in the MCP process. The SDK's `stdio_client` spawns it and
`ClientSession` speaks the protocol: initialize, tools/list, tools/call.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from daemon_helpers import FILES, child_env, llmc, make_git_repo
from waiting import HANG_S

TOOL_NAMES = {"search", "where_used", "deps", "status"}


@pytest.fixture(scope="module")
def indexed_repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fixture repository indexed with the CLI; LLMC_NO_DAEMON keeps any daemon out."""
    root = make_git_repo(tmp_path_factory.mktemp("mcp-sdk") / "repo", FILES)
    env = child_env(tmp_path_factory.mktemp("mcp-sdk-xdg"), LLMC_NO_DAEMON="1")
    llmc("index", str(root), "--quiet", env=env)
    return root, env


def _session(
    repo: tuple[Path, dict[str, str]],
    errlog: Path,
    body: Callable[[Any, Any], Awaitable[None]],
    modern: bool = False,
) -> None:
    """Spawn `llmc mcp` with the SDK's stdio client; run ``body(session, opening_result)``.

    The session opens with the initialize handshake, or with ``modern`` the 2026-07-28
    way (server/discover, then every request carries its own protocol envelope).
    """
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    root, env = repo
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "llmc", "mcp", "--repo", str(root)], env=env
    )

    async def run() -> None:
        with anyio.fail_after(4 * HANG_S), errlog.open("w") as err:  # a hang guard only
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    if not modern:
                        await body(session, await session.initialize())
                        return
                    found = await session.discover()
                    session.adopt(found)
                    await body(session, found)

    try:
        anyio.run(run)
    except BaseException:
        print(errlog.read_text(errors="replace"), file=sys.stderr)  # the server's stderr
        raise


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_sdk_client_lists_and_calls_the_tools(indexed_repo, tmp_path):
    async def body(session: Any, init: Any) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        assert init.server_info.name == "llmc"
        assert init.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        assert init.capabilities.tools is not None
        assert init.capabilities.resources is None and init.capabilities.prompts is None
        assert "search" in (init.instructions or "")

        listing = await session.list_tools()
        tools = {t.name: t for t in listing.tools}
        assert set(tools) == TOOL_NAMES
        assert tools["search"].input_schema["required"] == ["query"]
        assert tools["deps"].input_schema["properties"]["depth"]["type"] == "integer"

        found = await session.call_tool("search", {"query": "save a session token", "k": 3})
        assert not found.is_error, _text(found)
        results = found.structured_content["results"]
        assert 1 <= len(results) <= 3
        assert results[0]["path"] == "app/store.py"
        assert "app/store.py:" in _text(found)

        used = await session.call_tool("where_used", {"symbol": "SessionStore"})
        assert not used.is_error, _text(used)
        assert any(r["name"] == "open_store" for r in used.structured_content["callers"])
        # the text an agent reads is the `llmc graph where-used` answer, not raw JSON
        assert not _text(used).lstrip().startswith("{"), _text(used)[:200]
        assert "open_store" in _text(used) and "callers" in _text(used)

        deps = await session.call_tool("deps", {"target": "open_store"})
        assert not deps.is_error and deps.structured_content["deps"], _text(deps)

        status = await session.call_tool("status", {})
        assert not status.is_error, _text(status)
        assert status.structured_content["daemon"] is False

    _session(indexed_repo, tmp_path / "mcp.stderr", body)


def test_sdk_client_arguments_beyond_the_schema_are_refused(indexed_repo, tmp_path):
    from test_daemon_mcp_http import BEYOND_THE_SCHEMA

    async def body(session: Any, init: Any) -> None:
        for args, says in BEYOND_THE_SCHEMA:
            result = await session.call_tool("search", args)
            assert result.is_error, args
            assert says in _text(result), (args, _text(result))
        bad = await session.call_tool("deps", {"target": "open_store", "text": True})
        assert bad.is_error and "text" in _text(bad)

    _session(indexed_repo, tmp_path / "mcp.stderr", body)


def test_sdk_client_sees_bad_arguments_and_unknown_tools(indexed_repo, tmp_path):
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    async def body(session: Any, init: Any) -> None:
        # Bad arguments are tool results with isError, saying what is wrong.
        for args, says in (
            ({"query": ""}, "empty"),
            ({}, "query"),
            ({"query": "store", "k": "many"}, "k must be"),
            ({"query": "store", "route": "sideways"}, "route"),
            ({"query": "store", "colour": "blue"}, "colour"),
        ):
            result = await session.call_tool("search", args)
            assert result.is_error, args
            assert says in _text(result), (args, _text(result))
        missing = await session.call_tool("where_used", {"symbol": "NoSuchSymbolAnywhere"})
        assert missing.is_error and "NoSuchSymbolAnywhere" in _text(missing)

        # An unknown tool is a protocol error (JSON-RPC invalid params), not a tool result.
        with pytest.raises(MCPError) as raised:
            await session.call_tool("no_such_tool", {})
        assert raised.value.error.code == INVALID_PARAMS
        assert "no_such_tool" in raised.value.error.message

        # The session is still usable after both kinds of failure.
        assert (await session.send_ping()) is not None
        listing = await session.list_tools()
        assert {t.name for t in listing.tools} == TOOL_NAMES

    _session(indexed_repo, tmp_path / "mcp.stderr", body)


def test_sdk_client_without_a_handshake(indexed_repo, tmp_path):
    """A 2026-07-28 client (no initialize) gets the same tools and results."""

    async def body(session: Any, found: Any) -> None:
        assert found.capabilities.tools is not None
        assert {t.name for t in (await session.list_tools()).tools} == TOOL_NAMES
        found = await session.call_tool("search", {"query": "Router", "k": 2})
        assert not found.is_error, _text(found)
        assert found.structured_content["results"][0]["path"] == "app/server.js"
        bad = await session.call_tool("deps", {"target": "open_store", "depth": 0})
        assert bad.is_error and "depth" in _text(bad)

    _session(indexed_repo, tmp_path / "mcp.stderr", body, modern=True)
