"""The daemon process: HTTP + JSON on a Unix socket (and optionally 127.0.0.1 with a token).

``run_daemon`` is `llmc daemon run`: take the single-instance lock, clean what a killed
predecessor left, bind ``.llmc/daemon.sock`` (mode 0600), serve ``/v1/<endpoint>`` (see
``api.py``) from a thread per connection, warm the models, catch up on changes, watch the
tree, and on SIGTERM/SIGINT stop in order and remove its files.

Every request is bounded: a body over ``daemon.max_request_bytes`` gets 413 unread, a
client slower than ``READ_TIMEOUT_S`` gets 408, work slower than
``daemon.request_timeout_s`` gets 504, connections beyond ``daemon.max_connections`` get
503. Malformed requests get 400, unknown paths 404, a missing or wrong token on TCP 401,
browser requests on TCP (an ``Origin`` header) 403. None of these stops the server.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hmac
import http.server
import json
import logging
import os
import secrets
import signal
import socket
import socketserver
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.daemon import api
from llmc.daemon.pidfile import (
    DaemonLock,
    info_path,
    pid_path,
    prepare_socket_dir,
    read_pid,
    remove_runtime_files,
    socket_path,
    token_path,
    write_private,
)
from llmc.errors import AlreadyRunning, ApiError, LlmcError
from llmc.paths import ensure_state_dir

log = logging.getLogger(__name__)

API_PREFIX = "/v1/"
READ_TIMEOUT_S = 10.0  # a client must send its request (and keep-alive requests) this fast
REQUEST_DEADLINE_S = 10.0  # ... and all of it (line, headers, body) within this, however sent
WORKERS = 8
SOCKET_CHECK_S = 5.0


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")


class DeadlineReader:
    """The connection's reader with one deadline for a whole request.

    A socket timeout bounds each read, not the request: a client that sends a byte every
    few seconds would hold its connection (and a worker thread) for ever. Every read here
    waits at most until the request's deadline, and lines are read a buffer at a time, so
    the deadline holds however the bytes trickle in. ``stop()`` once the request is read:
    writing the answer is not bounded by it.
    """

    def __init__(self, raw: Any, sock: socket.socket):
        self._raw = raw
        self._sock = sock
        self._deadline: float | None = None

    def start(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    def stop(self) -> None:
        self._deadline = None
        self._sock.settimeout(READ_TIMEOUT_S)

    def _arm(self) -> None:
        if self._deadline is None:
            return
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received in time")
        self._sock.settimeout(min(left, READ_TIMEOUT_S))

    def readline(self, limit: int = -1) -> bytes:
        out = bytearray()
        while limit < 0 or len(out) < limit:
            self._arm()
            buffered = self._raw.peek(1)  # at most one receive when the buffer is empty
            if not buffered:
                break
            want = len(buffered) if limit < 0 else min(len(buffered), limit - len(out))
            newline = buffered.find(b"\n", 0, want)
            out += self._raw.read(newline + 1 if newline >= 0 else want)
            if newline >= 0:
                break
        return bytes(out)

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            raise ValueError("DeadlineReader.read needs a size")
        out = bytearray()
        while len(out) < size:
            self._arm()
            chunk = self._raw.read1(size - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._raw.close()


class Handler(http.server.BaseHTTPRequestHandler):
    """One connection; ``self.server.app`` is the shared ``App``."""

    server_version = "llmc-daemon"
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT_S

    # Unix sockets have no peer address; keep logging quiet and in our logger.
    def address_string(self) -> str:
        addr = self.client_address
        return addr[0] if isinstance(addr, tuple) and addr else "unix"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        log.debug('"%s" %s', self.requestline, code)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None):
        """Errors the stdlib raises itself (bad request line, headers too long...) as JSON."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # garbage still gets a status line and headers
        self._reply(code, ApiError(code, "bad_request", message or "bad request").to_json())

    def setup(self) -> None:
        super().setup()
        self.rfile = DeadlineReader(self.rfile, self.connection)

    def handle_one_request(self) -> None:
        self.rfile.start(REQUEST_DEADLINE_S)
        try:
            super().handle_one_request()
        except TimeoutError:
            self.close_connection = True
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")

    # -- the request ------------------------------------------------------------------------
    def _reply(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        self.rfile.stop()
        data = _json_bytes(body)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        except (ConnectionError, BrokenPipeError, TimeoutError):
            self.close_connection = True
        self.server.app.count(status)

    def _dispatch(self, method: str) -> None:
        app: App = self.server.app
        self._consumed = False
        try:
            name, params = self._parse(method, app)
            endpoint = api.ENDPOINTS[name]
            result = app.run(endpoint, params)
            status = 200 if result.get("done") else endpoint.status
            self._reply(status, result)
        except ApiError as e:
            if not self._consumed and self.headers.get("Content-Length", "0").strip() != "0":
                self.close_connection = True  # an unread body must not be taken for a request
            headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
            if e.status == 405:
                headers = {"Allow": getattr(e, "allow", "GET, POST")}
            self._reply(e.status, e.to_json(), headers)
        except LlmcError as e:
            self._reply(422, ApiError(422, "failed", str(e)).to_json())
        except Exception as e:  # noqa: BLE001 - one bad request never stops the server
            log.exception("internal error on %s %s", method, self.path)
            self._reply(
                500, ApiError(500, "internal", f"internal error: {type(e).__name__}").to_json()
            )

    def _parse(self, method: str, app: App) -> tuple[str, dict]:
        if self.server.needs_token:
            if self.headers.get("Origin"):
                raise ApiError(403, "forbidden", "browser requests are not accepted")
            auth = self.headers.get("Authorization", "")
            given = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
            if not given or not hmac.compare_digest(given.encode(), app.token.encode()):
                raise ApiError(401, "unauthorized", "missing or wrong bearer token")
        url = urllib.parse.urlsplit(self.path)
        if not url.path.startswith(API_PREFIX):
            raise ApiError(404, "not_found", f"no endpoint {url.path!r} (try /v1/health)")
        name = url.path[len(API_PREFIX) :].strip("/")
        endpoint = api.ENDPOINTS.get(name)
        if endpoint is None:
            raise ApiError(404, "not_found", f"no endpoint {url.path!r}")
        if method not in endpoint.methods and not (method == "HEAD" and "GET" in endpoint.methods):
            err = ApiError(
                405, "method_not_allowed", f"{url.path} takes {'/'.join(endpoint.methods)}"
            )
            err.allow = ", ".join(endpoint.methods)  # type: ignore[attr-defined]
            raise err
        params: dict[str, Any] = {}
        for key, values in urllib.parse.parse_qs(url.query, keep_blank_values=True).items():
            params[key] = values[-1]
        body = self._body(method, app)
        self.rfile.stop()  # the request is in: answering it is not bound by its deadline
        if body is not None:
            params.update(body)
        return name, params

    def _body(self, method: str, app: App) -> dict | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise ApiError(411, "length_required", "chunked bodies are not accepted")
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            if method == "POST":
                return {}
            return None
        try:
            length = int(length_text)
            if length < 0:
                raise ValueError
        except ValueError:
            self.close_connection = True
            raise ApiError(400, "bad_request", "bad Content-Length") from None
        if length > app.cfg.daemon.max_request_bytes:
            raise ApiError(
                413,
                "too_large",
                f"request body of {length} bytes is over the "
                f"{app.cfg.daemon.max_request_bytes}-byte limit",
            )
        if length == 0:
            return {}
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            raise ApiError(408, "timeout", "request body not received in time") from None
        self._consumed = True
        if len(raw) < length:
            self.close_connection = True
            raise ApiError(400, "bad_request", "request body shorter than Content-Length")
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "bad_json", f"body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "bad_json", "body must be a JSON object")
        return body


class _Limited:
    """Refuse connections beyond ``max_connections`` with 503 instead of piling up threads."""

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        if not self.app.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                data = _json_bytes(ApiError(503, "busy", "too many connections; retry").to_json())
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                    + data
                )
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)  # type: ignore[misc]

    def process_request_thread(self, request, client_address):  # type: ignore[no-untyped-def]
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            self.app.slots.release()


