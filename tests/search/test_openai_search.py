"""Search through OpenAI-compatible servers: HyDE and the LLM rerank from a REAL server
(llama.cpp's, started in-process by xllamacpp with the shipped SmolLM2), and an index whose
vectors come from the real server's /v1/embeddings (through a pass-through stand-in that
fails on demand). A server that is down, slow or answers garbage
costs one warning line and the vectors of that query, never the answer or a traceback."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from search_fixture_files import write_repo

from llmc.cli import main
from llmc.config import user_config_path
from llmc.models.llm import clear_cache

_spec = importlib.util.spec_from_file_location(
    "openai_standin", Path(__file__).parents[1] / "models" / "openai_standin.py"
)
standin_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standin_module)

VAGUE = "how do I get my money back after buying something"


@pytest.fixture(scope="module")
def chat():
    server, url = standin_module.llama_server()
    yield url
    del server


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    clear_cache()
    yield
    clear_cache()


def _search(runner, root, *args, env=None):
    result = runner.invoke(main, ["search", "--repo", str(root), *args], env=env)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.output


def test_hyde_and_llm_rerank_through_the_real_server(runner, indexed_repo, chat) -> None:
    env = {"LLMC_LLM__PROVIDER": "openai", "LLMC_LLM__BASE_URL": chat}
    out = json.loads(_search(runner, indexed_repo, "--json", "--explain", "--hyde", VAGUE, env=env))
    hyde = out["hyde"]
    assert hyde["used"] and hyde["model"].startswith("openai:"), out["warnings"]
    assert hyde["hypotheses"][0]["text"] and not [w for w in out["warnings"] if "hyde" in w]
    text = _search(runner, indexed_repo, "--explain", "--llm-rerank", "--no-hyde", VAGUE, env=env)
    assert "asked for (llm_rerank.always" in text and "ms)" in text


def test_a_down_llm_server_is_one_warning_and_plain_retrieval(runner, indexed_repo) -> None:
    env = {"LLMC_LLM__PROVIDER": "openai", "LLMC_LLM__BASE_URL": standin_module.dead_url()}
    out = _search(runner, indexed_repo, "--hyde", VAGUE, env=env)
    lines = [line for line in out.splitlines() if "hyde" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: hyde skipped: openai: ")
    assert "not reachable" in lines[0] and " 1. " in out


@pytest.fixture(scope="module")
def embeddings():
    server, url = standin_module.llama_server(embedding=True)
    yield url
    del server


@pytest.fixture
def served_repo(tmp_path, runner, embeddings):
    """The shop repo indexed with both embedders on the real server's /v1/embeddings,
    through a stand-in that passes its answers on until a test makes it fail."""
    standin = standin_module.Standin(upstream=embeddings)
    root = write_repo(tmp_path / "shop")
    # Models and the server's URL come from the user's config (a repository's llmc.toml may
    # name neither).
    user_config_path().parent.mkdir(parents=True, exist_ok=True)
    user_config_path().write_text(
        '[embedding]\ncode_model = "openai:standin-1"\ndocs_model = "openai:standin-1"\n'
        f'base_url = "{standin.url}"\n',
        encoding="utf-8",
    )
    result = runner.invoke(main, ["index", str(root), "-q"])
    assert result.exit_code == 0, result.output
    yield root, standin
    standin.close()


def test_an_index_from_a_server_and_every_way_it_can_fail_at_query_time(
    runner, served_repo
) -> None:
    root, standin = served_repo
    status = json.loads(runner.invoke(main, ["status", "--json", "--repo", str(root)]).stdout)
    port = standin.url.split(":")[2].split("/")[0]
    assert status["models"]["code"] == f"openai:standin-1@127.0.0.1:{port} (576d)"
    assert status["vectors"]["embedded"] == status["vectors"]["total"] > 0
    ok = json.loads(_search(runner, root, "--json", "refund the payment"))
    assert ok["results"] and not ok["warnings"]
    assert any("dense" in s for r in ok["results"] for s in r["sources"])
    for mode in ("garbage", "shape"):  # slow: tests/models/test_openai_provider.py
        standin.mode = mode
        out = json.loads(_search(runner, root, "--json", "refund the payment"))
        (warning,) = out["warnings"]
        assert warning.endswith("this query is ranked without vectors"), warning
        assert out["results"] and not any(
            "dense" in s for r in out["results"] for s in r["sources"]
        )
    standin.mode = "ok"
    again = json.loads(_search(runner, root, "--json", "refund the payment"))
    assert again["results"] == ok["results"] and not again["warnings"]  # nothing was lost
    standin.close()
    down = _search(runner, root, "refund the payment")
    assert "not reachable" in down and "ranked without vectors" in down and " 1. " in down
