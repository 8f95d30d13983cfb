"""The daemon's HTTP/1.1 connections: uvicorn's h11 protocol plus what llmc promises on top.

``make_protocol`` returns an ``H11Protocol`` subclass bound to one daemon. Per connection:

- **Only us on the Unix socket.** On Linux the peer's uid (``SO_PEERCRED``) must be the
  daemon's own; any other process is dropped before a byte is read or written. (The
  socket is 0600, so only root could get this far; the client checks the daemon's uid
  the same way.)
- **The token on TCP.** A connection that is not on the Unix socket is served by the
  token-guarded app (``asgi.TokenGuard``): the choice follows the socket, not a header.
- **Bounded connections, in pools that cannot starve each other.** The Unix socket (its
  owner) has ``max_connections`` of its own; nothing on TCP counts against them. A TCP
  connection starts in a small pool of its own (``max_unauthenticated``; when it is full the
  oldest connection there that is not being answered makes room, so a newcomer with the
  token always gets to show it) and joins an
  authenticated pool (``max_connections`` again) once a request on it carries the token
  (``asgi.TokenGuard`` says so through ``scope["llmc.authenticated"]``); a TCP connection
  that never authenticates is closed after its first answer, or at the request deadline
  when it sends nothing. Beyond its pool's bound a connection gets one JSON 503 and is
  closed, before it costs a task.
- **One deadline per request.** h11 has no timeout of its own; from the moment the
  server waits for a request (the connection opened, or the previous answer was sent)
  the whole of it (request line, headers, body) must arrive within ``deadline_s``,
  however it trickles in. Otherwise: a partial request gets a JSON 408, an idle
  connection is closed silently, and the app waiting for the body sees a disconnect.
  Once the request is in, the answer is not bound by it (work has ``request_timeout_s``).
- **Errors as JSON.** A request h11 cannot parse gets a JSON 400 (uvicorn's is text).
- **Half-closed clients are answered.** A client that sends a whole request and then
  shuts down its sending side (``SHUT_WR``) still gets its answer before the close; one
  that shuts down mid-body cannot finish, so its connection closes at once.

Keep-alive is h11's: a body the app did not read is framed (and discarded) by h11, never
parsed as a request; the app also closes such connections (``Connection: close``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import sys
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

REASONS = {400: "Bad Request", 408: "Request Timeout", 503: "Service Unavailable"}


def error_body(status: int, code: str, message: str) -> bytes:
    err = {"error": {"status": status, "code": code, "message": message}}
    return json.dumps(err, ensure_ascii=False).encode("utf-8")


def raw_response(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 error response that closes the connection (written outside h11)."""
    body = error_body(status, code, message)
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\n"
        "Content-Type: application/json; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), else None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class DaemonProtocol(H11Protocol):
    """One connection to the daemon; ``make_protocol`` fills the class attributes."""

    tcp_app: Any = None  # the token-guarded app, for connections that are not Unix sockets
    deadline_s: float = 10.0
    max_connections: int = 32  # per pool: the Unix socket; authenticated TCP
    max_unauthenticated: int = 4  # TCP connections no request has authenticated yet
    pools: dict[str, set] = {}  # pool name -> its connections (one dict per bound class)
    on_status: Any = None  # called with the status of each answer written here, not by the app

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._peer_eof = False
        self._pool = ""
        sock = transport.get_extra_info("socket")
        self.is_unix = sock is not None and sock.family == socket.AF_UNIX
        self.authenticated = self.is_unix
        if not self.is_unix:
            self.app = self._guarded  # fail closed: whatever is not the Unix socket needs the token
        else:
            uid = peer_uid(sock)
            if uid is not None and uid != os.geteuid():
                log.warning("refused a connection from uid %d on the daemon socket", uid)
                transport.abort()
                return
        pool, limit = (
            ("unix", self.max_connections)
            if self.is_unix
            else ("tcp-new", self.max_unauthenticated)
        )
        if len(self.pools.setdefault(pool, set())) >= limit and not (
            pool == "tcp-new" and self._evict_oldest_waiting(pool)
        ):
            what = "connections" if self.is_unix else "unauthenticated TCP connections"
            self._refuse(503, "busy", f"too many {what} (at most {limit}); retry")
            return
        self._opened = asyncio.get_running_loop().time()
        self._join(pool)
        self._sync_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        self._join("")
        super().connection_lost(exc)

    # -- pools --------------------------------------------------------------------------------
    def _join(self, pool: str) -> None:
        if self._pool:
            self.pools[self._pool].discard(self)
        self._pool = pool
        if pool:
            self.pools.setdefault(pool, set()).add(self)

    def _evict_oldest_waiting(self, pool: str) -> bool:
        """Make room in the unauthenticated pool for a new TCP connection: the oldest one
        that is not being answered (idle, or still trickling its request in) gets a 503 and
        is closed. Another local user holding the pool's few slots open would otherwise
        turn away the owner's token-bearing connections before they could show the token;
        this way the newest connection always gets its turn to authenticate."""
        waiting = [
            c for c in self.pools.get(pool, ()) if c.cycle is None or c.cycle.response_complete
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: getattr(c, "_opened", 0.0))
        oldest._refuse(503, "busy", "too many unauthenticated TCP connections; retry")
        oldest._join("")
        return True

    async def _guarded(self, scope: dict, receive: Any, send: Any) -> None:
        """The token-guarded app, told how to report that this connection authenticated."""
        scope["llmc.authenticated"] = self._authenticated
        await self.tcp_app(scope, receive, send)

    def _authenticated(self) -> None:
        """A request on this TCP connection carried the token: into the authenticated pool
        when it has room (else the connection closes after this answer)."""
        if self.authenticated or self._pool != "tcp-new":
            return
        if len(self.pools.setdefault("tcp", set())) < self.max_connections:
            self.authenticated = True
            self._join("tcp")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._sync_deadline()

    def eof_received(self) -> bool | None:
        self._peer_eof = True
        request_in = self.conn.their_state in (h11.DONE, h11.MUST_CLOSE)
        if self.cycle is not None and not self.cycle.response_complete and request_in:
            return True  # keep the transport open: answer, then close (on_response_complete)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the body can never arrive
            self.cycle.message_event.set()
        return None  # asyncio closes the transport

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if (self._peer_eof or not self.authenticated) and not self.transport.is_closing():
            self.transport.close()
        self._sync_deadline()

    def send_400_response(self, msg: str) -> None:
        # Called from uvicorn's ``except h11.RemoteProtocolError``: name what h11 found.
        exc = sys.exc_info()[1]
        detail = f"malformed request: {exc}" if exc is not None else msg
        self._refuse(400, "bad_request", detail)

    # -- the request deadline -------------------------------------------------------------------
    def _sync_deadline(self) -> None:
        """Armed while the server waits for (part of) a request, off once it is in."""
        waiting = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if self.transport is None or self.transport.is_closing() or not waiting:
            self._cancel_deadline()
        elif self._deadline is None:
            self._deadline = self.loop.call_later(self.deadline_s, self._deadline_passed)

    def _cancel_deadline(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
            self._deadline = None

    def _deadline_passed(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state not in (h11.IDLE, h11.SEND_BODY):
            return
        cycle = self.cycle if state is h11.SEND_BODY else None
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app waiting for the body gets http.disconnect
            cycle.message_event.set()
        partial = state is h11.SEND_BODY or bool(self.conn.trailing_data[0])
        if partial and (cycle is None or not cycle.response_started):
            message = f"request not received within {self.deadline_s:g}s"
            self._refuse(408, "timeout", message)
        else:
            self.transport.close()  # an idle connection: nothing was asked, nothing to answer

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._cancel_deadline()
        if not self.transport.is_closing():
            self.transport.write(raw_response(status, code, message))
            self.transport.close()
        if self.on_status is not None and status != 503:
            self.on_status(status)


def make_protocol(
    tcp_app: Any,
    deadline_s: float,
    max_connections: int,
    on_status: Any,
    max_unauthenticated: int = 4,
) -> type[DaemonProtocol]:
    """A ``DaemonProtocol`` class for one daemon (uvicorn instantiates it per connection)."""
    return type(
        "BoundDaemonProtocol",
        (DaemonProtocol,),
        {
            "tcp_app": tcp_app,
            "deadline_s": deadline_s,
            "max_connections": max(1, max_connections),
            "max_unauthenticated": max(1, max_unauthenticated),
            "pools": {},
            "on_status": staticmethod(on_status) if on_status is not None else None,
        },
    )


__all__ = ["DaemonProtocol", "make_protocol", "peer_uid", "raw_response"]
