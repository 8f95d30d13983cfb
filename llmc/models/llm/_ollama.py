"""The ``ollama`` provider: a model served by a local ollama, through the official client.

Host: ``[llm] ollama_host``, else ``$OLLAMA_HOST``, else http://127.0.0.1:11434. Errors of
the client and of httpx are mapped to LLMUnavailable / LLMTimeout here, where they enter.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm._base import Defaults, Generation, messages, one_line

log = logging.getLogger(__name__)

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
DEFAULT_OLLAMA_PORT = 11434


def resolve_host(configured: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The ollama base URL: config, else ``$OLLAMA_HOST``, else the default; ollama's own
    shorthands (``host``, ``host:port``, ``:port``) get a scheme and the default port."""
    env = os.environ if environ is None else environ
    raw = (configured or env.get("OLLAMA_HOST", "") or DEFAULT_OLLAMA_HOST).strip().rstrip("/")
    if "://" in raw:
        return raw
    if raw.startswith(":"):
        raw = "127.0.0.1" + raw
    if not re.search(r":\d+$", raw):
        raw = f"{raw}:{DEFAULT_OLLAMA_PORT}"
    return f"http://{raw}"


def _full_name(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def has_model(model: str, names: Sequence[str]) -> bool:
    """Whether ``model`` is among the server's models (``name`` means ``name:latest``)."""
    return _full_name(model) in {_full_name(n) for n in names}


@dataclass(frozen=True)
class OllamaStatus:
    host: str
    reachable: bool
    version: str = ""
    models: tuple[str, ...] = field(default=())
    error: str = ""


def probe(host: str, timeout: float = 0.5) -> OllamaStatus:
    """A fast health check: ``/api/version`` and ``/api/tags`` with a short timeout."""
    import httpx

    try:
        with httpx.Client(base_url=host, timeout=timeout) as client:
            r = client.get("/api/version")
            r.raise_for_status()
            version = str(r.json().get("version", ""))
            r = client.get("/api/tags")
            r.raise_for_status()
            models = tuple(
                str(m.get("name") or m.get("model") or "") for m in r.json().get("models") or []
            )
    except httpx.TimeoutException:
        return OllamaStatus(host, False, error=f"no answer within {timeout:g}s")
    except httpx.ConnectError as e:
        return OllamaStatus(host, False, error=f"cannot connect ({one_line(e) or 'refused'})")
    except httpx.HTTPStatusError as e:
        code = e.response.status_code
        return OllamaStatus(host, False, error=f"HTTP {code} from {e.request.url}")
    except (httpx.HTTPError, ValueError, AttributeError, OSError) as e:
        return OllamaStatus(host, False, error=f"not an ollama server ({one_line(e)})")
    return OllamaStatus(host, True, version=version, models=models)


class OllamaLLM:
    """Chat completions from ollama's ``/api/chat`` (ollama applies the chat template)."""

    provider = "ollama"

    def __init__(self, host: str, model: str, defaults: Defaults | None = None):
        self.host = host
        self.model = model
        self.defaults = defaults or Defaults()
        self._clients: dict[float, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OllamaLLM(host={self.host!r}, model={self.model!r})"

    def _client(self, timeout: float) -> Any:
        with self._lock:
            client = self._clients.get(timeout)
            if client is None:
                from ollama import Client

                client = self._clients[timeout] = Client(host=self.host, timeout=timeout)
            return client

    def generate(
        self,
        prompt: str,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        timeout: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        import httpx
        from ollama import ResponseError

        max_tokens, temperature, timeout = self.defaults.resolve(max_tokens, temperature, timeout)
        options: dict[str, Any] = {"num_predict": max_tokens, "temperature": temperature}
        if stop:
            options["stop"] = list(stop)
        if seed is not None:
            options["seed"] = seed
        where = f"ollama {self.model} at {self.host}"
        started = time.perf_counter()
        try:
            response = self._client(timeout).chat(
                model=self.model, messages=messages(prompt, system), options=options
            )
        except ResponseError as e:
            if e.status_code == 404:
                raise LLMUnavailable(
                    f"{where}: model not found (ollama pull {self.model})"
                ) from None
            raise LLMUnavailable(f"{where}: {one_line(e.error)}") from None
        except ConnectionError:
            raise LLMUnavailable(f"{where}: not reachable (is `ollama serve` running?)") from None
        except httpx.TimeoutException:
            raise LLMTimeout(f"{where}: no answer within {timeout:g}s") from None
        except (httpx.HTTPError, ValueError, OSError) as e:
            raise LLMUnavailable(f"{where}: {type(e).__name__}: {one_line(e)}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        text = response.message.content if response.message else None
        if text is None:
            raise LLMUnavailable(f"{where}: reply without a message")
        return Generation(
            text=text,
            model=response.model or self.model,
            provider=self.provider,
            latency_ms=latency_ms,
            tokens=response.eval_count,
            prompt_tokens=response.prompt_eval_count,
            finish_reason=response.done_reason,
        )
