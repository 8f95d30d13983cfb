"""Issue 25: a request must not reconfigure the daemon, nor starve its owner.

Per-request ``config`` takes query-time keys only (``llmc.request_config``), every model
cache is bounded, and the request-config refusals come back the same over the Unix socket
and over TCP.
"""

from __future__ import annotations

import gc
import http.client
import json
import socket
import time
import weakref

import pytest
from click.testing import CliRunner
from daemon_helpers import (
    FILES,
    child_env,
    llmc,
    make_git_repo,
    raw_http,
    start_daemon,
    stop_daemon,
)
from waiting import HANG_S

from llmc.cli import main
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


# -- connection pools ---------------------------------------------------------------------------
def _read_some(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    try:
        return sock.recv(65536)
    except (TimeoutError, ConnectionResetError):
        return b""


def test_idle_tcp_connections_do_not_starve_the_unix_socket(shared_daemon):
    port = shared_daemon.status()["endpoints"]["tcp"]["port"]
    held: list[socket.socket] = []
    try:
        for _ in range(40):  # another local user, no token, sending nothing
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        # The owner's Unix socket answers, from the library and from the CLI.
        assert shared_daemon.status()["ready"]
        out = CliRunner().invoke(main, ["daemon", "status", "--repo", str(shared_daemon.root)])
        assert out.exit_code == 0, out.output
        assert "too many connections" not in out.output
        # TCP connections without a token share a small pool: the rest were refused.
        refused = sum(b" 503 " in _read_some(s, 0.5) for s in held)
        assert refused >= 40 - 8
    finally:
        for s in held:
            s.close()


def test_tcp_without_the_token_is_closed_after_its_answer(shared_daemon):
    port = shared_daemon.status()["endpoints"]["tcp"]["port"]
    token = (shared_daemon.root / ".llmc" / "daemon.token").read_text().strip()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        answer = b""
        while chunk := _read_some(s, 10):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 401") and b"connection: close" in answer.lower()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # kept alive with the token
    try:
        for _ in range(3):
            conn.request("GET", "/v1/health", headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["ok"]
    finally:
        conn.close()


# -- MCP event streams ----------------------------------------------------------------------------
STREAM_S = 2.0


@pytest.fixture(scope="module")
def stream_daemon(tmp_path_factory):
    """A daemon whose MCP event streams live STREAM_S seconds (a test-only setting)."""
    root = make_git_repo(tmp_path_factory.mktemp("sse") / "repo", FILES)
    env = child_env(tmp_path_factory.mktemp("sse-xdg"), LLMC_TEST_EVENT_STREAM_S=str(STREAM_S))
    try:
        yield start_daemon(root, env)
    finally:
        stop_daemon(root, env)


def _open_stream(sock_path) -> tuple[socket.socket, bytes]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock_path))
    s.sendall(
        b"GET /mcp HTTP/1.1\r\nHost: llmc\r\nAccept: text/event-stream\r\n"
        b"Mcp-Protocol-Version: 2025-06-18\r\n\r\n"
    )
    head = _read_some(s, 30)
    if head.startswith(b"HTTP/1.1 503"):  # a whole JSON answer: its body may come apart
        while not head.endswith(b"}") and (chunk := _read_some(s, 10)):
            head += chunk
    return s, head


def test_event_streams_are_bounded_in_number_and_lifetime(stream_daemon):
    streams: list[socket.socket] = []
    try:
        for _ in range(4):
            s, head = _open_stream(stream_daemon.sock)
            streams.append(s)
            assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head
        s, head = _open_stream(stream_daemon.sock)
        streams.append(s)
        assert head.startswith(b"HTTP/1.1 503") and b"event streams" in head
        # Everything else still works while four streams are open.
        assert stream_daemon.status()["ready"]
        assert stream_daemon.search("session store")["results"]
        # Each stream ends (its last chunk) after its lifetime; then a new one opens.
        for s in streams[:4]:
            rest = b""
            deadline = time.monotonic() + STREAM_S + HANG_S
            while not rest.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
                chunk = _read_some(s, 1.0)
                rest += chunk
            assert rest.endswith(b"0\r\n\r\n"), rest[-200:]
        s, head = _open_stream(stream_daemon.sock)
        streams.append(s)
        assert head.startswith(b"HTTP/1.1 200")
    finally:
        for s in streams:
            s.close()


# -- low findings ---------------------------------------------------------------------------------
def _tcp_raw(port: int, head: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode("latin-1"))
        answer = b""
        while chunk := _read_some(s, 10):
            answer += chunk
        return answer


def test_tcp_checks_host_and_refuses_any_origin(shared_daemon):
    port = shared_daemon.status()["endpoints"]["tcp"]["port"]
    token = (shared_daemon.root / ".llmc" / "daemon.token").read_text().strip()
    auth = f"Authorization: Bearer {token}\r\n"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        answer = _tcp_raw(port, f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    for extra in (
        f"Host: evil.example:{port}\r\n",  # DNS rebinding: a browser names its own host
        "Host: 127.0.0.1\r\n",
        f"Host: 127.0.0.1:{port}\r\nOrigin: \r\n",  # an empty Origin is still a browser
        f"Host: 127.0.0.1:{port}\r\nOrigin: null\r\n",
    ):
        answer = _tcp_raw(port, f"GET /v1/health HTTP/1.1\r\n{extra}{auth}\r\n")
        assert answer.startswith(b"HTTP/1.1 403"), (extra, answer[:200])
    answer = _tcp_raw(port, f"GET /v1/health HTTP/1.0\r\n{auth}\r\n")  # no Host at all
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]


