"""The ``openai`` provider: any OpenAI-compatible server's ``/chat/completions``
(``[llm] base_url``, ``openai_model``, ``api_key_env``: the NAME of the variable holding the
key). HTTP and the key live in llmc.models.openai_http; its errors become LLMUnavailable /
LLMTimeout here, where they enter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm._base import Defaults, Generation, messages, one_line
from llmc.models.openai_http import OpenAIServer, ServerError, host_of, server

MODELS_TIMEOUT_S = 5.0


class OpenAILLM:
    """Chat completions from an OpenAI-compatible server. An empty ``model`` asks the
    server for its models once and takes the first."""

    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str = "",
        api_key_env: str = "",
        defaults: Defaults | None = None,
    ):
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.defaults = defaults or Defaults()
        # Until the server is asked, an unnamed model is named by where it is served, so
        # that HyDE's cache never hands one server's hypotheses to another.
        self.model = model or f"(first model at {_host(base_url)})"
        self._model = model
        self._server: OpenAIServer | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAILLM(base_url={self.base_url!r}, model={self.model!r})"

    def _where(self) -> str:
        base = self._server.base_url if self._server is not None else self.base_url
        return f"openai: {base}/chat/completions ({self._model or 'no model yet'})"

    def _connect(self, timeout: float) -> tuple[OpenAIServer, str]:
        with self._lock:
            if self._server is None:
                self._server = server(self.base_url, self.api_key_env)
            if not self._model:
                models = self._server.models(min(timeout, MODELS_TIMEOUT_S))
                if not models:
                    raise ServerError(f"{self._server.base_url}/models: the server lists no model")
                self._model = self.model = models[0]
            return self._server, self._model

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
        max_tokens, temperature, timeout = self.defaults.resolve(max_tokens, temperature, timeout)
        body: dict[str, Any] = {
            "messages": messages(prompt, system),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": False,
        }
        if stop:
            body["stop"] = list(stop)
        if seed is not None:
            body["seed"] = seed
        started = time.perf_counter()
        try:
            srv, body["model"] = self._connect(timeout)
            data = srv.request("POST", "/chat/completions", timeout, body)
        except ServerError as e:
            kind = LLMTimeout if e.timeout else LLMUnavailable
            raise kind(f"openai: {one_line(e)}") from None
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("content is not text")
        except (KeyError, IndexError, TypeError) as e:
            raise LLMUnavailable(
                f"{self._where()}: not an OpenAI-compatible chat answer ({type(e).__name__})"
            ) from None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Generation(
            text=text,
            model=str(data.get("model") or self._model),
            provider=self.provider,
            latency_ms=latency_ms,
            tokens=_int(usage.get("completion_tokens")),
            prompt_tokens=_int(usage.get("prompt_tokens")),
            finish_reason=choice.get("finish_reason"),
        )


def _host(base_url: str) -> str:
    try:
        return host_of(base_url)
    except ServerError:
        return base_url


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
