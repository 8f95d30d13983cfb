"""The daemon's HTTP API over its real socket: answers, limits, bad requests, auth."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import stat
import threading

import pytest
from click.testing import CliRunner
from daemon_helpers import raw_http
from waiting import HANG_S, returns, wait_for

from llmc.cli import main
from llmc.daemon.client import try_daemon
from llmc.errors import DaemonError


def test_health_and_status(shared_daemon):
    health = shared_daemon.call("health")
    assert health["ok"] and health["pid"] == shared_daemon.pid() and health["ready"]
    st = shared_daemon.status()
    assert st["uptime_s"] >= 0  # reported (its size is no test's business)
    assert st["index"]["generation"] >= 1 and st["index"]["files"] >= 4
    assert st["queue"]["last"]["summary"]["generation"] == st["index"]["generation"]
    assert st["memory"]["rss_bytes"] > 0
    assert set(st["models"]) == {"code", "doc"}
    assert st["watcher"]["enabled"] is True
    assert st["endpoints"]["socket"] == str(shared_daemon.sock)


def test_socket_and_token_are_private(shared_daemon):
    assert stat.S_IMODE(os.stat(shared_daemon.sock).st_mode) == 0o600
    token_file = shared_daemon.root / ".llmc" / "daemon.token"
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600


def test_search_is_the_same_json_as_the_cli(shared_daemon, monkeypatch):
    args = [
        "search",
        "save a session token",
        "-k",
        "5",
        "--json",
        "--repo",
        str(shared_daemon.root),
    ]
    via_api = shared_daemon.search("save a session token", k=5)
    served = shared_daemon.status()["requests"]["served"]
    via_cli = CliRunner().invoke(main, args)  # a running daemon answers `llmc search --json`
    assert via_cli.exit_code == 0, via_cli.output
    assert shared_daemon.status()["requests"]["served"] == served + 2  # that status + the search
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    local = json.loads(result.stdout)
    strip = ("timings_ms", "took_ms")
    for via_daemon in (via_api, json.loads(via_cli.stdout)):
        assert set(via_daemon) == set(local)
        assert {k: v for k, v in via_daemon.items() if k not in strip} == {
            k: v for k, v in local.items() if k not in strip
        }
    assert via_api["results"][0]["path"] == "app/store.py"


def test_search_get_with_query_string_and_extras(shared_daemon):
    status, body = raw_http(
        shared_daemon.sock,
        b"GET /v1/search?q=Router&k=2&route=code&extras=true HTTP/1.1\r\nHost: x\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert status == 200
    assert body["results"] and len(body["results"]) <= 2
    assert body["results"][0]["path"] == "app/server.js"
    assert "snippet_start_line" in body["results"][0] and "highlight_terms" in body


def test_per_request_config_matches_the_client(shared_daemon):
    out = shared_daemon.search("session", config={"search.dense": False})
    assert out["results"]
    assert all(not s.startswith("dense") for r in out["results"] for s in r["sources"])
    with pytest.raises(DaemonError) as e:
        shared_daemon.search("session", config={"daemon.tcp": True})
    assert e.value.status == 400 and e.value.code == "config_refused"
    # A key this daemon's llmc lacks (version skew): 409, and clients work in-process.
    newer = {"query": "session", "config": {"search.from_the_future": 1}}
    with pytest.raises(DaemonError) as e:
        shared_daemon.call("search", newer)
    assert e.value.status == 409 and e.value.code == "config_mismatch"
    assert try_daemon(shared_daemon.root, "search", newer) is None


BAD_REQUESTS = [
    # (raw request, status, error code); every HTTP/1.1 request names its Host
    (
        b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 9\r\n\r\n{not json",
        400,
        "bad_json",
    ),
    (b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 2\r\n\r\n[]", 400, "bad_json"),
    (b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 2\r\n\r\n{}", 400, "bad_request"),
    (
        b'POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 14\r\n\r\n{"query": 12 }',
        400,
        "bad_request",
    ),
    (
        b'POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 25\r\n\r\n{"query": "x", "k": -3  }',
        400,
        "bad_request",
    ),
    (
        b'POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 27\r\n\r\n{"query": "x", "bogus": 1 }',
        400,
        "bad_request",
    ),
    (
        b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00x",
        400,
        "bad_json",
    ),
    (b"GET /v1/nope HTTP/1.1\r\nHost: llmc\r\n\r\n", 404, "not_found"),
    (b"GET /index.html HTTP/1.1\r\nHost: llmc\r\n\r\n", 404, "not_found"),
    (b"DELETE /v1/search HTTP/1.1\r\nHost: llmc\r\n\r\n", 405, "method_not_allowed"),
    (b"GET /v1/reindex HTTP/1.1\r\nHost: llmc\r\n\r\n", 405, "method_not_allowed"),
    (
        b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: 99999999999\r\n\r\n",
        413,
        "too_large",
    ),
    (b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: abc\r\n\r\n", 400, "bad_request"),
    (
        b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        411,
        None,
    ),
    (b"HELLO\r\n\r\n", 400, "bad_request"),
    # HTTP/1.1 requires Host (RFC 9112 3.2); h11 enforces it, the answer is still JSON.
    (b"GET /v1/health HTTP/1.1\r\n\r\n", 400, "bad_request"),
    (b"GET /v1/health HTTP/9.9\r\nHost: llmc\r\n\r\n", 505, None),
    (
        b"POST /v1/graph/deps HTTP/1.1\r\nHost: llmc\r\nContent-Length: 2\r\n\r\n{}",
        400,
        "bad_request",
    ),
    (
        b'POST /v1/reindex HTTP/1.1\r\nHost: llmc\r\nContent-Length: 22\r\n\r\n{"paths": ["../etc" ]}',
        400,
        "bad_request",
    ),
]


@pytest.mark.parametrize("raw,status,code", BAD_REQUESTS)
def test_bad_requests_get_4xx_and_the_daemon_keeps_serving(shared_daemon, raw, status, code):
    got, body = raw_http(shared_daemon.sock, raw)
    assert got == status, body
    if code:
        assert body["error"]["code"] == code
        assert body["error"]["message"]
    assert shared_daemon.call("health")["ok"]


def test_oversized_body_is_refused_unread(shared_daemon):
    big = b'{"query": "' + b"a" * (2 * 1024 * 1024) + b'"}'
    head = f"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: {len(big)}\r\n\r\n".encode()
    status, body = raw_http(shared_daemon.sock, head + big[:1000])
    assert status == 413 and "limit" in body["error"]["message"]
    assert shared_daemon.call("health")["ok"]


def test_a_silent_client_does_not_block_others(shared_daemon):
    """A search is answered while another connection stalls mid-request, and the stalled
    one is still open (not timed out first) and is answered once it finishes its body."""
    body = json.dumps({"query": "Router", "k": 1}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(str(shared_daemon.sock))
        head = f"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nContent-Length: {len(body)}\r\n\r\n"
        idle.sendall(head.encode())
        idle.sendall(body[:1])  # and stalls
        assert returns(lambda: shared_daemon.search("Router"), "a search")["results"]
        idle.setblocking(False)
        with pytest.raises(BlockingIOError):  # no answer, no close: the server still waits
            idle.recv(1, socket.MSG_PEEK)
        idle.setblocking(True)
        idle.settimeout(HANG_S)
        idle.sendall(body[1:])
        head = idle.recv(65536).split(b"\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.") and b" 200 " in head, head


def test_concurrent_clients(shared_daemon):
    queries = ["Router", "save session", "installation guide", "open_store", "sessions sqlite"]
    errors: list[BaseException] = []
    answers: dict[str, set[str]] = {}
    lock = threading.Lock()

    def client(i: int) -> None:
        try:
            for j in range(4):
                q = queries[(i + j) % len(queries)]
                top = shared_daemon.search(q, k=3)["results"][0]["path"]
                with lock:
                    answers.setdefault(q, set()).add(top)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert all(len(tops) == 1 for tops in answers.values()), answers  # same answer every time


def _tcp(st: dict, headers: dict[str, str], path: str = "/v1/health"):
    tcp = st["endpoints"]["tcp"]
    conn = http.client.HTTPConnection("127.0.0.1", tcp["port"], timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_tcp_needs_the_bearer_token(shared_daemon):
    st = shared_daemon.status()
    token = (shared_daemon.root / ".llmc" / "daemon.token").read_text().strip()
    assert _tcp(st, {})[0] == 401
    assert _tcp(st, {"Authorization": "Bearer wrong"})[0] == 401
    assert _tcp(st, {"Authorization": token})[0] == 401
    browser = {"Authorization": f"Bearer {token}", "Origin": "http://evil.example"}
    assert _tcp(st, browser)[0] == 403
    status, body = _tcp(st, {"Authorization": f"Bearer {token}"})
    assert status == 200 and body["ok"]
    status, body = _tcp(st, {"Authorization": f"Bearer {token}"}, "/v1/search?q=Router&k=1")
    assert status == 200 and body["results"][0]["path"] == "app/server.js"


def test_graph_endpoints_match_the_cli(shared_daemon, monkeypatch):
    used = shared_daemon.call("graph/where-used", {"symbol": "SessionStore"})
    assert used["target"]["name"] == "SessionStore"
    assert any(r["name"] == "open_store" for r in used["callers"])
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    cli = CliRunner().invoke(
        main, ["graph", "where-used", "SessionStore", "--json", "--repo", str(shared_daemon.root)]
    )
    assert cli.exit_code == 0, cli.output
    assert {k: v for k, v in used.items() if k != "warnings"} == json.loads(cli.stdout)
    deps = shared_daemon.call("graph/deps", {"target": "open_store", "text": True})
    assert any(d["node"].endswith("SessionStore") for d in deps["deps"])
    assert "SessionStore" in deps["text"]
    with pytest.raises(DaemonError) as e:
        shared_daemon.call("graph/where-used", {"symbol": "NoSuchThingAnywhere"})
    assert e.value.status == 422 and e.value.code == "symbol_not_found"


def test_reindex_endpoint_waits_for_the_run(shared_daemon):
    path = shared_daemon.root / "app" / "reindexed.py"
    path.write_text("def quokka_counter(n):\n    return n + 1\n", encoding="utf-8")
    try:
        out = shared_daemon.call("reindex", {"paths": ["app/reindexed.py"], "wait": True})
        assert out["done"] and out["error"] is None
        assert out["summary"]["generation"] >= 1
        hits = shared_daemon.search("quokka_counter")["results"]
        assert hits and hits[0]["path"] == "app/reindexed.py"
    finally:
        path.unlink()
        shared_daemon.call("reindex", {"wait": True})


def test_try_daemon(shared_daemon, tmp_path):
    got = try_daemon(shared_daemon.root, "search", {"query": "Router", "k": 1})
    assert got and got["results"][0]["path"] == "app/server.js"
    # No daemon: None (at the cost of a stat).
    (tmp_path / "none").mkdir()
    assert try_daemon(tmp_path / "none", "search", {"query": "x"}) is None
    # A dead daemon's socket file: connection refused, None; not a wait for the connect
    # timeout (an hour here, so a client that waited would hang the check below).
    dead = tmp_path / "dead"
    (dead / ".llmc").mkdir(parents=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(dead / ".llmc" / "daemon.sock"))
    s.close()
    ask = lambda: try_daemon(dead, "search", {"query": "x"}, connect_timeout=3600)  # noqa: E731
    assert returns(ask, "try_daemon on a dead socket") is None
    with pytest.raises(DaemonError):
        try_daemon(shared_daemon.root, "search", {"query": ""})


def test_watcher_picks_up_edits_deletes_and_directory_renames(shared_daemon):
    root = shared_daemon.root
    shared_daemon.wait_idle()
    files_before = shared_daemon.status()["index"]["files"]
    new = root / "app" / "watched.py"
    new.write_text("def pangolin_scales(x):\n    return x * 2\n", encoding="utf-8")

    def found(query: str, path: str) -> bool:
        return any(r["path"] == path for r in shared_daemon.search(query, k=5)["results"])

    wait_for(lambda: found("pangolin_scales", "app/watched.py"), 60, "the edit to be searchable")
    # Ignored files (skipped dirs, secrets, git-ignored) cause no reindex. All three land in
    # the root directory's watch, whose events arrive in order: once debug.log (written last)
    # is counted as dropped by git's rules, a leaked .env or build/ would be in a batch.
    shared_daemon.wait_idle()
    before = shared_daemon.status()
    runs, batches = before["queue"]["runs"], before["watcher"]["batches"]
    ignored = before["watcher"]["ignored_paths"]
    (root / ".env").write_text("SECRET=1\n")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.py").write_text("def ignored(): pass\n")
    (root / "debug.log").write_text("noise\n")
    wait_for(
        lambda: shared_daemon.status()["watcher"]["ignored_paths"] > ignored,
        60,
        "the watcher to drop debug.log",
    )
    after = shared_daemon.status()
    assert (after["queue"]["runs"], after["watcher"]["batches"]) == (runs, batches)
    # A delete: results never point at the deleted file.
    new.unlink()
    assert not found("pangolin_scales", "app/watched.py")
    wait_for(
        lambda: shared_daemon.status()["index"]["files"] == files_before,
        60,
        "the delete to be indexed",
    )
    # A directory rename moves every file.
    os.rename(root / "docs", root / "manual")
    try:
        wait_for(lambda: found("Installation guide", "manual/guide.md"), 60, "renamed docs")
        assert not found("Installation guide", "docs/guide.md")
    finally:
        os.rename(root / "manual", root / "docs")
        shared_daemon.wait_idle()
    assert found("Installation guide", "docs/guide.md")


def _answers(sock: socket.socket, n: int) -> list[tuple[bytes, dict]]:
    """Read ``n`` whole responses (status line, JSON body) from one connection."""
    buf, out = b"", []
    while len(out) < n:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, f"closed after {len(out)} answers"
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(buf) < length:
            chunk = sock.recv(65536)
            assert chunk, "closed mid-answer"
            buf += chunk
        out.append((head.split(b"\r\n", 1)[0], json.loads(buf[:length])))
        buf = buf[length:]
    return out


def test_keep_alive_and_no_request_smuggled_in_an_unread_body(shared_daemon):
    from llmc.daemon.client import unix_client

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # one connection, 3 requests
        s.settimeout(HANG_S)
        s.connect(str(shared_daemon.sock))
        for _ in range(3):
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: llmc\r\n\r\n")
            ((line, body),) = _answers(s, 1)
            assert b" 200 " in line and body["ok"]
        # Pipelined: both sent at once, answered in order.
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: llmc\r\n\r\n" * 2)
        assert [b" 200 " in line for line, _ in _answers(s, 2)] == [True, True]
    with unix_client(shared_daemon.sock, 2.0, 30.0) as client:  # httpx keeps it alive too
        assert all(client.get("/v1/health").json()["ok"] for _ in range(3))
    smuggled = b"POST /v1/shutdown HTTP/1.1\r\nHost: llmc\r\nContent-Length: 0\r\n\r\n"
    head = f"POST /v1/nope HTTP/1.1\r\nHost: llmc\r\nContent-Length: {len(smuggled)}\r\n\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(HANG_S)
        s.connect(str(shared_daemon.sock))
        s.sendall(head.encode() + smuggled)
        s.shutdown(socket.SHUT_WR)
        raw = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):  # everything the server says until it closes
                raw += chunk
    assert raw.startswith(b"HTTP/1.") and b" 404 " in raw.split(b"\r\n", 1)[0]
    assert raw.count(b"HTTP/1.") == 1, raw  # one answer: the body was not taken for a request
    assert shared_daemon.call("health")["ok"]
