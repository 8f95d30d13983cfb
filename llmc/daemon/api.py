"""The daemon's endpoints, apart from HTTP: names, parameter checks, results.

The HTTP server (``server.py``) maps ``/v1/<name>`` to these, and ``llmc mcp`` calls the
same functions in-process when no daemon runs. Parameters come from a JSON body or, for
GET, the query string (so strings are accepted where numbers and booleans are expected).
A bad parameter raises ``ApiError`` with a 4xx status; docs/daemon-api.md lists them all.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmc.errors import ApiError, ConfigMismatch, IndexMissingError
from llmc.request_config import RequestConfigError

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 10_000
MAX_PATHS = 100_000
ROUTES = ("auto", "code", "docs", "mixed")


def bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


# -- parameter checks -----------------------------------------------------------------------------
def _str(p: dict, name: str, required: bool = False, max_len: int = 1000) -> str | None:
    value = p.get(name)
    if value is None:
        if required:
            raise bad(f"missing parameter {name!r}")
        return None
    if not isinstance(value, str):
        raise bad(f"{name} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise bad(f"{name} must not be empty")
    if len(value) > max_len:
        raise bad(f"{name} is longer than {max_len} characters")
    return value


def _int(p: dict, name: str, lo: int, hi: int) -> int | None:
    value = p.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise bad(f"{name} must be a whole number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"{name} must be a whole number, got {value!r}")
    if not lo <= value <= hi:
        raise bad(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _float(p: dict, name: str, lo: float, hi: float) -> float | None:
    value = p.get(name)
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        value = float(value)
    except (TypeError, ValueError):
        raise bad(f"{name} must be a number, got {value!r}") from None
    if math.isnan(value) or not lo <= value <= hi:
        raise bad(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _bool(p: dict, name: str) -> bool:
    value = p.get(name, False)
    if isinstance(value, str) and value.lower() in (
        "1",
        "true",
        "yes",
        "on",
        "0",
        "false",
        "no",
        "off",
        "",
    ):
        return value.lower() in ("1", "true", "yes", "on")
    if not isinstance(value, bool):
        raise bad(f"{name} must be true or false, got {value!r}")
    return value


def _choice(p: dict, name: str, choices: tuple[str, ...]) -> str | None:
    value = _str(p, name)
    if value is not None and value not in choices:
        raise bad(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _paths(p: dict, name: str) -> list[str] | None:
    value = p.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad(f"{name} must be a list of repository-relative paths")
    if len(value) > MAX_PATHS:
        raise bad(f"{name} has more than {MAX_PATHS} entries; omit it to reindex everything")
    for v in value:
        if v.startswith("/") or ".." in v.split("/"):
            raise bad(f"{name}: {v!r} is not a path inside the repository")
    return value


def _config(p: dict) -> dict[str, Any] | None:
    value = p.get("config")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad("config must be an object of section.key → value")
    return value


def check_known(p: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(p) - set(allowed))
    if unknown:
        raise bad(f"unknown parameter(s): {', '.join(unknown)} (known: {', '.join(allowed)})")


# -- endpoints --------------------------------------------------------------------------------------
@dataclass
class Context:
    """What an endpoint may use: the engine and, in a daemon, how to stop it."""

    engine: Any
    request_shutdown: Callable[[], None] | None = None
    extra: Callable[[], dict[str, Any]] | None = None  # the daemon's own part of `status`


def health(ctx: Context, p: dict) -> dict:
    from llmc import __version__

    check_known(p, ())
    import os

    return {
        "ok": True,
        "pid": os.getpid(),
        "version": __version__,
        "root": str(ctx.engine.root),
        "ready": ctx.engine.ready.is_set(),
    }


def status(ctx: Context, p: dict) -> dict:
    check_known(p, ())
    out = ctx.engine.status()
    if ctx.extra is not None:
        out.update(ctx.extra())
    return out


GROUPS = ("span", "file")


def search(ctx: Context, p: dict) -> dict:
    check_known(
        p,
        ("query", "q", "k", "route", "explain", "config", "extras", "workspace", "group",
         "team", "repos"),
    )  # fmt: skip
    if "q" in p and "query" not in p:
        p = {**p, "query": p["q"]}
    query = _str(p, "query", required=True, max_len=MAX_QUERY_CHARS)
    route = _choice(p, "route", ROUTES)
    by_file = _choice(p, "group", GROUPS) == "file"
    workspace = _str(p, "workspace", max_len=64)
    repos = _names(p, "repos")
    if _bool(p, "team") or repos is not None:
        if workspace is not None:
            raise bad("team and workspace do not go together: search one or the other")
        return _search_team(ctx, p, query, route, repos or [], by_file)
    if workspace is not None:
        if by_file:
            raise bad("group 'file' is not available with workspace")
        return _search_workspace(ctx, p, workspace, query, route)
    k = _int(p, "k", 1, 1000)
    try:  # one answer path (llmc/search/answer.py); `group: file` as `llmc search --files`
        return ctx.engine.search(
            query, k=k, route=route, explain=_bool(p, "explain"), config=_config(p),
            extras=_bool(p, "extras"), group="file" if by_file else "span",
        )  # fmt: skip
    except IndexMissingError as e:
        raise ApiError(503, "index_missing", str(e)) from e
    except ConfigMismatch as e:  # version skew: the client falls back to in-process work
        raise ApiError(409, "config_mismatch", str(e)) from e
    except RequestConfigError as e:  # a daemon setting, or a value out of bounds
        raise ApiError(400, "config_refused" if e.refused else "bad_request", str(e)) from e


def _names(p: dict, name: str) -> list[str] | None:
    value = p.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise bad(f"{name} must be a list of repository names")
    if len(value) > 64 or any(len(v) > 200 for v in value):
        raise bad(f"{name}: at most 64 names of at most 200 characters")
    return value


def _search_team(
    ctx: Context, p: dict, query: str, route: str | None, repos: list[str], by_file: bool
) -> dict:
    """The team store named in this daemon's user config (never in the request: a client
    cannot point the daemon at a server), searched by the one pipeline (llmc/team/search.py)."""
    from llmc.errors import TeamError
    from llmc.team.search import shared_team_search

    if p.get("config") is not None:
        raise bad("config is not available with team: team searches run the user's config")
    try:
        team = shared_team_search(ctx.engine.cfg)
        return team.answer(
            query, repos, k=_int(p, "k", 1, 1000), route=route, explain=_bool(p, "explain"),
            group="file" if by_file else "span",
        )  # fmt: skip
    except TeamError as e:
        raise ApiError(503, "team_unavailable", str(e)) from e


def _search_workspace(ctx: Context, p: dict, name: str, query: str, route: str | None) -> dict:
    """Every member of the user's workspace ``name``, one ranking (llmc/workspace.py): this
    engine answers for its own repository, the others' daemons or this process for theirs."""
    from llmc import workspace
    from llmc.daemon.client import try_daemon
    from llmc.errors import LlmcError

    own = ctx.engine.root.resolve()
    config = _config(p)
    # A client of this repository's daemon searches the workspaces it belongs to, not every
    # workspace of the user's, nor learns which exist: one 404, word for word, for both.
    unknown = ApiError(404, "workspace_unknown", f"no workspace {name!r} holds this repository")
    try:
        found = workspace.members(name)
    except workspace.UnknownWorkspace as e:
        raise unknown from e
    except LlmcError as e:  # the user's workspaces.toml is unreadable: not the client's to see
        log.warning("%s", e)
        raise ApiError(503, "workspace_unavailable", "the workspaces cannot be read") from e
    if own not in {m.root.resolve() for m in found}:
        raise unknown

    def ask(member: workspace.Member, params: dict) -> dict:
        if member.root.resolve() == own:
            try:
                return ctx.engine.search(query, k=params["k"], route=route, config=config)
            except (ConfigMismatch, RequestConfigError) as e:
                raise LlmcError(str(e)) from e
        return workspace.shared_searchers(daemon=try_daemon).ask(member, params)

    try:
        answer = workspace.search(name, query, ask, k=_int(p, "k", 1, 1000), route=route)
        return workspace.without_roots(answer, found)
    except workspace.UnknownWorkspace as e:  # removed since: the same 404
        raise unknown from e
    except LlmcError as e:  # no member could answer
        raise ApiError(503, "workspace_unavailable", workspace.hide_roots(str(e), found)) from e


