"""Provider selection: auto's fallback order (ollama -> embedded -> none), none, caching."""

from __future__ import annotations

import logging
import socket

import pytest
from waiting import returns

from llmc.config import LLMConfig, load_config
from llmc.errors import ConfigError, LlmcError, LLMUnavailable
from llmc.models.llm import (
    EmbeddedLLM,
    NoneLLM,
    OllamaLLM,
    clear_cache,
    get_llm,
)


@pytest.fixture
def dead_host() -> str:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    clear_cache()
    yield
    clear_cache()


def _llmc_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("llmc")]


def test_unreachable_ollama_falls_back_to_embedded_with_one_line(dead_host, caplog):
    caplog.set_level(logging.INFO, logger="llmc")
    llm = get_llm(LLMConfig(ollama_host=dead_host))
    assert isinstance(llm, EmbeddedLLM) and llm.model == "SmolLM2-135M-Instruct.Q4_1"
    lines = _llmc_lines(caplog)
    assert len(lines) == 1
    assert lines[0].startswith(f"llm: ollama at {dead_host} not reachable: cannot connect")
    assert lines[0].endswith("trying the embedded model")
    # and it really generates
    assert llm.generate("Say hi.", max_tokens=4).provider == "embedded"


def test_nothing_available_falls_back_to_none(dead_host, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="llmc")
    missing = tmp_path / "nope.gguf"
    llm = get_llm(LLMConfig(ollama_host=dead_host, embedded_model=str(missing)))
    assert isinstance(llm, NoneLLM) and llm.provider == "none"
    lines = _llmc_lines(caplog)
    assert len(lines) == 2 and "trying the embedded model" in lines[0]
    assert lines[1] == (
        f"llm: no LLM available (embedded: model file not found: {missing}); "
        "LLM features are skipped"
    )
    with pytest.raises(LLMUnavailable, match="no LLM: ollama not reachable") as e:
        llm.generate("hi")
    assert "\n" not in str(e.value)


def test_a_silent_ollama_is_given_up_after_the_probe_timeout():
    """A host that accepts connections and never answers: the probe gives up after
    ``probe_timeout_s`` instead of hanging (this check would hang for ever)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes handshakes; nobody ever reads or answers
        host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cfg = LLMConfig(ollama_host=host, probe_timeout_s=0.5)
        llm = returns(lambda: get_llm(cfg), "get_llm with a silent ollama")
    assert not isinstance(llm, OllamaLLM)


def test_none_provider_never_generates():
    llm = get_llm(LLMConfig(provider="none"))
    assert isinstance(llm, NoneLLM)
    with pytest.raises(LLMUnavailable, match="llm.provider = none"):
        llm.generate("hi")


def test_explicit_providers_do_not_probe_or_load(dead_host, tmp_path):
    llm = get_llm(LLMConfig(provider="ollama", ollama_host=dead_host))
    assert isinstance(llm, OllamaLLM)  # the error comes at generate time
    with pytest.raises(LLMUnavailable, match="not reachable"):
        llm.generate("hi", timeout=2)
    broken = get_llm(LLMConfig(provider="embedded", embedded_model=str(tmp_path / "x.gguf")))
    assert isinstance(broken, EmbeddedLLM)
    with pytest.raises(LLMUnavailable, match="model file not found"):
        broken.generate("hi")


def test_unknown_provider_is_a_config_error():
    with pytest.raises(ConfigError, match="llm.provider must be one of auto, ollama"):
        get_llm(LLMConfig(provider="anthropic"))


def test_resolved_once_per_config(dead_host):
    cfg = LLMConfig(ollama_host=dead_host)
    assert get_llm(cfg) is get_llm(LLMConfig(ollama_host=dead_host))
    assert get_llm(LLMConfig(provider="none")) is not get_llm(cfg)


def test_llm_section_in_config(tmp_path, isolated_config):
    user = isolated_config / "llmc" / "config.toml"  # the LLM is the user's choice
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[llm]\nprovider = "embedded"\nmax_tokens = 64\n')
    cfg = load_config(tmp_path, environ={"LLMC_LLM__TIMEOUT_S": "2.5"})
    assert (cfg.llm.provider, cfg.llm.max_tokens, cfg.llm.timeout_s) == ("embedded", 64, 2.5)
    assert cfg.sources["llm.timeout_s"] == "env LLMC_LLM__TIMEOUT_S"
    with pytest.raises(LlmcError, match="llm.n_ctx must be an integer"):
        load_config(tmp_path, environ={"LLMC_LLM__N_CTX": "big"})
