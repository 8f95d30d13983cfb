"""Servers speaking the OpenAI protocol on 127.0.0.1 for the tests.

``llama_server``: the real one, llama.cpp's HTTP server started in-process by xllamacpp with
the shipped SmolLM2 GGUF (chat, or embeddings in embedding mode). ``Standin``: a tiny
in-suite server only for what a real server will not do on demand: be slow, answer garbage,
change its vectors' dimension; ``dead_url``: nothing listens there.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def llama_server(embedding: bool = False, api_key: str = "") -> tuple[Any, str]:
    """(the server object, its base URL): keep the object alive while it is used."""
    import httpx
    import xllamacpp

    from llmc.models.llm import default_model_path

    params = xllamacpp.CommonParams()
    params.model.path = str(default_model_path())
    params.n_ctx = 1024
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.verbosity = -1
    params.hostnames = ["127.0.0.1"]
    params.port = port = free_port()
    if api_key:
        params.api_keys = [api_key]
    if embedding:  # mean pooling: one vector per input, as /v1/embeddings answers
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    server = xllamacpp.Server(params)
    url = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    for _ in range(100):  # the HTTP thread starts beside the model
        try:
            if httpx.get(f"{url}/models", headers=headers, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    return server, url


def _vector(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i % len(digest)] / 255.0 + 0.01 for i in range(dim)]


class Standin:
    """``mode``: ok (chat answers "[1, 2]" and embeddings of ``dim`` from a hash of the text;
    with ``upstream``, a real server's answers passed through), slow (sleeps ``delay``
    first), garbage (not JSON), shape (JSON of the wrong shape), error (HTTP 500 with an
    OpenAI error object). ``seen`` records request headers."""

    def __init__(self, dim: int = 8, upstream: str = ""):
        self.mode = "ok"
        self.upstream = upstream
        self.dim = dim
        self.delay = 2.0
        self.seen: list[dict[str, str]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, body: Any) -> None:
                standin.seen.append(dict(self.headers))
                if standin.mode == "slow":
                    time.sleep(standin.delay)
                if standin.mode == "error":
                    self._send(500, json.dumps({"error": {"message": "model\nexploded"}}))
                elif standin.mode == "garbage":
                    self._send(200, "<html>\x00not json")
                elif standin.mode == "shape":
                    self._send(200, json.dumps({"data": "nope", "choices": []}))
                else:
                    self._send(200, json.dumps(body))

            def _send(self, code: int, text: str) -> None:
                data = text.encode("utf-8", "replace")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def do_GET(self) -> None:  # noqa: N802
                self._answer({"object": "list", "data": [{"id": "standin-1"}]})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) or b"{}"
                request = json.loads(raw)
                if standin.upstream and standin.mode == "ok":  # the real server answers
                    import httpx

                    tail = self.path.split("/v1", 1)[-1]
                    answer = httpx.post(standin.upstream + tail, content=raw, timeout=60)
                    self._answer(answer.json())
                elif self.path.endswith("/embeddings"):
                    texts = request.get("input") or []
                    texts = [texts] if isinstance(texts, str) else texts
                    rows = [
                        {"object": "embedding", "index": i, "embedding": _vector(t, standin.dim)}
                        for i, t in enumerate(texts)
                    ]
                    self._answer({"object": "list", "data": rows, "model": request.get("model")})
                else:
                    message = {"role": "assistant", "content": "[1, 2]"}
                    self._answer(
                        {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                         "model": "standin-1", "usage": {"completion_tokens": 3}}
                    )  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
