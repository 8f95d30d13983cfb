"""`llmc mcp`: a Model Context Protocol server over stdio for coding agents; the same tools
are served over streamable HTTP by the daemon itself, at ``/mcp`` (``llmc.daemon.asgi``).

Tools: ``search``, ``where_used``, ``deps``, ``status``. Over stdio each call goes to the
repository's daemon when one answers (warm models, fresh index; not with
``LLMC_NO_DAEMON=1``) and otherwise runs in this process through the same endpoint
functions (``llmc.daemon.api``), loading models on first use. In the daemon the calls run
on its own endpoint runner (``McpServer(serve=...)``).

The protocol is the official ``mcp`` SDK's (its low-level ``Server`` and stdio transport:
handshake, version negotiation, ``ping``, errors for unknown methods and bad params). This
module adds the tools and a thin relay between transport and server for two things the SDK
leaves out: a line that is not a JSON-RPC message gets a JSON-RPC error (id null) rather
than silence, and at end of input every request already read is answered before the server
stops (the SDK would cancel them), so a script can pipe requests in and read all answers.
While serving, file descriptor 1 carries protocol messages only; the SDK points it at
stderr for everything else (a library, a warning, C code) and restores it afterwards.
The SDK (pydantic, anyio, starlette) is imported only when ``llmc mcp`` runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from llmc.config import Config
from llmc.errors import LlmcError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp_types import JSONRPCError, JSONRPCMessage

log = logging.getLogger(__name__)

SERVER_TITLE = "llmc code search"
STRUCTURED_SINCE = "2025-06-18"  # the first protocol version with `structuredContent`
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


class UnknownToolError(LookupError):
    """A tools/call for a tool this server does not have (a protocol error, not a tool error)."""


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
    """The tools of one repository: each call through its daemon, or in-process without one."""

    def __init__(
        self,
        root: Path,
        cfg: Config,
        use_daemon: bool = True,
        serve: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    ):
        """``serve(endpoint, params)``: the daemon's own runner, when the daemon hosts these
        tools (MCP over HTTP at ``/mcp``). ``LLMC_NO_DAEMON=1`` turns ``use_daemon`` off."""
        from llmc.daemon.client import daemon_disabled

        self.root = Path(root).resolve()
        self.cfg = cfg
        self.use_daemon = use_daemon and serve is None and not daemon_disabled()
        self.serve = serve
        self._ctx: Any = None

    def _local(self) -> Any:
        if self._ctx is None:
            from llmc.daemon.api import Context
            from llmc.daemon.engine import Engine

            self._ctx = Context(Engine(self.root, self.cfg, start_worker=False))
        return self._ctx

    def _endpoint(self, endpoint: str, params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(answer, from_daemon)."""
        from llmc.daemon import api

        if self.serve is not None:  # we are the daemon
            return self.serve(endpoint, dict(params)), True
        from llmc.daemon.client import request
        from llmc.errors import DaemonError, DaemonUnavailable

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

    def call_tool(
        self, name: str, arguments: dict[str, Any], structured: bool = True
    ) -> dict[str, Any]:
        """A ``CallToolResult`` as JSON; a refused call (LlmcError) is a result with isError.

        ``structured`` adds ``structuredContent`` (protocol 2025-06-18 and later).
        Raises UnknownToolError for a tool that does not exist.
        """
        endpoint = TOOL_ENDPOINTS.get(name)
        if endpoint is None:
            raise UnknownToolError(f"unknown tool {name!r}")
        try:
            out, from_daemon = self._endpoint(endpoint, arguments)
        except LlmcError as e:
            return {"content": [{"type": "text", "text": f"error: {e}"}], "isError": True}
        if name == "status" and from_daemon:
            out = {"daemon": True, **out}
        text = _render_search(out) if name == "search" else json.dumps(out, ensure_ascii=False)
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
        if structured:
            result["structuredContent"] = out
        return result

    def close(self) -> None:
        if self._ctx is not None:
            self._ctx.engine.close()