def reindex(ctx: Context, p: dict) -> dict:
    check_known(p, ("paths", "wait", "timeout_s", "reason"))
    paths = _paths(p, "paths")
    reason = _str(p, "reason", max_len=100) or "api"
    wait = _bool(p, "wait")
    timeout = _float(p, "timeout_s", 0.0, 3600.0)
    return ctx.engine.reindex(reason, paths, wait=(timeout or 600.0) if wait else None)


def _graph_errors(fn: Callable[[], dict]) -> dict:
    from llmc.errors import SymbolNotFoundError

    try:
        return fn()
    except SymbolNotFoundError as e:
        raise ApiError(422, "symbol_not_found", str(e)) from e
    except IndexMissingError as e:
        raise ApiError(503, "graph_missing", str(e)) from e


def where_used(ctx: Context, p: dict) -> dict:
    check_known(p, ("symbol", "min_confidence", "text"))
    symbol = _str(p, "symbol", required=True, max_len=1000)
    conf = _float(p, "min_confidence", 0.0, 1.0)
    text = _bool(p, "text")
    return _graph_errors(lambda: ctx.engine.where_used(symbol, 0.5 if conf is None else conf, text))


def deps(ctx: Context, p: dict) -> dict:
    check_known(p, ("target", "depth", "text"))
    target = _str(p, "target", required=True, max_len=1000)
    depth = _int(p, "depth", 1, 10)
    text = _bool(p, "text")
    return _graph_errors(lambda: ctx.engine.deps(target, depth, text))


