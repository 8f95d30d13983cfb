"""The ollama provider against a protocol stand-in.

No package registry ships the ollama server, so these tests start a small HTTP server on
127.0.0.1 (random port) that speaks the parts of ollama's JSON API llmc uses: /api/version,
/api/tags, /api/chat and /api/generate (non-streaming). It is a stand-in for the protocol,
not a model: its answer is "echo: " + the last user message, cut at ``num_predict`` words
and before the first stop sequence, so the tests can see that options arrive. Every request
body is recorded for the assertions. The real model path is covered by the embedded tests.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmc.config import LLMConfig
from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm import (
    EmbeddedLLM,
    OllamaLLM,
    clear_cache,
    get_llm,
    provider_statuses,
    resolve_host,
)

MODEL = "tiny:latest"


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, dict]] = []
        self.models = [MODEL]
        self.delay_s = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _answer(server: StandIn, body: dict, prompt: str) -> tuple[str, str, int]:
    options = body.get("options") or {}
    words = f"echo: {prompt}".split()
    reason = "stop"
    limit = options.get("num_predict")
    if limit is not None and len(words) > limit:
        words, reason = words[:limit], "length"
    text = " ".join(words)
    for stop in options.get("stop") or []:
        if stop in text:
            text, reason = text[: text.index(stop)], "stop"
    return text, reason, len(words)


def _tagged(model: str) -> str:
    return model if ":" in model else f"{model}:latest"


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _send(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)

    def do_GET(self) -> None:
        self.server.requests.append((self.path, {}))
        if self.path == "/api/version":
            self._send(200, {"version": "0.0.0-standin"})
        elif self.path == "/api/tags":
            models = [{"name": m, "model": m, "size": 1, "digest": "0"} for m in self.server.models]
            self._send(200, {"models": models})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body))
        time.sleep(self.server.delay_s)
        if _tagged(body.get("model", "")) not in self.server.models:  # "m" means "m:latest"
            self._send(404, {"error": f"model '{body.get('model')}' not found"})
            return
        common = {"model": body["model"], "created_at": "2025-01-01T00:00:00Z", "done": True}
        if self.path == "/api/chat":
            prompt = body["messages"][-1]["content"]
            text, reason, n = _answer(self.server, body, prompt)
            message = {"role": "assistant", "content": text}
            self._send(
                200,
                {
                    **common,
                    "message": message,
                    "done_reason": reason,
                    "eval_count": n,
                    "prompt_eval_count": len(prompt.split()),
                },
            )
        elif self.path == "/api/generate":
            text, reason, n = _answer(self.server, body, body["prompt"])
            self._send(200, {**common, "response": text, "done_reason": reason, "eval_count": n})
        else:
            self._send(404, {"error": "not found"})


@pytest.fixture
def standin():
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    clear_cache()
    yield
    clear_cache()


def test_generate_sends_model_messages_and_options(standin):
    llm = OllamaLLM(standin.url, MODEL)
    g = llm.generate("find the parser", system="be brief", max_tokens=50, temperature=0.0, seed=7)
    assert g.text == "echo: find the parser"
    assert (g.provider, g.model, g.tokens, g.prompt_tokens) == ("ollama", MODEL, 4, 3)
    assert g.finish_reason == "stop" and g.latency_ms >= 0
    path, body = standin.requests[-1]
    assert path == "/api/chat" and body["model"] == MODEL and body["stream"] is False
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "find the parser"},
    ]
    assert body["options"] == {"num_predict": 50, "temperature": 0.0, "seed": 7}


def test_max_tokens_and_stop_are_passed_as_ollama_options(standin):
    llm = OllamaLLM(standin.url, MODEL)
    g = llm.generate("one two three four five", max_tokens=3)
    assert g.text == "echo: one two" and g.finish_reason == "length"
    g = llm.generate("alpha beta gamma", stop=["gamma", "zeta"])
    assert g.text == "echo: alpha beta " and g.finish_reason == "stop"
    assert standin.requests[-1][1]["options"]["stop"] == ["gamma", "zeta"]
    assert standin.requests[-1][1]["messages"] == [{"role": "user", "content": "alpha beta gamma"}]


def test_config_defaults_apply_when_arguments_are_omitted(standin):
    cfg = LLMConfig(provider="ollama", ollama_host=standin.url, ollama_model=MODEL)
    cfg.max_tokens, cfg.temperature = 12, 0.4
    get_llm(cfg).generate("hi")
    assert standin.requests[-1][1]["options"] == {"num_predict": 12, "temperature": 0.4}


def test_missing_model_is_one_line_with_the_pull_command(standin):
    with pytest.raises(LLMUnavailable) as e:
        OllamaLLM(standin.url, "absent:7b").generate("hi")
    assert "ollama pull absent:7b" in str(e.value) and "\n" not in str(e.value)


def test_slow_server_raises_timeout(standin):
    """A server that answers after 3 s: a client that ignored the 0.2 s timeout would
    get that answer instead of LLMTimeout."""
    standin.delay_s = 3.0
    with pytest.raises(LLMTimeout, match="no answer within 0.2s"):
        OllamaLLM(standin.url, MODEL).generate("hi", timeout=0.2)


def test_unreachable_server_is_llm_unavailable(free_port):
    with pytest.raises(LLMUnavailable, match="not reachable") as e:
        OllamaLLM(f"http://127.0.0.1:{free_port}", MODEL).generate("hi", timeout=2)
    assert not isinstance(e.value, LLMTimeout)


def test_auto_prefers_a_reachable_ollama_with_the_model(standin):
    cfg = LLMConfig(ollama_host=standin.url, ollama_model="tiny")  # tiny means tiny:latest
    llm = get_llm(cfg)
    assert isinstance(llm, OllamaLLM) and llm.host == standin.url
    assert get_llm(cfg) is llm  # resolved once, cached
    assert llm.generate("ok").text == "echo: ok"
    paths = [p for p, _ in standin.requests]
    assert paths[:2] == ["/api/version", "/api/tags"]


def test_auto_skips_ollama_without_the_model(standin, caplog):
    standin.models = ["other:1b"]
    caplog.set_level(logging.INFO, logger="llmc")
    llm = get_llm(LLMConfig(ollama_host=standin.url, ollama_model=MODEL))
    assert isinstance(llm, EmbeddedLLM)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("llmc")]
    assert lines == [
        f"llm: ollama at {standin.url} reachable, but no model {MODEL} "
        f"(ollama pull {MODEL}); trying the embedded model"
    ]


def test_ollama_host_env_is_used_when_config_leaves_it_empty(standin, monkeypatch):
    host_port = standin.url.removeprefix("http://")
    monkeypatch.setenv("OLLAMA_HOST", host_port)
    llm = get_llm(LLMConfig(ollama_model=MODEL))
    assert isinstance(llm, OllamaLLM) and llm.host == standin.url
    # the config wins over the environment
    assert resolve_host("http://10.0.0.1:1", {"OLLAMA_HOST": host_port}) == "http://10.0.0.1:1"


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        (":9999", "http://127.0.0.1:9999"),
        ("box:8080", "http://box:8080"),
        ("https://box.example/ollama/", "https://box.example/ollama"),
    ],
)
def test_resolve_host_accepts_ollamas_shorthands(raw, url):
    assert resolve_host("", {"OLLAMA_HOST": raw}) == url


def test_doctor_statuses_show_version_and_models(standin):
    cfg = LLMConfig(ollama_host=standin.url, ollama_model=MODEL)
    ollama, embedded, openai, none = provider_statuses(cfg)
    assert (ollama.name, ollama.available, ollama.version) == ("ollama", True, "0.0.0-standin")
    assert ollama.models == (MODEL,) and ollama.location == standin.url
    assert embedded.name == "embedded" and none.available
    assert (openai.name, openai.available) == ("openai", False)
    assert openai.detail == "not configured (llm.base_url)"


def test_standin_replies_parse_with_the_official_client(standin):
    """Guards the stand-in's fidelity: ollama's own client parses both endpoints."""
    from ollama import Client

    client = Client(host=standin.url)
    chat = client.chat(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert chat.message.content == "echo: hi" and chat.done
    gen = client.generate(model=MODEL, prompt="a b c", options={"num_predict": 2})
    assert gen.response == "echo: a" and gen.done_reason == "length"


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
