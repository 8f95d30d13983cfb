"""The MCP server core: the tools (``TOOLS``), the calls behind them (``McpServer``) and the
SDK ``Server`` that serves them (``build_server``). The daemon serves it over streamable
HTTP at ``/mcp`` (``asgi.py``); `llmc mcp` over stdio (``llmc.mcp``, which re-exports these
names). The SDK (pydantic, anyio, starlette) is imported only when a server is built.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.config import Config
from llmc.errors import LlmcError

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

log = logging.getLogger("llmc.mcp")

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
            "snippet) for a natural-language or identifier query; with group `file`, "
            "ranked files, each with its best spans."
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
                "group": {
                    "type": "string",
                    "enum": ["span", "file"],
                    "description": (
                        "`file`: k files ranked by their spans' evidence, each with its "
                        "best spans (which files does this issue touch?); default `span`."
                    ),
                },
                "workspace": {
                    "type": "string",
                    "maxLength": 64,
                    "description": (
                        "Search every repository of this workspace (`llmc workspace list`; "
                        "only one that holds this repository) in one ranking; each result "
                        "names its repo."
                    ),
                },
                "team": {
                    "type": "boolean",
                    "description": (
                        "Search the team store in the user's config (`llmc team list`) "
                        "instead of this repository; each result names its repo and commit."
                    ),
                },
                "repos": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 200},
                    "maxItems": 64,
                    "description": "With team: only these published repositories.",
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
# Their text content is the `llmc graph` answer lines (where_used once sent 18.7 KB of raw
# JSON as text); the JSON is the structuredContent.
GRAPH_TOOLS = ("where_used", "deps")
TOOL_ENDPOINTS = {
    "search": "search",
    "where_used": "graph/where-used",
    "deps": "graph/deps",
    "status": "status",
}


_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
}


@functools.cache
def _validators() -> dict[str, Any]:
    from jsonschema import Draft202012Validator

    return {t["name"]: Draft202012Validator(t["inputSchema"]) for t in TOOLS}


def _schema_error(err: Any) -> str:
    """One line for a ``jsonschema`` error, naming the argument."""
    name = ".".join(str(p) for p in err.absolute_path) or "arguments"
    rule, value, given = err.validator, err.validator_value, err.instance
    if rule == "type":
        return f"{name} must be {_TYPE_NAMES.get(value, value)}, got {given!r}"
    if rule == "enum":
        return f"{name} must be one of {', '.join(map(str, value))}, got {given!r}"
    if rule in ("minimum", "maximum"):
        side = "at least" if rule == "minimum" else "at most"
        return f"{name} must be {side} {value}, got {given!r}"
    if rule == "additionalProperties":
        known = ", ".join(sorted(err.schema.get("properties", {}))) or "none"
        extra = sorted(set(given) - set(err.schema.get("properties", {})))
        return f"unknown argument(s): {', '.join(extra)} (this tool takes: {known})"
    return f"{name}: {err.message}"


def check_arguments(name: str, arguments: Any) -> str | None:
    """What is wrong with ``arguments`` for tool ``name`` against its advertised
    ``inputSchema`` (the first problem, one line), or None when they conform."""
    validator = _validators()[name]
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    return _schema_error(errors[0]) if errors else None


class UnknownToolError(LookupError):
    """A tools/call for a tool this server does not have (a protocol error, not a tool error)."""


def _render_files(out: dict[str, Any]) -> str:
    lines = [f"{len(out.get('files', []))} files for {out.get('query', '')!r}"]
    for i, f in enumerate(out.get("files", []), 1):
        lines.append(f"\n{i}. {f['path']} (score {f.get('score', 0):.3f})")
        for s in f.get("spans", []):
            what = " ".join(x for x in (s.get("kind"), s.get("symbol")) if x)
            lines.append(f"   {f['path']}:{s['start_line']}-{s['end_line']} {what}".rstrip())
    for w in out.get("warnings", []):
        lines.append(f"\nwarning: {w}")
    return "\n".join(lines)


def _render_search(out: dict[str, Any]) -> str:
    if out.get("group") == "file":
        return _render_files(out)
    lines = [f"{len(out.get('results', []))} results for {out.get('query', '')!r}"]
    for i, r in enumerate(out.get("results", []), 1):
        where = f"{r['path']}:{r['start_line']}-{r['end_line']}"
        if r.get("repo"):  # a workspace or team search: the repository's name first
            at = f"@{r['commit'][:12]}" if r.get("commit") else ""
            where = f"{r['repo']}{at}: {where}"
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
                refused = e.code == "config_refused"  # our config is not the daemon's
                if e.status < 500 and e.status not in (404, 405) and not refused:
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
        # Exactly what tools/list advertises: nothing beyond the schema reaches an endpoint
        # (a request-wide `config`, `explain`, k past its maximum...).
        problem = check_arguments(name, arguments)
        if problem is not None:
            return {"content": [{"type": "text", "text": f"error: {problem}"}], "isError": True}
        lines = structured and name in GRAPH_TOOLS  # the graph's own answer lines as the text
        try:
            out, from_daemon = self._endpoint(
                endpoint, {**arguments, **({"text": True} if lines else {})}
            )
        except LlmcError as e:
            return {"content": [{"type": "text", "text": f"error: {e}"}], "isError": True}
        if name == "status" and from_daemon:
            out = {"daemon": True, **out}
        if lines:
            out = dict(out)
            text = "\n".join(
                [str(out.pop("text", "")), *(f"warning: {w}" for w in out.get("warnings", []))]
            )
        else:
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


__all__ = [
    "INSTRUCTIONS",
    "SERVER_TITLE",
    "STRUCTURED_SINCE",
    "TOOLS",
    "TOOL_ENDPOINTS",
    "McpServer",
    "check_arguments",
    "UnknownToolError",
    "build_server",
]
