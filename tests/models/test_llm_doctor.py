"""`llmc doctor` (and --json) through click's CliRunner."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.models.llm import clear_cache


@pytest.fixture(autouse=True)
def _dead_ollama(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.setenv("LLMC_LLM__OLLAMA_HOST", f"http://127.0.0.1:{port}")
    clear_cache()
    yield f"http://127.0.0.1:{port}"
    clear_cache()


def test_doctor_json(tmp_path, _dead_ollama):
    result = CliRunner().invoke(main, ["doctor", "--json", "--repo", str(tmp_path)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # stdout is one JSON object, nothing else
    assert report["ok"] is True
    llm = report["llm"]
    assert (llm["provider"], llm["selected"]) == ("auto", "embedded")
    assert llm["model"] == "SmolLM2-135M-Instruct.Q4_1"
    providers = {p["name"]: p for p in llm["providers"]}
    assert list(providers) == ["ollama", "embedded", "openai", "none"]
    assert providers["ollama"]["available"] is False
    assert providers["ollama"]["location"] == _dead_ollama
    assert "not reachable" in providers["ollama"]["detail"]
    assert providers["embedded"]["available"] is True
    assert providers["embedded"]["location"].endswith(".gguf")
    assert providers["embedded"]["version"].startswith("xllamacpp ")
    assert report["device"]["device"] in ("cuda", "mps", "cpu")
    assert report["sqlite_vec"]["ok"] and report["sqlite_vec"]["version"].startswith("v")
    assert report["tree_sitter"]["ok"] and report["tree_sitter"]["version"]


def test_doctor_text(tmp_path):
    result = CliRunner().invoke(main, ["doctor", "--repo", str(tmp_path)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("llm: provider auto -> embedded\n")
    assert "--  ollama qwen2.5-coder:1.5b" in out and "ok  embedded SmolLM2" in out
    for name in ("device", "sqlite_vec", "tree_sitter"):
        assert f"ok  {name}: " in out


def test_doctor_with_provider_none_and_a_bad_provider(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_LLM__PROVIDER", "none")
    report = json.loads(
        CliRunner().invoke(main, ["doctor", "--json", "--repo", str(tmp_path)]).stdout
    )
    assert report["llm"]["selected"] == "none"
    monkeypatch.setenv("LLMC_LLM__PROVIDER", "gpt")
    result = CliRunner().invoke(main, ["doctor", "--json", "--repo", str(tmp_path)])
    assert result.exit_code == 0
    assert "llm.provider must be one of" in json.loads(result.stdout)["llm"]["error"]
