"""The daemon process: HTTP + JSON on a Unix socket (and optionally 127.0.0.1 with a token).

``run_daemon`` is `llmc daemon run`: take the single-instance lock, clean what a killed
predecessor left, bind ``.llmc/daemon.sock`` (mode 0600, and 127.0.0.1 with ``--tcp``),
serve ``/v1/<endpoint>`` (see ``api.py``) and MCP at ``/mcp`` (``asgi.py``) with uvicorn
on its own thread and event loop, warm the models, catch up on changes, watch the tree,
and on SIGTERM/SIGINT/SIGHUP stop in order and remove its files.

Every request is bounded: a body over ``daemon.max_request_bytes`` gets 413 unread, a
request not received whole within ``REQUEST_DEADLINE_S`` gets 408 (or, when nothing was
sent, a close), work slower than ``daemon.request_timeout_s`` gets 504, connections
beyond ``daemon.max_connections`` get 503, counted apart for the Unix socket and for
authenticated TCP, and TCP connections not yet authenticated have a pool of
``UNAUTHENTICATED_TCP`` (``protocol.py``); at most ``MAX_EVENT_STREAMS`` MCP event streams
are open, each for ``EVENT_STREAM_LIFETIME_S``. Malformed requests get 400, unknown
paths 404, a missing or wrong token on TCP 401, browser requests on TCP (an ``Origin``
header) or a ``Host`` other than this port on the loopback 403. None of these stops the
server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
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
from llmc.paths import ensure_state_dir, private_umask

log = logging.getLogger(__name__)

REQUEST_DEADLINE_S = 10.0  # a whole request (line, headers, body) however sent; idle keep-alive
WORKERS = 8
SOCKET_CHECK_S = 5.0
BACKLOG = 128
START_TIMEOUT_S = 60.0  # for the HTTP thread to listen
SHUTDOWN_GRACE_S = 3.0  # answers in flight at shutdown get this long
UNAUTHENTICATED_TCP = 4  # TCP connections no request has authenticated yet (their own pool)
MAX_EVENT_STREAMS = 4  # open `GET /mcp` event streams
EVENT_STREAM_LIFETIME_S = 60.0  # an event stream ends after this long (clients reopen it)
EVENT_STREAM_ENV = "LLMC_TEST_EVENT_STREAM_S"  # tests only: a shorter lifetime


def event_stream_lifetime() -> float:
    try:
        return float(os.environ.get(EVENT_STREAM_ENV, "")) or EVENT_STREAM_LIFETIME_S
    except ValueError:
        return EVENT_STREAM_LIFETIME_S


def bind_unix(path: Path) -> socket.socket:
    """A listening Unix socket at ``path``, born 0600 (no window where others can connect)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as e:
        sock.close()
        raise LlmcError(f"cannot listen on {path}: {e.strerror or e}") from None
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(BACKLOG)
    return sock


