"""What a client of one repository's daemon may see of the user's other repositories
(issue 41, Low): only the workspaces its repository belongs to, and no absolute root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from daemon_helpers import child_env, llmc, make_git_repo, start_daemon, stop_daemon

from llmc.errors import LlmcError

FILES_A = {
    "a/ledger.py": 'def post_ledger_entry(entry):\n    """Post a ledger entry."""\n    return entry\n'
}
FILES_B = {"b/secret_plans.py": 'def launch_codename_bluebird():\n    """Plans."""\n    return 1\n'}


def test_a_daemon_searches_only_workspaces_of_its_own_repository(tmp_path: Path) -> None:
    a = make_git_repo(tmp_path / "alpha", FILES_A)
    b = make_git_repo(tmp_path / "private-beta", FILES_B)
    env = child_env(tmp_path / "xdg", LLMC_NO_DAEMON="1")
    for root in (a, b):
        llmc("index", str(root), "--quiet", "--no-vectors", env=env)
    llmc("workspace", "add", "others", str(b), env=env)
    llmc("workspace", "add", "team", str(a), str(b), env=env)
    env = {k: v for k, v in env.items() if k != "LLMC_NO_DAEMON"}
    handle = start_daemon(a, env)
    try:
        with pytest.raises(LlmcError, match="no workspace 'others'"):
            handle.search("launch codename bluebird", workspace="others", k=5)
        with pytest.raises(LlmcError) as unknown:
            handle.search("x", workspace="nonexistent", k=5)
        assert "no workspace 'nonexistent'" in str(unknown.value)
        out = handle.search("launch codename bluebird", workspace="team", k=5)
        assert out["results"][0]["repo"] == "private-beta"
        text = json.dumps(out)
        assert str(tmp_path) not in text, text
        assert {m["name"] for m in out["members"]} == {"alpha", "private-beta"}
    finally:
        stop_daemon(a, env)


def test_a_workspace_path_with_del_and_a_newline_round_trips(tmp_path: Path) -> None:
    odd = make_git_repo(tmp_path / "odd\x7fname\nhere", FILES_A)
    env = child_env(tmp_path / "xdg")
    llmc("workspace", "add", "team", str(odd), env=env)
    listed = json.loads(llmc("workspace", "list", "--json", env=env).stdout)
    assert [m["root"] for m in listed["workspaces"]["team"]] == [str(odd)]
    llmc("workspace", "add", "team2", str(tmp_path), env=env)  # the file still parses
    assert "team2" in json.loads(llmc("workspace", "list", "--json", env=env).stdout)["workspaces"]


def test_tokenless_connections_cannot_turn_away_the_owners_token_requests(shared_daemon):
    import http.client
    import socket

    port = shared_daemon.status()["endpoints"]["tcp"]["port"]
    token = (shared_daemon.root / ".llmc" / "daemon.token").read_text().strip()
    held: list[socket.socket] = []
    try:
        for i in range(8):  # another local user holds the tokenless pool: idle, or trickling
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1")
            held.append(s)
        for _ in range(3):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("GET", "/v1/health", headers={"Authorization": f"Bearer {token}"})
                resp = conn.getresponse()
                assert resp.status == 200, resp.read()
                assert json.loads(resp.read())["ok"]
            finally:
                conn.close()
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    finally:
        for s in held:
            s.close()
