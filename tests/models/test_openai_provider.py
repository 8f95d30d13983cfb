"""The ``openai`` LLM provider and ``openai:<model>`` embedder against a REAL server speaking
the protocol (llama.cpp's HTTP server with the shipped SmolLM2, started in-process by
xllamacpp on 127.0.0.1), and a tiny stand-in only for the failures a real server will not
produce on demand (slow, garbage, a changed dimension). The key is named, never shown."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from openai_standin import Standin, dead_url, llama_server

from llmc.cli import main
from llmc.config import EmbeddingConfig, LLMConfig
from llmc.errors import LLMTimeout, LLMUnavailable, ModelError
from llmc.models.embedder import embedder_from_config, resolved_model_id
from llmc.models.llm import OpenAILLM, clear_cache, get_llm, provider_statuses
from llmc.models.openai_embedder import OpenAIEmbedder
from llmc.models.openai_http import ServerError, normalize_base_url

KEY_VAR = "LLMC_TEST_OPENAI_KEY"
KEY = "sk-test-0123456789abcdef"  # what the real server requires; never in any output


@pytest.fixture(scope="module")
def chat():
    server, url = llama_server(api_key=KEY)
    yield url
    del server


@pytest.fixture(scope="module")
def embeddings():
    server, url = llama_server(embedding=True)
    yield url
    del server


@pytest.fixture
def standin():
    s = Standin(dim=8)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _fresh_providers():
    clear_cache()
    yield
    clear_cache()


def test_base_urls_are_normalized_and_checked() -> None:
    assert normalize_base_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert normalize_base_url("127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert normalize_base_url("https://api.example.com/openai/v1") == (
        "https://api.example.com/openai/v1"
    )
    for bad in ("", "ftp://host/v1", "http://user:secret@host/v1"):
        with pytest.raises(ServerError):
            normalize_base_url(bad)


def test_the_real_server_answers_a_chat_with_the_key_from_the_named_variable(
    chat, monkeypatch
) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    llm = get_llm(LLMConfig(provider="openai", base_url=chat, api_key_env=KEY_VAR))
    assert isinstance(llm, OpenAILLM) and KEY not in repr(llm)
    g = llm.generate("Say hello.", system="You are terse.", max_tokens=8, timeout=60)
    assert g.provider == "openai" and g.text.strip() and g.latency_ms > 0
    assert g.model.endswith(".gguf") and g.tokens and g.tokens <= 8
    assert llm.model.endswith(".gguf")  # the server's first model, asked once


def test_a_missing_or_wrong_key_is_one_line_naming_the_variable(chat, monkeypatch) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)
    llm = OpenAILLM(chat, "m", KEY_VAR)
    with pytest.raises(LLMUnavailable, match=f"{KEY_VAR} \\(api_key_env\\) is not set"):
        llm.generate("hi", timeout=30)
    monkeypatch.setenv(KEY_VAR, "sk-wrong-key")
    with pytest.raises(LLMUnavailable, match="HTTP 401") as e:
        llm.generate("hi", timeout=30)
    assert "sk-wrong-key" not in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("mode", "error", "says"),
    [
        ("down", LLMUnavailable, "not reachable"),
        ("slow", LLMTimeout, "no answer within 0.3s"),
        ("garbage", LLMUnavailable, "the answer is not JSON"),
        ("shape", LLMUnavailable, "not an OpenAI-compatible chat answer"),
        ("error", LLMUnavailable, "HTTP 500: model exploded"),
    ],
)
def test_a_failing_server_is_one_line(standin, mode, error, says) -> None:
    url = dead_url() if mode == "down" else standin.url
    standin.mode = mode
    with pytest.raises(error, match=says) as e:
        OpenAILLM(url, "standin-1").generate("hi", timeout=0.3)
    assert "\n" not in str(e.value) and str(e.value).startswith("openai: ")


def test_auto_prefers_a_configured_server_that_answers(standin) -> None:
    assert get_llm(LLMConfig(base_url=standin.url, ollama_host=dead_url())).provider == "openai"
    clear_cache()
    down = get_llm(LLMConfig(base_url=dead_url(), ollama_host=dead_url()))
    assert down.provider in ("embedded", "none")
    statuses = {s.name: s for s in provider_statuses(LLMConfig(base_url=standin.url))}
    assert statuses["openai"].available and statuses["openai"].models == ("standin-1",)
    wrong = provider_statuses(LLMConfig(base_url=standin.url, openai_model="other"))[2]
    assert not wrong.available and "does not list other" in wrong.detail


def test_real_embeddings_are_normalized_and_name_their_space(embeddings) -> None:
    cfg = EmbeddingConfig(code_model="openai:smollm2", base_url=embeddings)
    embedder = embedder_from_config(cfg, "code")
    assert isinstance(embedder, OpenAIEmbedder)
    port = embeddings.split(":")[2].split("/")[0]
    assert embedder.model_id == resolved_model_id(cfg, "code") == f"openai:smollm2@127.0.0.1:{port}"
    vectors = embedder.embed_passages(["def refund(order): ...", "shipping costs"])
    assert vectors.shape == (2, embedder.dim) and embedder.dim > 100
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_queries(["give the money back"])
    assert query.shape == (1, embedder.dim) and query.dtype == np.float32


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("down", "not reachable"),
        ("slow", "no answer within"),
        ("garbage", "not JSON"),
        ("shape", "not an OpenAI-compatible embeddings answer"),
    ],
)
def test_embedding_failures_are_one_line_model_errors(standin, mode, says) -> None:
    url = dead_url() if mode == "down" else standin.url
    embedder = OpenAIEmbedder("openai:standin-1", url, timeout_s=0.3)
    standin.mode = mode
    with pytest.raises(ModelError, match=says) as e:
        embedder.embed_queries(["q"])
    assert "\n" not in str(e.value)


def test_a_changed_dimension_is_refused(standin) -> None:
    embedder = OpenAIEmbedder("openai:standin-1", standin.url)
    assert embedder.dim == 8
    standin.dim = 12
    with pytest.raises(ModelError, match="12-dimensional vectors, 8 before"):
        embedder.embed_queries(["q"])


def test_doctor_probes_the_configured_servers(standin, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMC_LLM__PROVIDER", "openai")
    monkeypatch.setenv("LLMC_LLM__BASE_URL", standin.url)
    monkeypatch.setenv("LLMC_LLM__API_KEY_ENV", KEY_VAR)
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("LLMC_EMBEDDING__CODE_MODEL", "openai:standin-1")
    monkeypatch.setenv("LLMC_EMBEDDING__BASE_URL", dead_url())
    result = CliRunner().invoke(main, ["doctor", "--repo", str(tmp_path)])
    assert KEY not in result.output
    assert f"ok  openai standin-1 ({standin.url}): reachable, key from ${KEY_VAR}" in result.output
    assert "--  dense.code: openai:standin-1: http://127.0.0.1:" in result.output
    assert "not reachable" in result.output and "ok  dense.doc: default" in result.output
    assert standin.seen[0]["Authorization"] == f"Bearer {KEY}"  # sent, never shown
    report = json.loads(
        CliRunner().invoke(main, ["doctor", "--json", "--repo", str(tmp_path)]).stdout
    )
    assert report["llm"]["selected"] == "openai" and KEY not in json.dumps(report)
    shown = CliRunner().invoke(main, ["config", "--repo", str(tmp_path)]).output
    assert KEY_VAR in shown and KEY not in shown
