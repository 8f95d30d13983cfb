"""Issue 25: a request must not reconfigure the daemon, nor starve its owner.

Per-request ``config`` takes query-time keys only (``llmc.request_config``), every model
cache is bounded, and the request-config refusals come back the same over the Unix socket
and over TCP.
"""

from __future__ import annotations

import gc
import http.client
import json
import weakref

import pytest

from llmc.daemon.client import try_daemon
from llmc.errors import DaemonError

# Keys that would build a new model or session, reach a host, or read a path.
REFUSED = {
    "embedding.query_prefix": "query: ",
    "embedding.device": "cpu",
    "embedding.runtime": "torch",
    "embedding.code_model": "/tmp/elsewhere",
    "llm.ollama_host": "http://198.51.100.7:11434",
    "llm.provider": "ollama",
    "rerank.model": "cross-encoder/other",
    "search.ranker_model": "/tmp/ranker",
    "search.torch_threads": 64,
    "learn.tuned_dir": "/tmp/tuned",
    "daemon.tcp": True,
}


def _tcp_post(daemon, path: str, payload: dict) -> tuple[int, dict]:
    port = daemon.status()["endpoints"]["tcp"]["port"]
    token = (daemon.root / ".llmc" / "daemon.token").read_text().strip()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        body = json.dumps(payload)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_request_config_refuses_daemon_settings(shared_daemon, key):
    payload = {"query": "session", "config": {key: REFUSED[key]}}
    with pytest.raises(DaemonError) as e:
        shared_daemon.call("search", payload)
    assert e.value.status == 400 and e.value.code == "config_refused"
    assert key in str(e.value)
    status, body = _tcp_post(shared_daemon, "/v1/search", payload)
    assert status == 400 and body["error"]["code"] == "config_refused"
    assert key in body["error"]["message"]


def test_request_config_values_are_checked(shared_daemon):
    for key, value in (
        ("search.k", 0),
        ("search.bm25_depth", 10**9),
        ("search.fusion", "nope"),
        ("search.dense", "yes"),
        ("expand.edge_types", ["calls", "everything"]),
        ("hyde.n", 50),
    ):
        with pytest.raises(DaemonError) as e:
            shared_daemon.search("session", config={key: value})
        assert e.value.status == 400 and e.value.code == "bad_request", key
        assert key in str(e.value)


def test_the_daemons_own_value_of_a_refused_key_is_no_change(shared_daemon):
    # `llmc search` sends its whole config: a daemon setting equal to the daemon's own passes.
    own = {"llm.ollama_host": "", "embedding.query_prefix": "", "search.dense": False}
    out = shared_daemon.search("session", config=own)
    assert all(not s.startswith("dense") for r in out["results"] for s in r["sources"])


def test_a_client_with_another_model_setting_works_in_process(shared_daemon):
    payload = {"query": "session", "config": {"embedding.query_prefix": "query: "}}
    assert try_daemon(shared_daemon.root, "search", payload) is None  # not an error


def test_many_distinct_request_configs_keep_the_caches_bounded(shared_daemon):
    for i in range(12):
        config = {"search.rrf_k": 10 + i, "search.bm25_weight": 1.0 + i / 100}
        assert shared_daemon.search("session store", config=config)["results"]
    caches = shared_daemon.status()["caches"]
    assert caches["searchers"] <= caches["searchers_max"] == 4
    assert caches["embedders"] <= caches["embedders_max"] == 4


def test_embedders_are_a_bounded_lru_and_evicted_ones_are_freed(monkeypatch):
    from llmc.models import embedder as mod

    class Fake:
        def __init__(self, *args):
            self.args = args

    monkeypatch.setattr(mod, "SentenceTransformerEmbedder", Fake)
    mod.get_embedder.cache_clear()
    try:
        first = weakref.ref(mod.get_embedder("default", query_prefix="p0"))
        for i in range(1, 3 * mod.MAX_EMBEDDERS):
            mod.get_embedder("default", query_prefix=f"p{i}")
        assert mod.get_embedder.cache_info().currsize == mod.MAX_EMBEDDERS
        gc.collect()
        assert first() is None  # evicted and gone
    finally:
        mod.get_embedder.cache_clear()


def test_rerankers_are_a_bounded_lru(monkeypatch):
    from llmc.models import reranker as mod

    monkeypatch.setattr(mod, "CrossEncoderReranker", lambda *args: object())
    mod.get_reranker.cache_clear()
    try:
        for i in range(3 * mod.MAX_MODELS):
            mod.get_reranker(f"model-{i}")
        assert mod.get_reranker.cache_info().currsize == mod.MAX_MODELS
    finally:
        mod.get_reranker.cache_clear()