def test_a_deeply_nested_body_is_a_400(shared_daemon):
    nested = b'{"query": "x", "config": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    head = f"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: {len(nested)}\r\n\r\n"
    status, body = raw_http(shared_daemon.sock, head.encode() + nested)
    assert status == 400 and body["error"]["code"] == "bad_json", body


@pytest.mark.parametrize(
    "head",
    [
        b"GET /v1/health HTTP/1.0\r\n\r\n",  # no Host
        b"GET /v1/health HTTP/1.1\r\nHost: a/b?c#d@e\r\nConnection: close\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: x@y\r\nConnection: close\r\n\r\n",
    ],
)
def test_unix_socket_routes_by_the_request_path_alone(shared_daemon, head):
    status, body = raw_http(shared_daemon.sock, head)
    assert status == 200 and body["ok"], body


def test_a_reindex_reason_cannot_forge_log_lines(shared_daemon):
    forged = "2026-01-01 00:00:00,000 WARNING llmc.daemon.server: forged"
    out = shared_daemon.call("reindex", {"reason": f"api\n{forged}", "wait": True})
    assert out["done"]
    log = (shared_daemon.root / ".llmc" / "daemon.log").read_text(errors="replace")
    assert "api\\n2026-01-01" in log
    assert not any(line.startswith(forged) for line in log.splitlines())


def test_daemon_start_on_a_busy_port_is_one_line(tmp_path, daemon_env):
    root = make_git_repo(tmp_path / "repo", {"a.py": "def f():\n    return 1\n"})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for command in (("daemon", "start"), ("daemon", "run", "--no-watch")):
            out = llmc(*command, "--tcp", "--port", port, "--repo", str(root), env=daemon_env,
                       check=False)  # fmt: skip
            assert out.returncode == 1, out.stderr
            assert "Traceback" not in out.stderr, out.stderr
            errors = [line for line in out.stderr.splitlines() if not line[:4].isdigit()]
            assert len(errors) == 1 and "cannot listen on 127.0.0.1" in errors[0], out.stderr
    stop_daemon(root, daemon_env)


def test_a_regular_file_named_llmc_is_one_line(tmp_path, daemon_env):
    root = make_git_repo(tmp_path / "repo", {"a.py": "def f():\n    return 1\n"})
    (root / ".llmc").write_text("not a directory\n")
    for command in (("daemon", "start"), ("daemon", "run"), ("hooks", "install")):
        out = llmc(*command, "--repo", str(root), env=daemon_env, check=False)
        assert out.returncode == 1, (command, out.stderr)
        assert "Traceback" not in out.stderr, out.stderr
        errors = [line for line in out.stderr.splitlines() if not line[:4].isdigit()]
        assert len(errors) == 1 and ".llmc" in errors[0], out.stderr


def test_the_docs_list_exactly_the_request_config_keys():
    import dataclasses
    from pathlib import Path

    from llmc.config import Config
    from llmc.request_config import QUERY_KEYS

    doc = (Path(__file__).parents[2] / "docs" / "daemon-api.md").read_text(encoding="utf-8")
    limits = doc[doc.index("**What a request's `config` may set**") :]
    limits = limits[: limits.index(". Not")]  # what follows names what is refused
    cfg = Config()
    for section in ("search", "expand", "rerank", "llm_rerank", "hyde"):
        names = {f.name for f in dataclasses.fields(getattr(cfg, section))}
        allowed = {k.split(".", 1)[1] for k in QUERY_KEYS if k.startswith(section + ".")}
        if f"every `{section}.` key" in limits:
            assert allowed == names, section
        elif section == "search":
            search_list = limits[limits.index("`search.`:") + 10 : limits.index(";")]
            listed = set(search_list.split("`")[1::2])
            assert listed == allowed
        else:
            listed = {n for n in names if f"`{section}.{n}`" in limits}
            assert listed == allowed, section


def test_a_hooks_directory_that_is_a_file_is_one_line(tmp_path, daemon_env):
    root = make_git_repo(tmp_path / "repo", {"a.py": "def f():\n    return 1\n"})
    hooks = root / ".git" / "hooks"
    for child in hooks.iterdir():
        child.unlink()
    hooks.rmdir()
    hooks.write_text("not a directory\n")
    out = llmc("hooks", "install", "--repo", str(root), env=daemon_env, check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"Error: cannot install hooks: {hooks}: File exists"
    ], out.stderr


def test_the_daemons_state_is_private(shared_daemon):
    """Everything the daemon wrote under .llmc/ (index, log, token, pid) is 0600 in 0700."""
    import os
    import stat

    shared_daemon.search("session store")
    state = shared_daemon.root / ".llmc"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    loose = []
    for dirpath, dirnames, filenames in os.walk(state):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if not stat.S_ISSOCK(st.st_mode) and st.st_mode & 0o077:
                loose.append((name, oct(st.st_mode)))
    assert loose == []
