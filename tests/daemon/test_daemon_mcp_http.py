"""MCP over streamable HTTP from the warm daemon (`/mcp`), driven by the official SDK client.

The SDK's `streamable_http_client` talks to the shared daemon through an `httpx2` client
(the SDK's HTTP library) whose transport is the daemon's Unix socket, and once over the
token-guarded TCP port. Every call runs in the daemon, on the fixture repository it indexed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from waiting import HANG_S

TOOL_NAMES = {"search", "where_used", "deps", "status"}


def _run(client_factory: Callable[[], Any], url: str, body: Callable[[Any, Any], Awaitable[None]]):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> None:
        with anyio.fail_after(HANG_S):  # a hang guard only
            async with (
                client_factory() as http,
                streamable_http_client(url, http_client=http) as (
                    read,
                    write,
                ),
            ):
                async with ClientSession(read, write) as session:
                    await body(session, await session.initialize())

    anyio.run(run)


def _unix(sock: Any) -> Callable[[], Any]:
    import httpx2

    return lambda: httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)))


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_mcp_over_http_on_the_unix_socket(shared_daemon):
    async def body(session: Any, init: Any) -> None:
        assert init.server_info.name == "llmc"
        assert init.capabilities.tools is not None
        assert init.capabilities.resources is None and init.capabilities.prompts is None

        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOL_NAMES
        assert tools["search"].input_schema["required"] == ["query"]

        found = await session.call_tool("search", {"query": "save a session token", "k": 3})
        assert not found.is_error, _text(found)
        results = found.structured_content["results"]
        assert 1 <= len(results) <= 3 and results[0]["path"] == "app/store.py"
        assert "app/store.py:" in _text(found)

        used = await session.call_tool("where_used", {"symbol": "SessionStore"})
        assert not used.is_error, _text(used)
        assert any(r["name"] == "open_store" for r in used.structured_content["callers"])

        deps = await session.call_tool("deps", {"target": "open_store"})
        assert not deps.is_error, _text(deps)
        assert any(d["node"].endswith("SessionStore") for d in deps.structured_content["deps"])

        status = await session.call_tool("status", {})
        assert status.structured_content["daemon"] is True
        assert status.structured_content["pid"] == shared_daemon.pid()

    _run(_unix(shared_daemon.sock), "http://llmc/mcp", body)


def test_mcp_over_http_bad_arguments_and_unknown_tools(shared_daemon):
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS

    async def body(session: Any, init: Any) -> None:
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
        bad_depth = await session.call_tool("deps", {"target": "open_store", "depth": 0})
        assert bad_depth.is_error and "depth" in _text(bad_depth)
        with pytest.raises(MCPError) as raised:
            await session.call_tool("no_such_tool", {})
        assert raised.value.error.code == INVALID_PARAMS
        # Still usable after both kinds of failure.
        found = await session.call_tool("search", {"query": "Router", "k": 2})
        assert found.structured_content["results"][0]["path"] == "app/server.js"

    _run(_unix(shared_daemon.sock), "http://llmc/mcp", body)


# Arguments past the advertised schema: a request-wide config (it once set llm.ollama_host,
# making the daemon POST code to any URL), explain, k over the schema's maximum.
BEYOND_THE_SCHEMA = (
    ({"query": "store", "config": {"llm.ollama_host": "http://198.51.100.7"}}, "config"),
    ({"query": "store", "config": {"search.dense": False}}, "config"),
    ({"query": "store", "explain": True}, "explain"),
    ({"query": "store", "k": 1000}, "k must be at most 100"),
    ({"query": "store", "q": "other"}, "q"),
)


def test_mcp_over_http_takes_only_what_the_schema_advertises(shared_daemon):
    async def body(session: Any, init: Any) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        for tool in tools.values():
            assert tool.input_schema["additionalProperties"] is False
        for args, says in BEYOND_THE_SCHEMA:
            result = await session.call_tool("search", args)
            assert result.is_error, args
            assert says in _text(result), (args, _text(result))
        for name, args in (("where_used", {"symbol": "open_store", "text": True}),):
            result = await session.call_tool(name, args)
            assert result.is_error and "text" in _text(result)
        found = await session.call_tool("search", {"query": "Router", "k": 100})
        assert not found.is_error, _text(found)

    _run(_unix(shared_daemon.sock), "http://llmc/mcp", body)


def test_mcp_over_tcp_needs_the_token(shared_daemon):
    import httpx2

    port = shared_daemon.status()["endpoints"]["tcp"]["port"]
    token = (shared_daemon.root / ".llmc" / "daemon.token").read_text().strip()
    url = f"http://127.0.0.1:{port}/mcp"

    async def body(session: Any, init: Any) -> None:
        found = await session.call_tool("search", {"query": "Router", "k": 1})
        assert found.structured_content["results"][0]["path"] == "app/server.js"

    auth = {"Authorization": f"Bearer {token}"}
    _run(lambda: httpx2.AsyncClient(headers=auth), url, body)

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    for extra, status in (({}, 401), ({**auth, "Origin": "http://evil.example"}, 403)):
        answer = httpx2.post(url, content=json.dumps(init), headers={**headers, **extra})
        assert answer.status_code == status
        assert answer.json()["error"]["status"] == status
