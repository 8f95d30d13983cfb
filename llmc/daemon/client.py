"""Talk to a repository's daemon over its Unix socket (stdlib ``http.client`` only).

``try_daemon`` is what `llmc search` and `llmc graph` call first: the daemon's answer when
one runs and answers, else ``None`` (fall back to in-process work). It costs one ``stat``
when no daemon runs, and at most ``connect_timeout`` when a dead daemon left its socket.

No byte is sent to a socket that may be another user's: ``request`` checks the socket and
its directory first (``pidfile.check_socket``) and, where the OS tells, the uid of the
process that accepted the connection; either failure raises ``UnsafeSocketError``.
"""

from __future__ import annotations

import http.client
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
CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 300.0
NO_DAEMON_ENV = "LLMC_NO_DAEMON"
# Errors that mean "this request is wrong", which in-process work would repeat: raised.
USER_ERRORS = (400, 413, 422)


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: connect within ``connect_timeout``, then read patiently."""

    def __init__(self, path: Path | str, connect_timeout: float, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = str(path)
        self.connect_timeout = connect_timeout

    def connect(self) -> None:
        deadline = time.monotonic() + self.connect_timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.connect_timeout)
            try:
                sock.connect(self.unix_path)
                break
            except BlockingIOError:  # the listen backlog is full: a busy daemon, not a dead one
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
            except OSError:
                sock.close()
                raise
        try:
            check_peer(sock, self.unix_path)
        except UnsafeSocketError:
            sock.close()
            raise
        sock.settimeout(self.timeout)
        self.sock = sock


def check_peer(sock: socket.socket, path: str) -> None:
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
    method = method or ("GET" if payload is None else "POST")
    body = None if payload is None else json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn = UnixHTTPConnection(path, connect_timeout, timeout)
    try:
        conn.request(method, API_PREFIX + endpoint.strip("/"), body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        status = resp.status
    except (OSError, http.client.HTTPException) as e:
        raise DaemonUnavailable(f"daemon at {path} did not answer: {e}") from None
    finally:
        conn.close()
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
    other settings (flags, env, an edited config) answers as this process would. A request
    the daemon rejects as invalid (400/413/422) raises ``DaemonError`` (an ``LlmcError``);
    any other failure returns None. ``LLMC_NO_DAEMON=1`` always returns None.

    A socket that may be another user's (``UnsafeSocketError``) sends nothing, logs one
    warning per socket and process, and returns None. Falling back rather than raising:
    the in-process answer is the same answer and leaks nothing, so a squatted name in a
    shared directory cannot take `llmc search` away from its user; the warning still says
    that something is wrong and where. Commands that manage the daemon raise instead.
    """
    if os.environ.get(NO_DAEMON_ENV, "").lower() in ("1", "true", "yes"):
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
        if e.status in USER_ERRORS:
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
    "health",
    "request",
    "try_daemon",
]