EDGE_TYPES = ("defines", "calls", "imports", "inherits", "tests", "mentions")


def neighbors(ctx: Context, p: dict) -> dict:
    check_known(p, ("target", "type", "direction", "text"))
    target = _str(p, "target", required=True, max_len=1000)
    types = p.get("type")
    if isinstance(types, str):
        types = [t for t in types.split(",") if t]
    if types is not None and (
        not isinstance(types, list) or not all(t in EDGE_TYPES for t in types)
    ):
        raise bad(f"type must be a list of {', '.join(EDGE_TYPES)}")
    direction = _choice(p, "direction", ("out", "in", "both")) or "both"
    text = _bool(p, "text")
    return _graph_errors(lambda: ctx.engine.neighbors(target, types or None, direction, text))


def graph_stats(ctx: Context, p: dict) -> dict:
    check_known(p, ("top", "text"))
    top = _int(p, "top", 0, 1000)
    text = _bool(p, "text")
    return _graph_errors(lambda: ctx.engine.graph_stats(10 if top is None else top, text))


def feedback(ctx: Context, p: dict) -> dict:
    """Thumbs up/down (or a 0-3 grade) on one result, into .llmc/judgments.jsonl (llmc/learn)."""
    check_known(p, ("query", "path", "start_line", "end_line", "vote", "grade", "client", "symbol"))
    from llmc.feedback import record_feedback

    path = _paths(p, "path")
    if not path or len(path) != 1:
        raise bad("path must be one repository-relative path")
    start, end = _int(p, "start_line", 1, 10**9), _int(p, "end_line", 1, 10**9)
    if start is None or end is None or end < start:
        raise bad("start_line and end_line are required, 1 <= start_line <= end_line")
    return record_feedback(
        ctx.engine.root,
        query=_str(p, "query", required=True, max_len=MAX_QUERY_CHARS),
        path=path[0],
        start_line=start,
        end_line=end,
        vote=_choice(p, "vote", ("up", "down")),
        grade=_int(p, "grade", 0, 3),
        client=_str(p, "client", max_len=100) or "",
        symbol=_str(p, "symbol", max_len=1000) or "",
    )


def shutdown(ctx: Context, p: dict) -> dict:
    check_known(p, ())
    if ctx.request_shutdown is None:
        raise ApiError(404, "not_found", "shutdown is not available here")
    ctx.request_shutdown()
    return {"ok": True, "stopping": True}


@dataclass(frozen=True)
class Endpoint:
    name: str
    methods: tuple[str, ...]
    fn: Callable[[Context, dict], dict]
    status: int = 200


ENDPOINTS: dict[str, Endpoint] = {
    e.name: e
    for e in (
        Endpoint("health", ("GET",), health),
        Endpoint("status", ("GET",), status),
        Endpoint("search", ("GET", "POST"), search),
        Endpoint("reindex", ("POST",), reindex, status=202),
        Endpoint("graph/where-used", ("GET", "POST"), where_used),
        Endpoint("graph/deps", ("GET", "POST"), deps),
        Endpoint("graph/neighbors", ("GET", "POST"), neighbors),
        Endpoint("graph/stats", ("GET", "POST"), graph_stats),
        Endpoint("feedback", ("POST",), feedback),
        Endpoint("shutdown", ("POST",), shutdown, status=202),
    )
}


def call(ctx: Context, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run endpoint ``name`` in-process (what ``llmc mcp`` does when no daemon runs)."""
    endpoint = ENDPOINTS.get(name)
    if endpoint is None:
        raise ApiError(404, "not_found", f"no endpoint {name!r}")
    return endpoint.fn(ctx, dict(params))


__all__ = ["ENDPOINTS", "ApiError", "Context", "Endpoint", "call"]