def bind_tcp(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        raise LlmcError(
            f"cannot listen on 127.0.0.1:{port}: {e.strerror or e} (daemon.tcp_port / --port)"
        ) from None
    except BaseException:
        sock.close()
        raise
    return sock


class App:
    """State shared by every connection."""

    def __init__(self, engine: Any, cfg: Config, request_shutdown: Any):
        self.engine = engine
        self.cfg = cfg
        self.token = ""
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

    def _timeout(self) -> ApiError:
        return ApiError(504, "timeout", f"not done in {self.cfg.daemon.request_timeout_s:g}s")

    def run(self, endpoint: api.Endpoint | str, params: dict) -> dict:
        """Run an endpoint from a thread (MCP tools): on the pool, bounded (504)."""
        if isinstance(endpoint, str):
            endpoint = _endpoint(endpoint)
        if endpoint.name in ("health", "shutdown"):
            return endpoint.fn(self.ctx, params)  # never queued behind slow work
        future = self.pool.submit(endpoint.fn, self.ctx, params)
        try:
            return future.result(timeout=self.cfg.daemon.request_timeout_s)
        except concurrent.futures.TimeoutError:
            raise self._timeout() from None

    async def run_async(self, endpoint: api.Endpoint, params: dict) -> dict:
        """Run an endpoint from the event loop (REST): on the pool, bounded (504)."""
        if endpoint.name in ("health", "shutdown"):
            return endpoint.fn(self.ctx, params)
        future = asyncio.get_running_loop().run_in_executor(
            self.pool, endpoint.fn, self.ctx, params
        )
        try:
            return await asyncio.wait_for(future, self.cfg.daemon.request_timeout_s)
        except asyncio.TimeoutError:
            raise self._timeout() from None


def _endpoint(name: str) -> api.Endpoint:
    endpoint = api.ENDPOINTS.get(name)
    if endpoint is None:
        raise ApiError(404, "not_found", f"no endpoint {name!r}")
    return endpoint


class HttpServer:
    """uvicorn on its own thread and event loop, serving pre-bound sockets."""

    def __init__(self, app: App, sockets: list[socket.socket], on_exit: Any):
        import uvicorn

        from llmc.daemon.asgi import build_app
        from llmc.daemon.protocol import make_protocol

        unix_app, tcp_app = build_app(
            app, lambda: app.token, MAX_EVENT_STREAMS, event_stream_lifetime()
        )
        protocol = make_protocol(
            tcp_app,
            REQUEST_DEADLINE_S,
            app.cfg.daemon.max_connections,
            app.count,
            max_unauthenticated=UNAUTHENTICATED_TCP,
        )
        config = uvicorn.Config(
            unix_app,
            http=protocol,
            loop="asyncio",
            ws="none",
            lifespan="on",
            interface="asgi3",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            timeout_keep_alive=int(REQUEST_DEADLINE_S),
            timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S),
            backlog=BACKLOG,
        )
        self.server = uvicorn.Server(config)
        self.sockets = sockets
        self.on_exit = on_exit
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="llmc-http", daemon=True)

    def _run(self) -> None:
        try:
            self.server.run(sockets=self.sockets)
        except BaseException as e:  # noqa: BLE001 - SystemExit from a failed startup too
            self.error = e
            log.exception("the HTTP server stopped")
        finally:
            self.on_exit()  # without its server the daemon is unreachable: stop it

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started and self.thread.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start in {START_TIMEOUT_S:g}s")
            time.sleep(0.01)
        if not self.server.started:
            raise RuntimeError(f"the HTTP server failed to start: {self.error!r}")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(SHUTDOWN_GRACE_S + 5.0)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(5.0)
        for sock in self.sockets:
            sock.close()


class Daemon:
    """Owns the lock, servers, engine and watcher of one repository."""

    def __init__(self, root: Path, cfg: Config):
        self.root = Path(root).resolve()
        self.cfg = cfg
        self.lock = DaemonLock(self.root)
        self.stop_event = threading.Event()
        self.http: HttpServer | None = None
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
        sockets = [bind_unix(sock)]
        info: dict[str, Any] = {"socket": str(sock), "tcp": None}
        try:
            if self.cfg.daemon.tcp:
                self.app.token = secrets.token_urlsafe(32)
                write_private(token_path(self.root), self.app.token + "\n")
                sockets.append(bind_tcp(self.cfg.daemon.tcp_port))
                info["tcp"] = {
                    "host": "127.0.0.1",
                    "port": sockets[1].getsockname()[1],
                    "token_file": str(token_path(self.root)),
                }
            self.app.ctx.extra = lambda: {"endpoints": info, **self.status_extra()}
            self.http = HttpServer(self.app, sockets, self.stop_event.set)
            self.http.start()
        except BaseException:
            for s in sockets:
                s.close()
            raise
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
        if self.http is not None:
            with contextlib.suppress(Exception):
                self.http.stop()
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
        # The daemon writes only llmc's state (the index it refreshes, logs): 0600 / 0700.
        with private_umask():
            daemon.start()
            daemon.serve()
    finally:
        daemon.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)


__all__ = ["AlreadyRunning", "Daemon", "run_daemon"]
