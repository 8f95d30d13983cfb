"""Pick the provider from ``[llm]`` config, once per process, and describe them all (doctor).

``auto``: the OpenAI-compatible server at ``llm.base_url`` when one is configured and answers
a fast health check, else ollama if it answers one and has the configured model, else the
embedded GGUF model if its runtime and file are there, else ``none``; each fallback is one
log line. Nothing is loaded here: the embedded model loads on its first ``generate``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass

from llmc.config import LLMConfig
from llmc.errors import ConfigError, LLMUnavailable
from llmc.models.llm._base import LLM, Defaults, NoneLLM
from llmc.models.llm._embedded import (
    EmbeddedLLM,
    model_name,
    resolve_model_path,
    runtime_version,
)
from llmc.models.llm._ollama import OllamaLLM, OllamaStatus, has_model, probe, resolve_host
from llmc.models.llm._openai import OpenAILLM

log = logging.getLogger(__name__)

PROVIDERS = ("auto", "ollama", "embedded", "openai", "none")

MAX_PROVIDERS = 4  # resolved providers kept per process, least recently used out
_cache: OrderedDict[tuple, LLM] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class ProviderStatus:
    """What doctor shows for one provider. ``location``: the ollama URL or the model file."""

    name: str
    available: bool
    detail: str
    model: str = ""
    location: str = ""
    version: str = ""
    models: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "models": list(self.models)}


def _defaults(cfg: LLMConfig) -> Defaults:
    return Defaults(max_tokens=cfg.max_tokens, temperature=cfg.temperature, timeout_s=cfg.timeout_s)


def _provider_name(cfg: LLMConfig) -> str:
    name = cfg.provider.strip().lower()
    if name not in PROVIDERS:
        raise ConfigError(
            f"llm.provider must be one of {', '.join(PROVIDERS)}, got {cfg.provider!r}"
        )
    return name


def ollama_status(cfg: LLMConfig) -> ProviderStatus:
    status: OllamaStatus = probe(resolve_host(cfg.ollama_host), cfg.probe_timeout_s)
    common = {"model": cfg.ollama_model, "location": status.host, "version": status.version}
    if not status.reachable:
        return ProviderStatus("ollama", False, f"not reachable: {status.error}", **common)
    if not has_model(cfg.ollama_model, status.models):
        return ProviderStatus(
            "ollama",
            False,
            f"reachable, but no model {cfg.ollama_model} (ollama pull {cfg.ollama_model})",
            models=status.models,
            **common,
        )
    return ProviderStatus("ollama", True, "reachable", models=status.models, **common)


def embedded_status(cfg: LLMConfig) -> ProviderStatus:
    try:
        version = runtime_version()
        path = resolve_model_path(cfg.embedded_model)
    except LLMUnavailable as e:
        return ProviderStatus("embedded", False, str(e), model=cfg.embedded_model)
    size_mib = path.stat().st_size / 2**20
    return ProviderStatus(
        "embedded",
        True,
        f"GGUF {size_mib:.0f} MiB, loads on first use",
        model=model_name(path),
        location=str(path),
        version=f"xllamacpp {version}",
    )


def openai_status(cfg: LLMConfig) -> ProviderStatus:
    """The OpenAI-compatible server at ``llm.base_url``: its model list, fast."""
    from llmc.models.openai_http import ServerError, server

    if not cfg.base_url.strip():
        return ProviderStatus("openai", False, "not configured (llm.base_url)")
    try:
        srv = server(cfg.base_url, cfg.api_key_env)
    except ServerError as e:
        return ProviderStatus("openai", False, str(e), model=cfg.openai_model)
    status = srv.probe(cfg.probe_timeout_s)
    model = cfg.openai_model or (status.models[0] if status.models else "")
    common = {"model": model, "location": srv.base_url, "models": status.models}
    if not status.reachable:
        return ProviderStatus("openai", False, f"not reachable: {status.error}", **common)
    if cfg.openai_model and cfg.openai_model not in status.models:
        return ProviderStatus(
            "openai", False, f"reachable, but it does not list {cfg.openai_model}", **common
        )
    key = f", key from ${cfg.api_key_env}" if cfg.api_key_env else ""
    return ProviderStatus("openai", True, f"reachable{key}", **common)


def provider_statuses(cfg: LLMConfig | None = None) -> tuple[ProviderStatus, ...]:
    """Every provider's availability (probes ollama and a configured OpenAI-compatible
    server; loads nothing)."""
    cfg = cfg or LLMConfig()
    return (
        ollama_status(cfg),
        embedded_status(cfg),
        openai_status(cfg),
        ProviderStatus("none", True, "always available: LLM features are skipped"),
    )


def _ollama(cfg: LLMConfig) -> OllamaLLM:
    return OllamaLLM(resolve_host(cfg.ollama_host), cfg.ollama_model, _defaults(cfg))


def _embedded(cfg: LLMConfig) -> EmbeddedLLM:
    return EmbeddedLLM(cfg.embedded_model, _defaults(cfg), n_ctx=cfg.n_ctx, n_threads=cfg.n_threads)


def _openai(cfg: LLMConfig) -> OpenAILLM:
    return OpenAILLM(cfg.base_url, cfg.openai_model, cfg.api_key_env, _defaults(cfg))


def _auto(cfg: LLMConfig) -> LLM:
    if cfg.base_url.strip():
        served = openai_status(cfg)
        if served.available:
            log.debug("llm: auto chose the OpenAI-compatible server at %s", served.location)
            return _openai(cfg)
        log.info("llm: %s %s; trying ollama", cfg.base_url, served.detail)
    ollama = ollama_status(cfg)
    if ollama.available:
        log.debug("llm: auto chose ollama %s at %s", cfg.ollama_model, ollama.location)
        return _ollama(cfg)
    log.info("llm: ollama at %s %s; trying the embedded model", ollama.location, ollama.detail)
    embedded = embedded_status(cfg)
    if embedded.available:
        log.debug("llm: auto chose embedded %s", embedded.location)
        return _embedded(cfg)
    log.warning("llm: no LLM available (%s); LLM features are skipped", embedded.detail)
    return NoneLLM(f"ollama {ollama.detail}; {embedded.detail}")


def _resolve(cfg: LLMConfig) -> LLM:
    name = _provider_name(cfg)
    if name == "ollama":
        return _ollama(cfg)
    if name == "embedded":
        return _embedded(cfg)
    if name == "openai":
        return _openai(cfg)
    if name == "none":
        return NoneLLM()
    return _auto(cfg)


def get_llm(cfg: LLMConfig | None = None) -> LLM:
    """The provider for ``cfg``, resolved once per process and cached (same config, same
    instance). Never raises for a missing server or model: ``generate`` raises
    LLMUnavailable instead. An unknown provider name is a ConfigError."""
    cfg = cfg or LLMConfig()
    key = (dataclasses.astuple(cfg), os.environ.get("OLLAMA_HOST", ""))
    with _cache_lock:
        llm = _cache.get(key)
        if llm is None:
            llm = _cache[key] = _resolve(cfg)
            while len(_cache) > MAX_PROVIDERS:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        return llm


def clear_cache() -> None:
    """Forget resolved providers (tests; a config reload). Loaded models stay loaded."""
    with _cache_lock:
        _cache.clear()
