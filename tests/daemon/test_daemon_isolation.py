"""What a client of one repository's daemon may see of the user's other repositories
(issue 41, Low): only the workspaces its repository belongs to, and no absolute root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import child_env, llmc, make_git_repo, start_daemon, stop_daemon

from llmc.errors import LlmcError

FILES_A = {
    "a/ledger.py": 'def post_ledger_entry(entry):\n    """Post a ledger entry."""\n    return entry\n'
}
FILES_B = {"b/secret_plans.py": 'def launch_codename_bluebird():\n    """Plans."""\n    return 1\n'}


def _broken_member(root: Path, llmc_toml: str | None = None) -> Path:
    """A repository whose index is not a database (and, with ``llmc_toml``, whose config
    does not parse): its error names a file under its absolute root."""
    make_git_repo(root, {"x.py": "y = 1\n"})
    (root / ".llmc").mkdir(mode=0o700)
    (root / ".llmc" / "index.db").write_bytes(b"not a database")
    if llmc_toml is not None:
        (root / "llmc.toml").write_text(llmc_toml)
    return root


def test_a_daemon_searches_only_workspaces_of_its_own_repository(tmp_path: Path) -> None:
    a = make_git_repo(tmp_path / "alpha", FILES_A)
    b = make_git_repo(tmp_path / "private-beta", FILES_B)
    broken = _broken_member(tmp_path / "broken", llmc_toml="not toml [[[\n")
    corrupt = _broken_member(tmp_path / "corrupt")
    env = child_env(tmp_path / "xdg", LLMC_NO_DAEMON="1")
    for root in (a, b):
        llmc("index", str(root), "--quiet", "--no-vectors", env=env)
    llmc("workspace", "add", "others", str(b), env=env)
    llmc("workspace", "add", "team", str(a), str(b), str(broken), str(corrupt), env=env)
    env = {k: v for k, v in env.items() if k != "LLMC_NO_DAEMON"}
    handle = start_daemon(a, env)
    try:
        with pytest.raises(LlmcError) as foreign:
            handle.search("launch codename bluebird", workspace="others", k=5)
        with pytest.raises(LlmcError) as unknown:
            handle.search("launch codename bluebird", workspace="nonexistent", k=5)
        # word for word the same: a client cannot tell which of the user's workspaces exist
        assert str(foreign.value).replace("others", "X") == str(unknown.value).replace(
            "nonexistent", "X"
        )
        assert "no workspace 'others'" in str(foreign.value)
        out = handle.search("launch codename bluebird", workspace="team", k=5)
        assert out["results"][0]["repo"] == "private-beta"
        text = json.dumps(out)
        assert str(tmp_path) not in text, text
        names = {m["name"]: m for m in out["members"]}
        assert set(names) == {"alpha", "private-beta", "broken", "corrupt"}
        assert "broken/llmc.toml" in names["broken"]["error"], names["broken"]
        assert "corrupt/.llmc/index.db" in names["corrupt"]["error"], names["corrupt"]
        assert sum("left out" in w for w in out["warnings"]) == 2, out["warnings"]
        _mcp_sees_the_same(handle.sock, str(tmp_path), str(foreign.value))
    finally:
        stop_daemon(a, env)


def _mcp_sees_the_same(sock: Path, hidden: str, refused: str) -> None:
    """The MCP ``search`` tool over the daemon's ``/mcp``: the same refusal, no root."""
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from waiting import HANG_S

    def text(result: Any) -> str:
        return "\n".join(c.text for c in result.content if c.type == "text")

    async def run() -> None:
        with anyio.fail_after(HANG_S):  # a hang guard only
            transport = httpx2.AsyncHTTPTransport(uds=str(sock))
            async with (
                httpx2.AsyncClient(transport=transport) as http,
                streamable_http_client("http://llmc/mcp", http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                args = {"query": "launch codename bluebird", "workspace": "others"}
                foreign = await session.call_tool("search", args)
                assert foreign.is_error and refused in text(foreign), text(foreign)
                found = await session.call_tool("search", {**args, "workspace": "team"})
                assert not found.is_error, text(found)
                assert found.structured_content["results"][0]["repo"] == "private-beta"
                seen = text(found) + json.dumps(found.structured_content)
                assert hidden not in seen, seen

    anyio.run(run)


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
