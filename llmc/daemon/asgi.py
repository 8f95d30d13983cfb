"""The daemon's ASGI application: ``/v1/<endpoint>`` (REST, ``api.py``) and ``/mcp`` (MCP).

``build_app`` returns ``(app, tcp_app)``: the Starlette app for the Unix socket, and the
same app behind ``TokenGuard`` for the TCP port. Both are wrapped so that every answer is
counted and an HTTP version other than 1.0/1.1 gets 505.

REST: parameters from the query string and, for a body, a JSON object (body values win).
A body over ``daemon.max_request_bytes`` gets 413 unread, a chunked one 411; an answer
given without reading the body closes the connection (the bytes are never taken for a
request). Work runs on the ``App``'s thread pool, bounded by ``daemon.request_timeout_s``
(504). Errors are ``{"error": {status, code, message}}`` (docs/daemon-api.md).

MCP: the official SDK's ``StreamableHTTPSessionManager``, stateless, answering JSON (no
session state in the daemon; every POST is answered on its own), serving ``mcp_server``'s
tools through the same endpoint functions, in this process. Its optional ``GET`` event
stream is bounded in number and lifetime (``EventStreams``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from llmc.daemon import api
from llmc.errors import ApiError, LlmcError

log = logging.getLogger(__name__)

API_PREFIX = "/v1/"
MCP_PATH = "/mcp"
JSON_TYPE = "application/json; charset=utf-8"
METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


def json_response(status: int, body: dict, headers: dict[str, str] | None = None) -> Response:
    data = json.dumps(body, ensure_ascii=False, default=str).encode("utf-8")
    return Response(
        data,
        status_code=status,
        media_type=JSON_TYPE,
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def request_path(request: Request) -> str:
    """The request's path as sent: never from a URL rebuilt with its ``Host`` header (over the
    Unix socket a missing Host, or one holding ``/?#@``, would change the path read back)."""
    return request.scope.get("path", "")


def _has_body(headers: Any) -> bool:
    length = headers.get("content-length", "0").strip()
    return length not in ("", "0") or "chunked" in headers.get("transfer-encoding", "").lower()


def error_response(err: ApiError, request_headers: Any, unread: bool | None = None) -> Response:
    """``err`` as JSON; closes the connection when the request's body was left unread."""
    headers: dict[str, str] = {}
    if err.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if err.status == 405:
        headers["Allow"] = getattr(err, "allow", "GET, POST")
    if _has_body(request_headers) if unread is None else unread:
        headers["Connection"] = "close"
    return json_response(err.status, err.to_json(), headers)


