"""Talk to a repository's daemon over its Unix socket (stdlib ``http.client`` only).

``try_daemon`` is what `llmc search` and `llmc graph` call first: the daemon's answer when
one runs and answers, else ``None`` (fall back to in-process work). It costs one ``stat``
when no daemon runs, and at most ``connect_timeout`` when a dead daemon left its socket.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from llmc.daemon.pidfile import socket_path
from llmc.errors import LlmcError

log = logging.getLogger(__name__)

API_PREFIX = "/v1/"
CONNECT_TIMEOUT_S = 0.5
READ_TIMEOUT_S = 300.0
NO_DAEMON_ENV = "LLMC_NO_DAEMON"
# Errors that mean "this request is wrong", which in-process work would repeat: raised.
USER_ERRORS = (400, 413, 422)


class DaemonUnavailable(LlmcError):
    """No daemon answered on the socket."""


class DaemonError(LlmcError):
    """The daemon answered with an error status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


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
        sock.settimeout(self.timeout)
        self.sock = sock


def request(
    root: Path,
    endpoint: str,
    payload: dict[str, Any] | None = None,
    method: str | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    timeout: float = READ_TIMEOUT_S,
) -> dict[str, Any]:
    """Call ``/v1/<endpoint>``; raise DaemonUnavailable or DaemonError when it fails."""
    path = socket_path(Path(root).resolve())
    if not path.exists():
        raise DaemonUnavailable(f"no daemon socket at {path}")
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
    except DaemonError as e:
        if e.status in USER_ERRORS:
            raise
        log.info("daemon could not answer %s (%s %s): working in-process", endpoint, e.status, e)
        return None


def health(root: Path, timeout: float = CONNECT_TIMEOUT_S) -> dict[str, Any] | None:
    """The daemon's /v1/health answer, or None."""
    try:
        return request(root, "health", connect_timeout=timeout, timeout=max(timeout, 2.0))
    except LlmcError:
        return None


__all__ = ["DaemonError", "DaemonUnavailable", "health", "request", "try_daemon"]