# -- the SDK server ---------------------------------------------------------------------------
def build_server(tools: McpServer, serial: bool = True) -> Server:
    """The SDK's low-level server with ``tools``: tools/list, tools/call, empty lists.

    ``serial``: one call at a time, in order (stdio: one client, in-process models). The
    daemon passes False: its endpoints are safe to run side by side, as over REST."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import is_version_at_least

    from llmc import __version__

    listing = types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in TOOLS])
    one_at_a_time = anyio.Lock() if serial else contextlib.nullcontext()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        structured = is_version_at_least(ctx.protocol_version, STRUCTURED_SINCE)
        async with one_at_a_time:
            try:
                result = await anyio.to_thread.run_sync(
                    tools.call_tool, params.name, params.arguments or {}, structured
                )
            except UnknownToolError as e:
                raise MCPError(code=types.INVALID_PARAMS, message=str(e)) from None
            except Exception as e:
                # The SDK would answer code 0; JSON-RPC names this -32603.
                log.exception("tools/call %s failed", params.name)
                raise MCPError(code=types.INTERNAL_ERROR, message=str(e)) from e
        return types.CallToolResult.model_validate(result)  # typed: fills the 2026 resultType

    async def no_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def no_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def no_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[])

    server = Server(
        "llmc",
        version=__version__,
        title=SERVER_TITLE,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Empty answers for clients that ask anyway; only tools are advertised.
        on_list_resources=no_resources,
        on_list_resource_templates=no_templates,
        on_list_prompts=no_prompts,
    )
    every_capability = server.get_capabilities

    def tools_only(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
        """Only tools are advertised, over every transport (the empty lists are a courtesy)."""
        return every_capability(*args, **kwargs).model_copy(
            update={"prompts": None, "resources": None}
        )

    server.get_capabilities = tools_only  # type: ignore[method-assign]
    return server


def _init_options(server: Server) -> Any:
    """Initialization options that advertise tools only (the empty lists are a courtesy)."""
    import mcp_types as types

    options = server.create_initialization_options()
    options.capabilities = types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False))
    return options


def _rejection(exc: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a line the transport could not read; None for a blank line."""
    import mcp_types as types
    from pydantic import ValidationError

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    inputs = [e.get("input") for e in errors]
    raw = next((x for x in inputs if isinstance(x, (dict, list))), inputs[0] if inputs else None)
    if errors and errors[0]["type"] == "json_invalid":
        if isinstance(raw, str) and not raw.strip():
            return None
        code, message = types.PARSE_ERROR, f"parse error: {errors[0]['msg']}"
    elif isinstance(raw, list):
        code, message = types.INVALID_REQUEST, "batches are not supported"
    else:
        code, message = types.INVALID_REQUEST, "not a JSON-RPC 2.0 message"
    msg_id = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)):
        msg_id = None
    error = types.ErrorData(code=code, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=msg_id, error=error)


class _Relay:
    """Between the SDK's transport and its server loop (see the module docstring)."""

    def __init__(self, write: Any):
        import anyio

        self.write = write
        self.pending: set[int | str] = set()
        self.drained = anyio.Event()

    def _track(self, message: JSONRPCMessage) -> None:
        import mcp_types as types

        if isinstance(message, types.JSONRPCRequest):
            self.pending.add(message.id)
        elif isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled":  # the SDK answers it with silence
                self.pending.discard((message.params or {}).get("requestId"))  # type: ignore[arg-type]
                self._check_drained()

    def _check_drained(self) -> None:
        if not self.pending:
            self.drained.set()

    async def inbound(self, read: Any, to_server: Any) -> None:
        """Forward messages; answer unreadable lines; at EOF wait for pending answers."""
        import anyio
        from mcp.shared.message import SessionMessage

        async with to_server:
            async for item in read:
                if isinstance(item, Exception):
                    error = _rejection(item)
                    if error is not None:
                        await self.write.send(SessionMessage(error))
                    continue
                self._track(item.message)
                await to_server.send(item)
            while self.pending:
                self.drained = anyio.Event()
                await self.drained.wait()

    async def outbound(self, from_server: Any) -> None:
        """Forward the server's messages, crossing off the requests they answer."""
        import mcp_types as types

        async with from_server:
            async for item in from_server:
                await self.write.send(item)
                message = item.message
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                    self.pending.discard(message.id)  # type: ignore[arg-type]
                    self._check_drained()


async def serve_streams(tools: McpServer, read: Any, write: Any) -> None:
    """Serve ``tools`` on a transport's stream pair until its input ends and all is answered."""
    import anyio

    server = build_server(tools)
    relay = _Relay(write)
    to_server, server_in = anyio.create_memory_object_stream(0)
    server_out, from_server = anyio.create_memory_object_stream(0)
    async with write, anyio.create_task_group() as tg:
        tg.start_soon(relay.inbound, read, to_server)
        tg.start_soon(relay.outbound, from_server)
        await server.run(server_in, server_out, _init_options(server))


class _BorrowedText(io.TextIOWrapper):
    """A UTF-8 text layer whose close leaves the caller's binary stream open."""

    def close(self) -> None:
        if not self.closed:
            self.flush()
        self.detach()


def serve(server: McpServer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve on binary streams (one JSON-RPC message per line) until ``stdin`` ends."""
    import anyio
    from mcp.server.stdio import stdio_server

    text_in = _BorrowedText(stdin, encoding="utf-8", errors="replace")
    text_out = _BorrowedText(stdout, encoding="utf-8", write_through=True)

    async def run() -> None:
        async with stdio_server(anyio.wrap_file(text_in), anyio.wrap_file(text_out)) as streams:
            await serve_streams(server, *streams)

    try:
        anyio.run(run)
    finally:
        text_out.close()
        text_in.close()


def serve_stdio(root: Path, cfg: Config) -> None:
    """`llmc mcp`: serve on this process's stdin/stdout until stdin closes."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = McpServer(root, cfg)

    async def run() -> None:
        async with stdio_server() as streams:
            await serve_streams(server, *streams)

    try:
        anyio.run(run)
    finally:
        server.close()


__all__ = ["TOOLS", "McpServer", "UnknownToolError", "build_server", "serve", "serve_stdio"]
