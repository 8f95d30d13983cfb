"""Talk to a repository's daemon over its Unix socket (httpx, its Unix-socket transport).

``try_daemon`` is what `llmc search` and `llmc graph` call first: the daemon's answer when
one runs and answers, else ``None`` (fall back to in-process work). It costs one ``stat``
when no daemon runs (httpx is imported only once a socket is there), and at most
``connect_timeout`` when a dead daemon left its socket.

No byte is sent to a socket that may be another user's: ``request`` checks the socket and
its directory first (``pidfile.check_socket``) and, where the OS tells, the uid of the
process that accepted the connection (``check_peer``, run by the transport's network
backend right after connecting); either failure raises ``UnsafeSocketError``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

from llmc.daemon.pidfile import check_socket, socket_path
from llmc.errors import DaemonError, DaemonUnavailable, LlmcError, UnsafeSocketError

log = logging.getLogger(__name__)

API_PREFIX = "/v1/"
BASE_URL = "http://llmc"  # the host name is ignored on a Unix socket
CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 300.0
NO_DAEMON_ENV = "LLMC_NO_DAEMON"
# Errors that mean "this request is wrong", which in-process work would repeat: raised.
USER_ERRORS = (400, 413, 422)
# This process's config differs from the daemon's in a key a request may not set (a model,
# a host...): the daemon will not take it, the in-process answer follows this config.
CONFIG_REFUSED = "config_refused"


def daemon_disabled() -> bool:
    """True when ``LLMC_NO_DAEMON`` says to work in-process."""
    return os.environ.get(NO_DAEMON_ENV, "").lower() in ("1", "true", "yes")


def check_peer(sock: Any, path: str) -> None:
    """Raise UnsafeSocketError unless the process listening on ``sock`` runs as us.

    Linux tells with ``SO_PEERCRED``; elsewhere the file checks of ``check_socket`` stand
    alone. This also covers a socket swapped between ``check_socket`` and ``connect``.
    """
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.geteuid():
        raise UnsafeSocketError(
            f"refusing to use the daemon socket {path}: the process serving it runs as uid "
            f"{uid}, not {os.geteuid()}; another user could intercept or answer llmc's queries"
        )


def _peer_checked_backend(connect_timeout: float) -> Any:
    """httpcore's sync network backend, checking the peer of every Unix socket it opens.

    A full listen backlog (EAGAIN: a busy daemon, not a dead one) is retried until
    ``connect_timeout``; a refused connection fails at once.
    """
    import httpcore

    class PeerCheckedBackend(httpcore.SyncBackend):
        def connect_unix_socket(self, path, timeout=None, socket_options=None):  # type: ignore[no-untyped-def]
            deadline = time.monotonic() + connect_timeout
            while True:
                try:
                    stream = super().connect_unix_socket(path, timeout, socket_options)
                    break
                except httpcore.ConnectError as e:
                    if not isinstance(e.__cause__, BlockingIOError) or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.01)
            try:
                check_peer(stream.get_extra_info("socket"), path)
            except BaseException:
                stream.close()  # before one byte was sent
                raise
            return stream

    return PeerCheckedBackend()


def unix_client(
    path: Path | str, connect_timeout: float = CONNECT_TIMEOUT_S, timeout: float = READ_TIMEOUT_S
) -> Any:
    """An ``httpx.Client`` for the daemon on ``path`` (base URL ``http://llmc``).

    Connections are peer-checked (``check_peer``); the caller checks the socket file first
    (``pidfile.check_socket``). No proxy or certificate store is consulted.
    """
    import httpx

    transport = httpx.HTTPTransport(uds=str(path), verify=False, trust_env=False)
    pool = transport._pool  # the one place httpx lets a network backend in
    if not hasattr(pool, "_network_backend"):  # never connect unchecked on another httpcore
        raise LlmcError("this httpcore version hides its network backend; cannot check peers")
    pool._network_backend = _peer_checked_backend(connect_timeout)
    return httpx.Client(
        transport=transport,
        base_url=BASE_URL,
        timeout=httpx.Timeout(timeout, connect=connect_timeout),
        trust_env=False,
    )


def request(
    root: Path,
    endpoint: str,
    payload: dict[str, Any] | None = None,
    method: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    timeout: float = READ_TIMEOUT_S,
) -> dict[str, Any]:
    """Call ``/v1/<endpoint>``; raise DaemonUnavailable or DaemonError when it fails.

    UnsafeSocketError (an LlmcError, not DaemonUnavailable) when the socket or its
    directory may be another user's: then nothing was sent.
    """
    path = socket_path(Path(root).resolve())
    try:
        check_socket(path)
    except FileNotFoundError:
        raise DaemonUnavailable(f"no daemon socket at {path}") from None
    except OSError as e:
        raise DaemonUnavailable(f"cannot inspect the daemon socket {path}: {e}") from None
    import httpx

    method = method or ("GET" if payload is None else "POST")
    body = None if payload is None else json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json"} if body is not None else {}
    try:
        with unix_client(path, connect_timeout, timeout) as client:
            resp = client.request(
                method, API_PREFIX + endpoint.strip("/"), content=body, headers=headers
            )
            raw, status = resp.content, resp.status_code
    except (OSError, httpx.HTTPError) as e:
        raise DaemonUnavailable(f"daemon at {path} did not answer: {e}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DaemonError(status, "bad_response", "daemon sent a non-JSON answer") from None
    if status >= 400:
        err = data.get("error", {}) if isinstance(data, dict) else {}
        raise DaemonError(status, err.get("code", "error"), err.get("message", f"HTTP {status}"))
    return data


def try_daemon(
    root: Path,
    endpoint: str,
    payload: dict[str, Any] | None,
    cfg: Any = None,
    connect_timeout: float | None = None,
) -> dict[str, Any] | None:
    """The daemon's answer to ``endpoint`` (e.g. "search"), or None when none answers.

    With ``cfg``, its search and embedding settings travel along, so a daemon started with
    other settings (flags, env, an edited config) answers as this process would; when they
    differ in a key a request may not set (``config_refused``) this returns None. A request
    the daemon rejects as invalid (400/413/422) raises ``DaemonError`` (an ``LlmcError``);
    any other failure returns None. ``LLMC_NO_DAEMON=1`` always returns None.

    A socket that may be another user's (``UnsafeSocketError``) sends nothing, logs one
    warning per socket and process, and returns None. Falling back rather than raising:
    the in-process answer is the same answer and leaks nothing, so a squatted name in a
    shared directory cannot take `llmc search` away from its user; the warning still says
    that something is wrong and where. Commands that manage the daemon raise instead.
    """
    if daemon_disabled():
        return None
    if payload is not None and cfg is not None and "config" not in payload:
        from llmc.daemon.engine import client_config

        payload = {**payload, "config": client_config(cfg)}
    if connect_timeout is None:
        connect_timeout = getattr(getattr(cfg, "daemon", None), "client_timeout_s", None)
    try:
        return request(
            root, endpoint, payload, connect_timeout=connect_timeout or CONNECT_TIMEOUT_S
        )
    except DaemonUnavailable as e:
        log.debug("%s", e)
        return None
    except UnsafeSocketError as e:
        _warn_once(str(e))
        return None
    except DaemonError as e:
        if e.status in USER_ERRORS and e.code != CONFIG_REFUSED:
            raise
        log.info("daemon could not answer %s (%s %s): working in-process", endpoint, e.status, e)
        return None


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("%s; working in-process", message)


def health(root: Path, timeout: float = CONNECT_TIMEOUT_S) -> dict[str, Any] | None:
    """The daemon's /v1/health answer, or None."""
    try:
        return request(root, "health", connect_timeout=timeout, timeout=max(timeout, 2.0))
    except LlmcError:
        return None


__all__ = [
    "check_peer",
    "daemon_disabled",
    "health",
    "request",
    "try_daemon",
    "unix_client",
]
