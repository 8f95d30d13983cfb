"""`llmc mcp`: JSON-RPC over stdio, through the daemon and in-process without one."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from llmc.config import load_config
from llmc.mcp import McpServer, serve


def _session(server_cmd: list[str], env: dict, messages: list) -> list[dict]:
    lines = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    out = subprocess.run(
        server_cmd, input=lines, capture_output=True, text=True, env=env, timeout=240
    )
    assert out.returncode == 0, out.stderr
    # stdout carries protocol messages only: every line is a JSON-RPC response.
    return [json.loads(line) for line in out.stdout.splitlines()]


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "0"},
    },
}


def _call(i: int, tool: str, args: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args},
    }


def test_mcp_over_stdio_through_the_daemon(shared_daemon, daemon_env):
    cmd = [sys.executable, "-m", "llmc", "mcp", "--repo", str(shared_daemon.root)]
    out = _session(
        cmd,
        daemon_env,
        [
            INIT,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            _call(3, "search", {"query": "save a session token", "k": 3}),
            _call(4, "where_used", {"symbol": "SessionStore"}),
            _call(5, "deps", {"target": "open_store"}),
            _call(6, "status", {}),
            _call(7, "search", {"query": ""}),
            _call(8, "nope", {}),
            {"jsonrpc": "2.0", "id": 9, "method": "no/such/method"},
            "{this is not json",
            {"jsonrpc": "2.0", "id": 10, "method": "ping"},
        ],
    )
    by_id = {m.get("id"): m for m in out}
    assert len(out) == 11  # one per request; none for the notification
    init = by_id[1]["result"]
    assert init["protocolVersion"] == "2025-06-18" and "tools" in init["capabilities"]
    tools = {t["name"] for t in by_id[2]["result"]["tools"]}
    assert tools == {"search", "where_used", "deps", "status"}
    search = by_id[3]["result"]
    assert not search["isError"]
    assert search["structuredContent"]["results"][0]["path"] == "app/store.py"
    assert "app/store.py:" in search["content"][0]["text"]
    used = by_id[4]["result"]["structuredContent"]
    assert any(r["name"] == "open_store" for r in used["callers"])
    assert by_id[5]["result"]["structuredContent"]["deps"]
    status = by_id[6]["result"]["structuredContent"]
    assert status["daemon"] is True and status["pid"] == shared_daemon.pid()
    assert by_id[7]["result"]["isError"] and "empty" in by_id[7]["result"]["content"][0]["text"]
    assert by_id[8]["error"]["code"] == -32602
    assert by_id[9]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[10]["result"] == {}


def test_mcp_in_process_without_a_daemon(shared_daemon):
    server = McpServer(shared_daemon.root, load_config(shared_daemon.root), use_daemon=False)
    stdin = io.BytesIO(
        b"\n".join(
            json.dumps(m).encode()
            for m in (
                {**INIT, "params": {**INIT["params"], "protocolVersion": "2024-11-05"}},
                _call(2, "search", {"query": "Router", "k": 2}),
                _call(3, "where_used", {"symbol": "NoSuchSymbolAnywhere"}),
            )
        )
    )
    stdout = io.BytesIO()
    try:
        serve(server, stdin, stdout)
    finally:
        server.close()
    out = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert out[0]["result"]["protocolVersion"] == "2024-11-05"
    search = out[1]["result"]
    assert "structuredContent" not in search  # not in the 2024-11-05 protocol
    assert "app/server.js:" in search["content"][0]["text"]
    assert out[2]["result"]["isError"]
    assert "NoSuchSymbolAnywhere" in out[2]["result"]["content"][0]["text"]


def test_mcp_honours_llmc_no_daemon(shared_daemon, daemon_env):
    cmd = [sys.executable, "-m", "llmc", "mcp", "--repo", str(shared_daemon.root)]
    out = _session(
        cmd,
        {**daemon_env, "LLMC_NO_DAEMON": "1"},
        [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, _call(2, "status", {})],
    )
    assert out[1]["result"]["structuredContent"]["daemon"] is False  # a daemon runs, unused