# -- REST -------------------------------------------------------------------------------------
class Rest:
    """``/v1/<name>``: parse, run the endpoint on the pool, answer JSON."""

    def __init__(self, app: Any):
        self.app = app  # server.App: cfg, run_async

    async def handle(self, request: Request) -> Response:
        consumed = False
        try:
            endpoint = self._endpoint(request)
            params = self._query(request)
            raw = await self._read(request)
            consumed = True
            if raw is not None:
                params.update(self._json(raw))
            result = await self.app.run_async(endpoint, params)
            status = 200 if result.get("done") else endpoint.status
            return json_response(status, result)
        except ClientDisconnect:  # the client left (or missed the deadline): nobody to answer
            return json_response(400, ApiError(400, "bad_request", "client went away").to_json())
        except ApiError as e:
            return error_response(e, request.headers, unread=False if consumed else None)
        except LlmcError as e:
            return json_response(422, ApiError(422, "failed", str(e)).to_json())
        except Exception as e:  # noqa: BLE001 - one bad request never stops the server
            log.exception("internal error on %s %r", request.method, request_path(request))
            err = ApiError(500, "internal", f"internal error: {type(e).__name__}")
            return error_response(err, request.headers, unread=False if consumed else None)

    @staticmethod
    def _endpoint(request: Request) -> api.Endpoint:
        path = request_path(request)
        name = path[len(API_PREFIX) :].strip("/")
        endpoint = api.ENDPOINTS.get(name)
        if endpoint is None:
            raise ApiError(404, "not_found", f"no endpoint {path!r}")
        method = request.method
        if method not in endpoint.methods and not (method == "HEAD" and "GET" in endpoint.methods):
            err = ApiError(405, "method_not_allowed", f"{path} takes {'/'.join(endpoint.methods)}")
            err.allow = ", ".join(endpoint.methods)  # type: ignore[attr-defined]
            raise err
        return endpoint

    @staticmethod
    def _query(request: Request) -> dict[str, Any]:
        query = request.scope.get("query_string", b"").decode("latin-1")
        parsed = urllib.parse.parse_qs(query, keep_blank_values=True)
        return {key: values[-1] for key, values in parsed.items()}

    async def _read(self, request: Request) -> bytes | None:
        """The body's bytes (b"" for a POST without one; None for a GET without one).

        Refused unread: a chunked body (411) and one over the limit (413)."""
        headers = request.headers
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise ApiError(411, "length_required", "chunked bodies are not accepted")
        length_text = headers.get("content-length")
        if length_text is None:
            return b"" if request.method == "POST" else None
        length = int(length_text)  # h11 lets only digits through
        limit = self.app.cfg.daemon.max_request_bytes
        if length > limit:
            raise ApiError(
                413, "too_large", f"request body of {length} bytes is over the {limit}-byte limit"
            )
        return await request.body() if length else b""

    @staticmethod
    def _json(raw: bytes) -> dict[str, Any]:
        if not raw:
            return {}
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "bad_json", f"body is not valid JSON: {e}") from None
        except RecursionError:
            raise ApiError(400, "bad_json", "body is nested too deeply") from None
        if not isinstance(body, dict):
            raise ApiError(400, "bad_json", "body must be a JSON object")
        return body


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (no route) in our JSON shape."""
    status = getattr(exc, "status_code", 500)
    if status == 404:
        path = request_path(request)
        err = ApiError(404, "not_found", f"no endpoint {path!r} (try {API_PREFIX}health)")
    else:
        err = ApiError(status, "bad_request", str(getattr(exc, "detail", exc)))
    return error_response(err, request.headers)


# -- wrappers ---------------------------------------------------------------------------------
class TokenGuard:
    """For TCP: no browser requests (any ``Origin``, even empty: 403), a bearer token (401),
    a ``Host`` that is this port on the loopback (DNS rebinding: 403), then ``app``.

    A refusal closes the connection; an accepted token tells the connection
    (``scope["llmc.authenticated"]``, set by ``protocol.DaemonProtocol``), which moves it
    out of the small pool of unauthenticated TCP connections."""

    def __init__(self, app: Any, token: Callable[[], str]):
        self.app = app
        self.token = token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            from starlette.datastructures import Headers

            headers = Headers(scope=scope)
            err = None
            port = (scope.get("server") or ("", 0))[1]
            hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
            auth = headers.get("authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            expected = self.token()
            if "origin" in headers:
                err = ApiError(403, "forbidden", "browser requests are not accepted")
            elif not (
                expected and given and hmac.compare_digest(given.encode(), expected.encode())
            ):
                err = ApiError(401, "unauthorized", "missing or wrong bearer token")
            elif headers.get("host", "").lower() not in hosts:
                err = ApiError(
                    403, "forbidden", f"Host must be 127.0.0.1:{port} or localhost:{port}"
                )
            if err is not None:
                await error_response(err, headers, unread=True)(scope, receive, send)
                return
            authenticated = scope.get("llmc.authenticated")
            if authenticated is not None:
                authenticated()
        await self.app(scope, receive, send)


class Outer:
    """Count every answer's status; 505 for an HTTP version we do not speak."""

    def __init__(self, app: Any, count: Callable[[int], None]):
        self.app = app
        self.count = count

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("http_version") not in ("1.0", "1.1"):
            err = ApiError(505, "bad_version", f"HTTP/{scope.get('http_version')} is not spoken")
            response = json_response(505, err.to_json(), {"Connection": "close"})
            self.count(505)
            await response(scope, receive, send)
            return
        status = 0

        async def counted(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            if status:
                self.count(status)


class EventStreams:
    """``GET /mcp`` (the optional server-to-client SSE stream): at most ``limit`` open at once,
    each ended after ``lifetime_s``; one more gets 503 (other requests are not affected, and
    every tool works over POST alone)."""

    def __init__(self, app: Any, limit: int, lifetime_s: float):
        self.app = app
        self.limit = limit
        self.lifetime_s = lifetime_s
        self.open = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        if self.open >= self.limit:
            message = f"too many MCP event streams (at most {self.limit}); tools work over POST"
            err = ApiError(503, "busy", message)
            response = json_response(503, err.to_json(), {"Retry-After": "5"})
            await response(scope, receive, send)
            return
        import anyio

        started = ended = False

        async def tracked(message: dict) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                ended = True
            await send(message)

        self.open += 1
        try:
            with anyio.move_on_after(self.lifetime_s):
                await self.app(scope, receive, tracked)
            if started and not ended:  # the lifetime is over: end the stream cleanly
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.open -= 1


# -- the app ----------------------------------------------------------------------------------
def _mcp(app: Any) -> tuple[Any, Any]:
    """(the ASGI endpoint for /mcp, its session manager) over the daemon's own endpoints."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )

    from llmc.daemon.mcp_server import McpServer, build_server

    tools = McpServer(app.engine.root, app.cfg, use_daemon=False, serve=app.run)
    manager = StreamableHTTPSessionManager(
        build_server(tools, serial=False),
        stateless=True,
        json_response=True,
        max_request_body_size=app.cfg.daemon.max_request_bytes,
    )
    return StreamableHTTPASGIApp(manager), manager


def build_app(
    app: Any,
    token: Callable[[], str],
    max_event_streams: int = 4,
    event_stream_lifetime_s: float = 60.0,
) -> tuple[Any, Any]:
    """(the app for the Unix socket, the app for TCP) over ``app`` (a ``server.App``)."""
    mcp_endpoint, manager = _mcp(app)
    mcp_endpoint = EventStreams(mcp_endpoint, max_event_streams, event_stream_lifetime_s)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    starlette = Starlette(
        routes=[
            Route(MCP_PATH, endpoint=mcp_endpoint),
            Route(API_PREFIX + "{name:path}", endpoint=Rest(app).handle, methods=METHODS),
        ],
        exception_handlers={HTTPException: _http_error},
        lifespan=lifespan,
    )
    starlette.router.redirect_slashes = False
    return Outer(starlette, app.count), Outer(TokenGuard(starlette, token), app.count)


__all__ = ["API_PREFIX", "MCP_PATH", "EventStreams", "Outer", "Rest", "TokenGuard", "build_app"]
