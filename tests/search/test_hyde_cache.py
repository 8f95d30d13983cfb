"""The hypothesis cache: keys, the SQLite file as derived data, hits through the pipeline.

The LLM here is ``ScriptedLLM`` (tests/repo_fixtures.py), so calls can be counted; the
real model runs end to end in test_hyde_pipeline.py."""

from __future__ import annotations

import pytest
from repo_fixtures import ScriptedLLM

import llmc.search.hyde as hyde_mod
from llmc.config import load_config
from llmc.search import Searcher
from llmc.search.hyde.cache import CACHE_NAME, HypothesisCache, cache_key

VAGUE = "how do I get my money back after buying something"
ANSWER = "def refund(receipt_id):\n    return gateway.refund(receipt_id, reason='customer')"


def test_cache_key_covers_query_model_and_prompt_version():
    base = cache_key("q", "embedded:m", "hyde-1", route="code", seed=None)
    assert base == cache_key("q", "embedded:m", "hyde-1", seed=None, route="code")
    assert len({
        base,
        cache_key("q2", "embedded:m", "hyde-1", route="code", seed=None),
        cache_key("q", "ollama:m", "hyde-1", route="code", seed=None),
        cache_key("q", "embedded:m", "hyde-2", route="code", seed=None),
        cache_key("q", "embedded:m", "hyde-1", route="docs", seed=None),
        cache_key("q", "embedded:m", "hyde-1", route="code", seed=1),
    }) == 6  # fmt: skip


def test_put_then_get(tmp_path):
    cache = HypothesisCache(tmp_path / CACHE_NAME)
    assert cache.get("k") is None
    cache.put("k", "q", "m", "v", "text", 12.5)
    assert cache.get("k") == ("text", 12.5)
    assert HypothesisCache(tmp_path / CACHE_NAME).get("k") == ("text", 12.5)  # persisted


def test_a_broken_cache_is_a_miss_never_an_error(tmp_path):
    path = tmp_path / CACHE_NAME
    path.write_bytes(b"this is not a database" * 100)
    cache = HypothesisCache(path)
    assert cache.get("k") is None
    cache.put("k", "q", "m", "v", "text", 1.0)  # silently not written
    missing = HypothesisCache(tmp_path / "no-such-dir" / CACHE_NAME)
    assert missing.get("k") is None
    missing.put("k", "q", "m", "v", "text", 1.0)
    assert not (tmp_path / "no-such-dir").exists()


@pytest.fixture
def scripted(monkeypatch):
    llm = ScriptedLLM([ANSWER])
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: llm)
    return llm


def _cfg(root, **hyde):
    cfg = load_config(root, {"hyde.intents": "code,docs,mixed", "search.budget_ms": 0})
    for key, value in hyde.items():
        setattr(cfg.hyde, key, value)
    return cfg


def test_second_search_reads_the_hypothesis_from_the_cache(repo_copy, scripted):
    with Searcher(repo_copy, _cfg(repo_copy)) as s:
        first = s.search(VAGUE)
    assert len(scripted.calls) == 1
    assert first.hyde.used and not first.hyde.hypotheses[0].cached
    assert (repo_copy / ".llmc" / CACHE_NAME).is_file()
    with Searcher(repo_copy, _cfg(repo_copy)) as s:  # a new searcher, as a new process
        second = s.search(VAGUE)
    assert len(scripted.calls) == 1  # no second generation
    hyp = second.hyde.hypotheses[0]
    assert hyp.cached and hyp.text == first.hyde.hypotheses[0].text
    assert second.hyde.llm_ms == 0.0
    assert [r.span_id for r in second.results] == [r.span_id for r in first.results]


def test_no_cache_when_switched_off_or_the_prompt_changes(repo_copy, scripted, monkeypatch):
    with Searcher(repo_copy, _cfg(repo_copy)) as s:
        s.search(VAGUE)
    with Searcher(repo_copy, _cfg(repo_copy, cache=False)) as s:
        assert not s.search(VAGUE).hyde.hypotheses[0].cached
    assert len(scripted.calls) == 2
    monkeypatch.setattr(hyde_mod, "PROMPT_VERSION", "hyde-test-next")
    with Searcher(repo_copy, _cfg(repo_copy)) as s:
        assert not s.search(VAGUE).hyde.hypotheses[0].cached
    assert len(scripted.calls) == 3
