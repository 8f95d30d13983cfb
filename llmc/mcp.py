"""`llmc mcp`: a Model Context Protocol server over stdio for coding agents; the same tools
are served over streamable HTTP by the daemon itself, at ``/mcp`` (``llmc.daemon.asgi``).

Tools: ``search``, ``where_used``, ``deps``, ``status``. Over stdio each call goes to the
repository's daemon when one answers (warm models, fresh index; not with
``LLMC_NO_DAEMON=1``) and otherwise runs in this process through the same endpoint
functions (``llmc.daemon.api``), loading models on first use. In the daemon the calls run
on its own endpoint runner (``McpServer(serve=...)``).

The protocol is the official ``mcp`` SDK's (its low-level ``Server`` and stdio transport:
handshake, version negotiation, ``ping``, errors for unknown methods and bad params). The
tools and the SDK ``Server`` are ``llmc.daemon.mcp_server``'s (re-exported here); this
module adds the stdio entry point and a thin relay between transport and server for two
things the SDK leaves out: a line that is not a JSON-RPC message gets a JSON-RPC error (id null) rather
than silence, and at end of input every request already read is answered before the server
stops (the SDK would cancel them), so a script can pipe requests in and read all answers.
While serving, file descriptor 1 carries protocol messages only; the SDK points it at
stderr for everything else (a library, a warning, C code) and restores it afterwards.
The SDK (pydantic, anyio, starlette) is imported only when ``llmc mcp`` runs.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from llmc.config import Config
from llmc.daemon.mcp_server import (  # noqa: F401 - re-exported: the names lived here
    INSTRUCTIONS,
    SERVER_TITLE,
    STRUCTURED_SINCE,
    TOOL_ENDPOINTS,
    TOOLS,
    McpServer,
    UnknownToolError,
    build_server,
)

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp_types import JSONRPCError, JSONRPCMessage

log = logging.getLogger(__name__)


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
