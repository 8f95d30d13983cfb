"""`llmc mcp`: a Model Context Protocol server over stdio for coding agents.

Tools: ``search``, ``where_used``, ``deps``, ``status``. Each call goes to the repository's
daemon when one answers (warm models, fresh index) and otherwise runs in this process
through the same endpoint functions (``llmc.daemon.api``), loading models on first use.

The protocol is JSON-RPC 2.0, one message per line on stdin/stdout (the MCP stdio
transport), implemented here with the stdlib: the official ``mcp`` package would bring
pydantic, starlette, uvicorn, httpx and anyio for four tools. Methods: ``initialize``,
``ping``, ``tools/list``, ``tools/call``; notifications are accepted and ignored; empty
``resources/list`` and ``prompts/list`` for clients that ask anyway. Protocol output owns
file descriptor 1; anything else that prints (a library, a warning) goes to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from llmc.config import Config
from llmc.errors import LlmcError

log = logging.getLogger(__name__)

PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
INSTRUCTIONS = (
    "llmc searches this repository's code and docs locally. Use `search` for where/how/why "
    "questions (results are file:line spans with snippets), `where_used` for the callers, "
    "importers, subclasses, tests and docs of a symbol, `deps` for what a symbol or file "
    "depends on, `status` for how fresh the index is."
)

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "title": "Search code and docs",
        "description": (
            "Ranked code and documentation spans (path, start_line, end_line, symbol, "
            "snippet) for a natural-language or identifier query."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "route": {
                    "type": "string",
                    "enum": ["auto", "code", "docs", "mixed"],
                    "description": "Search code, docs or both (default: decided per query).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": "where_used",
        "title": "Where is a symbol used",
        "description": (
            "Callers, importers, subclasses, tests and docs of a symbol or file. SYMBOL may "
            "be a plain name, a qualified name (Class.method), a dotted module path or a "
            "file path; an ambiguous name returns the candidates."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "symbol": {"type": "string"},
                "min_confidence": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
            },
            "required": ["symbol"],
            "additionalProperties": False,
        },
    },
    {
        "name": "deps",
        "title": "Dependencies of a symbol or file",
        "description": "What a symbol or file calls, imports and inherits, up to `depth` hops.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "target": {"type": "string"},
                "depth": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["target"],
            "additionalProperties": False,
        },
    },
    {
        "name": "status",
        "title": "Index status",
        "description": "How fresh and how large the index is, and whether a daemon serves it.",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    },
]
TOOL_ENDPOINTS = {
    "search": "search",
    "where_used": "graph/where-used",
    "deps": "graph/deps",
    "status": "status",
}


class _RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _render_search(out: dict[str, Any]) -> str:
    lines = [f"{len(out.get('results', []))} results for {out.get('query', '')!r}"]
    for i, r in enumerate(out.get("results", []), 1):
        where = f"{r['path']}:{r['start_line']}-{r['end_line']}"
        what = " ".join(x for x in (r.get("kind"), r.get("symbol")) if x)
        lines.append(f"\n{i}. {where} {what} (score {r.get('score', 0):.3f})")
        if r.get("snippet"):
            lines.append(r["snippet"].rstrip())
    for w in out.get("warnings", []):
        lines.append(f"\nwarning: {w}")
    return "\n".join(lines)


class McpServer:
    """Dispatch JSON-RPC messages for one repository."""

    def __init__(self, root: Path, cfg: Config, use_daemon: bool = True):
        self.root = Path(root).resolve()
        self.cfg = cfg
        self.use_daemon = use_daemon
        self._ctx: Any = None
        self.protocol_version = PROTOCOL_VERSIONS[0]

    # -- tools ------------------------------------------------------------------------------
    def _local(self) -> Any:
        if self._ctx is None:
            from llmc.daemon.api import Context
            from llmc.daemon.engine import Engine

            self._ctx = Context(Engine(self.root, self.cfg, start_worker=False))
        return self._ctx

    def _endpoint(self, endpoint: str, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(answer, from_daemon)."""
        from llmc.daemon import api
        from llmc.daemon.client import DaemonError, DaemonUnavailable, request

        if self.use_daemon:
            payload = dict(params)
            if endpoint == "search":
                from llmc.daemon.engine import client_config

                payload["config"] = client_config(self.cfg)
            try:
                if endpoint == "status":
                    return request(self.root, endpoint, None), True
                return request(self.root, endpoint, payload), True
            except DaemonUnavailable:
                pass
            except DaemonError as e:
                if e.status < 500 and e.status not in (404, 405):
                    raise LlmcError(str(e)) from None
        if endpoint == "status":
            from llmc.index.status import index_status

            return {"daemon": False, **index_status(self.root, self.cfg).to_json()}, False
        return api.call(self._local(), endpoint, params), False

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        endpoint = TOOL_ENDPOINTS.get(name)
        if endpoint is None:
            raise _RpcError(INVALID_PARAMS, f"unknown tool {name!r}")
        if not isinstance(arguments, dict):
            raise _RpcError(INVALID_PARAMS, "arguments must be an object")
        try:
            out, from_daemon = self._endpoint(endpoint, arguments)
        except LlmcError as e:
            return {"content": [{"type": "text", "text": f"error: {e}"}], "isError": True}
        if name == "status" and from_daemon:
            out = {"daemon": True, **out}
        text = _render_search(out) if name == "search" else json.dumps(out, ensure_ascii=False)
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if self.protocol_version >= "2025-06-18":
            result["structuredContent"] = out
        return result

    # -- JSON-RPC ---------------------------------------------------------------------------
    def handle(self, message: Any) -> dict[str, Any] | None:
        """One request or notification; the response (None for notifications)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        msg_id = message.get("id")
        is_notification = "id" not in message
        if not isinstance(method, str):
            if "result" in message or "error" in message:
                return None  # a response to a request we never send
            return _error(msg_id, INVALID_REQUEST, "missing method")
        params = message.get("params") or {}
        try:
            result = self._dispatch(method, params)
        except _RpcError as e:
            return None if is_notification else _error(msg_id, e.code, str(e))
        except Exception as e:  # noqa: BLE001 - one failing call never ends the session
            log.exception("%s failed", method)
            return None if is_notification else _error(msg_id, INTERNAL_ERROR, str(e))
        if is_notification:
            return None
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}

    def _dispatch(self, method: str, params: Any) -> Any:
        if not isinstance(params, dict):
            raise _RpcError(INVALID_PARAMS, "params must be an object")
        if method == "initialize":
            from llmc import __version__

            asked = params.get("protocolVersion")
            if asked in PROTOCOL_VERSIONS:
                self.protocol_version = asked
            return {
                "protocolVersion": self.protocol_version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "llmc", "title": "llmc code search", "version": __version__},
                "instructions": INSTRUCTIONS,
            }
        if method == "ping":
            return {}
        if method.startswith("notifications/"):
            return None
        if method == "tools/list":
            return {"tools": TOOLS}
        if method == "tools/call":
            return self.call_tool(params.get("name", ""), params.get("arguments") or {})
        if method in ("resources/list", "resources/templates/list", "prompts/list"):
            key = {"resources/list": "resources", "prompts/list": "prompts"}.get(
                method, "resourceTemplates"
            )
            return {key: []}
        raise _RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    def close(self) -> None:
        if self._ctx is not None:
            self._ctx.engine.close()


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def serve(server: McpServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Read messages line by line until EOF; write one response line per request."""
    for raw in stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError as e:
            responses: list[Any] = [_error(None, PARSE_ERROR, f"parse error: {e}")]
        else:
            if isinstance(message, list):  # a batch (protocol 2025-03-26)
                out = [r for r in (server.handle(m) for m in message) if r is not None]
                responses = [out] if out else []
                if not message:
                    responses = [_error(None, INVALID_REQUEST, "empty batch")]
            else:
                r = server.handle(message)
                responses = [r] if r is not None else []
        for r in responses:
            stdout.write(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n")
            stdout.flush()


def serve_stdio(root: Path, cfg: Config) -> None:
    """`llmc mcp`: serve on this process's stdin/stdout until stdin closes."""
    proto = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints, even from C code, land on stderr
    sys.stdout = sys.stderr
    server = McpServer(root, cfg)
    try:
        serve(server, sys.stdin.buffer, proto)
    finally:
        server.close()
        proto.close()


__all__ = ["TOOLS", "McpServer", "serve", "serve_stdio"]