class UnixServer(_Limited, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 128
    needs_token = False

    def __init__(self, path: Path, app: App):
        self.app = app
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        old = os.umask(0o177)  # the socket is born 0600: no window where others can connect
        try:
            super().__init__(str(path), Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)


class TcpServer(_Limited, socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128
    needs_token = True
    allow_reuse_address = True

    def __init__(self, port: int, app: App):
        self.app = app
        super().__init__(("127.0.0.1", port), Handler)

    def server_bind(self) -> None:  # skip HTTPServer's reverse DNS lookup
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class App:
    """State shared by every connection."""

    def __init__(self, engine: Any, cfg: Config, request_shutdown: Any):
        self.engine = engine
        self.cfg = cfg
        self.token = ""
        self.slots = threading.BoundedSemaphore(max(1, cfg.daemon.max_connections))
        self.pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="llmc-api")
        self.ctx = api.Context(engine, request_shutdown)
        self.requests = 0
        self.errors = 0
        self._lock = threading.Lock()

    def count(self, status: int) -> None:
        with self._lock:
            self.requests += 1
            if status >= 400:
                self.errors += 1

    def run(self, endpoint: api.Endpoint, params: dict) -> dict:
        if endpoint.name in ("health", "shutdown"):
            return endpoint.fn(self.ctx, params)  # never queued behind slow work
        future = self.pool.submit(endpoint.fn, self.ctx, params)
        try:
            return future.result(timeout=self.cfg.daemon.request_timeout_s)
        except concurrent.futures.TimeoutError:
            raise ApiError(
                504, "timeout", f"not done in {self.cfg.daemon.request_timeout_s:g}s"
            ) from None


class Daemon:
    """Owns the lock, servers, engine and watcher of one repository."""

    def __init__(self, root: Path, cfg: Config):
        self.root = Path(root).resolve()
        self.cfg = cfg
        self.lock = DaemonLock(self.root)
        self.stop_event = threading.Event()
        self.servers: list[socketserver.BaseServer] = []
        self.engine: Any = None
        self.watcher: Any = None
        self.app: App | None = None

    def start(self) -> None:
        from llmc.daemon.engine import Engine

        ensure_state_dir(self.root)
        prepare_socket_dir(socket_path(self.root))  # before the lock: stop() then leaves it be
        if not self.lock.acquire():
            raise AlreadyRunning(
                f"a daemon already runs for {self.root} (pid {read_pid(self.root) or '?'})"
            )
        removed = remove_runtime_files(self.root)
        if removed:
            log.info("removed stale files of a dead daemon: %s", ", ".join(removed))
        write_private(pid_path(self.root), f"{os.getpid()}\n")
        self.engine = Engine(self.root, self.cfg)
        self.app = App(self.engine, self.cfg, self.stop_event.set)
        sock = socket_path(self.root)
        self.servers.append(UnixServer(sock, self.app))
        info: dict[str, Any] = {"socket": str(sock), "tcp": None}
        if self.cfg.daemon.tcp:
            self.app.token = secrets.token_urlsafe(32)
            write_private(token_path(self.root), self.app.token + "\n")
            tcp = TcpServer(self.cfg.daemon.tcp_port, self.app)
            self.servers.append(tcp)
            info["tcp"] = {
                "host": "127.0.0.1",
                "port": tcp.server_address[1],
                "token_file": str(token_path(self.root)),
            }
        self.app.ctx.extra = lambda: {"endpoints": info, **self.status_extra()}
        for server in self.servers:
            threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
            ).start()
        from llmc import __version__

        write_private(
            info_path(self.root),
            json.dumps(
                {"pid": os.getpid(), "started_at": time.time(), "version": __version__, **info}
            ),
        )
        log.info("llmc daemon %d serving %s on %s", os.getpid(), self.root, sock)
        threading.Thread(target=self._warm_and_catch_up, name="llmc-warm", daemon=True).start()
        if self.cfg.daemon.watch:
            self._start_watcher()

    def _warm_and_catch_up(self) -> None:
        from llmc.paths import db_path

        has_index = db_path(self.root).exists()
        if has_index:
            self.engine.warm()
        if self.cfg.daemon.index_on_start:
            self.engine.reindex("start")
            if not has_index:
                self.engine.reindexer.wait_idle(24 * 3600)
                self.engine.warm()
        elif not has_index:
            self.engine.ready.set()

    def _start_watcher(self) -> None:
        from llmc.daemon.watcher import Watcher

        def on_batch(paths: list[str]) -> None:
            if "llmc.toml" in paths:
                self.engine.reload_config()
            self.engine.reindex("watcher", paths)

        try:
            self.watcher = Watcher(
                self.root,
                self.cfg,
                on_batch,
                debounce_s=self.cfg.daemon.debounce_ms / 1000,
                max_delay_s=self.cfg.daemon.max_batch_delay_s,
            )
            self.watcher.start()
        except Exception as e:  # noqa: BLE001 - without a watcher, hooks and the API still work
            log.warning("file watcher off: %s", e)
            self.watcher = None

    def status_extra(self) -> dict[str, Any]:
        return {
            "watcher": self.watcher.to_json() if self.watcher else {"enabled": False},
            "requests": {"served": self.app.requests, "errors": self.app.errors},
            "pid_file": str(pid_path(self.root)),
        }

    def serve(self) -> None:
        """Block until SIGTERM/SIGINT/SIGHUP, a shutdown request, or our socket is gone."""
        sock = socket_path(self.root)
        ino = os.stat(sock).st_ino
        while not self.stop_event.wait(SOCKET_CHECK_S):
            try:
                same = os.stat(sock).st_ino == ino
            except OSError:
                same = False
            if not same:  # `.llmc/` deleted or another daemon took over: we are unreachable
                log.warning("%s was removed or replaced; stopping", sock)
                break
        log.info("stopping")

    def stop(self) -> None:
        if not self.lock.held:
            return  # never started (or another daemon runs): nothing of ours to remove
        if self.watcher is not None:
            with contextlib.suppress(Exception):
                self.watcher.stop()
        for server in self.servers:
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()
        if self.engine is not None:
            self.engine.close()
        if self.app is not None:
            self.app.pool.shutdown(wait=False, cancel_futures=True)
        if self.lock.owns_path():  # else `.llmc/` was recreated: those files are not ours
            remove_runtime_files(self.root)
        self.lock.release()
        log.info("stopped")


def run_daemon(root: Path, cfg: Config) -> None:
    """`llmc daemon run`: serve in the foreground until SIGTERM, SIGINT or SIGHUP."""
    daemon = Daemon(root, cfg)

    def on_signal(signum: int, frame: Any) -> None:
        daemon.stop_event.set()

    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {s: signal.signal(s, on_signal) for s in signals}
    try:
        daemon.start()
        daemon.serve()
    finally:
        daemon.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)


__all__ = ["AlreadyRunning", "Daemon", "run_daemon"]
