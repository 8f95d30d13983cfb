"""A small client for OpenAI-compatible HTTP servers (llama.cpp's server, vLLM, LM Studio,
ollama's /v1, a hosted API): ``/models``, ``/chat/completions``, ``/embeddings``, over httpx.

The key: ``api_key_env`` names the environment variable that holds it; the key is read when
a request is made, sent as a bearer token, and never kept in config output, the index, a
log line or an error message (errors name the variable, never its value). Every failure is
one line: ``ServerError`` (``timeout`` set when the server was too slow), which the LLM
provider and the embedder map into llmc's own errors where they enter.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MAX_ERROR_CHARS = 200


class ServerError(Exception):
    """One line saying what went wrong with the server; ``timeout``: it was too slow."""

    def __init__(self, message: str, timeout: bool = False):
        super().__init__(message)
        self.timeout = timeout


def normalize_base_url(url: str) -> str:
    """``http://host:port`` or ``http://host:port/v1`` (the OpenAI convention), without a
    trailing slash; a bare host gets ``/v1``. ServerError for anything but http(s)."""
    raw = url.strip().rstrip("/")
    if not raw:
        raise ServerError("no server configured (llm.base_url is empty)")
    parts = urlsplit(raw if "://" in raw else f"http://{raw}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerError(f"not an http(s) URL: {url!r}")
    if parts.username or parts.password:
        raise ServerError("put the key in the variable named by api_key_env, not in the URL")
    path = parts.path.rstrip("/") or "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


def host_of(base_url: str) -> str:
    """``host:port`` of a base URL (what a vector space id records)."""
    parts = urlsplit(normalize_base_url(base_url))
    return parts.netloc


def api_key(env_name: str, environ: Mapping[str, str] | None = None) -> str:
    """The key held by the variable ``env_name``; "" when no variable is named. A named
    variable that is unset or empty is a ServerError naming it (never a value)."""
    if not env_name:
        return ""
    value = (os.environ if environ is None else environ).get(env_name, "")
    if not value:
        raise ServerError(f"the environment variable {env_name} (api_key_env) is not set")
    return value


def _short(text: object) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 1] + "…"


@dataclass(frozen=True)
class ServerStatus:
    base_url: str
    reachable: bool
    models: tuple[str, ...] = field(default=())
    error: str = ""


class OpenAIServer:
    """One server: ``base_url`` (normalized) and the name of its key's variable."""

    def __init__(self, base_url: str, api_key_env: str = ""):
        self.base_url = normalize_base_url(base_url)
        self.api_key_env = api_key_env
        self._clients: dict[float, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # the key's variable name at most, never its value
        return f"OpenAIServer({self.base_url!r}, api_key_env={self.api_key_env!r})"

    def _client(self, timeout: float) -> Any:
        import httpx

        with self._lock:
            client = self._clients.get(timeout)
            if client is None:
                client = self._clients[timeout] = httpx.Client(
                    base_url=self.base_url, timeout=timeout, trust_env=False
                )
            return client

    def request(self, method: str, path: str, timeout: float, body: Any = None) -> Any:
        """The JSON answer of one request; ServerError (one line) for anything else."""
        import httpx

        headers = {"Accept": "application/json"}
        key = api_key(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        where = f"{self.base_url}{path}"
        try:
            r = self._client(timeout).request(method, path, json=body, headers=headers)
        except httpx.TimeoutException:
            raise ServerError(f"{where}: no answer within {timeout:g}s", timeout=True) from None
        except httpx.ConnectError:
            raise ServerError(f"{where}: not reachable (is the server running?)") from None
        except (httpx.HTTPError, OSError) as e:
            raise ServerError(f"{where}: {type(e).__name__}: {_short(e)}") from None
        if r.status_code >= 400:
            detail = _error_detail(r)
            raise ServerError(f"{where}: HTTP {r.status_code}{': ' + detail if detail else ''}")
        try:
            return r.json()
        except ValueError:
            raise ServerError(
                f"{where}: the answer is not JSON ({_short(r.text[:80])!r})"
            ) from None

    def models(self, timeout: float) -> tuple[str, ...]:
        data = self.request("GET", "/models", timeout)
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ServerError(f"{self.base_url}/models: not an OpenAI-compatible model list")
        return tuple(str(m["id"]) for m in rows if isinstance(m, dict) and m.get("id"))

    def probe(self, timeout: float = 0.5) -> ServerStatus:
        """A fast health check: the model list."""
        try:
            return ServerStatus(self.base_url, True, self.models(timeout))
        except ServerError as e:
            return ServerStatus(self.base_url, False, error=str(e))


def _error_detail(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return _short(response.text[:MAX_ERROR_CHARS])
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return _short(error.get("message", ""))
    return _short(error or "")


_servers: dict[tuple[str, str], OpenAIServer] = {}
_servers_lock = threading.Lock()


def server(base_url: str, api_key_env: str = "") -> OpenAIServer:
    """One client per (server, key variable) per process: connections are kept alive."""
    key = (normalize_base_url(base_url), api_key_env)
    with _servers_lock:
        found = _servers.get(key)
        if found is None:
            found = _servers[key] = OpenAIServer(*key)
        return found


__all__ = [
    "OpenAIServer",
    "ServerError",
    "ServerStatus",
    "api_key",
    "host_of",
    "normalize_base_url",
    "server",
]
