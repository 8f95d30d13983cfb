"""`"group": "file"` on /v1/search over the daemon's socket, and the MCP search tool's
`group` argument through the official SDK client (tools/list advertises it)."""

from __future__ import annotations

from typing import Any

import pytest
from test_mcp_sdk_client import _session, _text, indexed_repo  # noqa: F401 (a fixture)

from llmc.errors import DaemonError


def test_search_group_file_over_the_socket(shared_daemon):
    out = shared_daemon.search("save a session token", k=2, group="file")
    assert out["group"] == "file" and "results" not in out
    assert out["whole_file_weight"] > 0  # the whole-file BM25 list, fused in (.llmc/files/)
    assert out["file_ranker"] == "learned"  # the learned file ranker ordered them
    paths = [f["path"] for f in out["files"]]
    assert paths[0] == "app/store.py"
    assert len(paths) == len(set(paths)) <= 2
    store = out["files"][0]
    assert set(store) == {"path", "score", "matched_spans", "spans"}
    assert 1 <= len(store["spans"]) <= 3
    assert {"start_line", "end_line", "symbol", "kind", "score", "snippet"} == set(
        store["spans"][0]
    )
    assert shared_daemon.search("save a session token", k=2, group="span")["results"]


def test_search_group_refuses_other_values(shared_daemon):
    with pytest.raises(DaemonError) as raised:
        shared_daemon.search("store", group="directory")
    assert raised.value.status == 400 and "group" in str(raised.value)


def test_sdk_client_search_group_file(indexed_repo, tmp_path):  # noqa: F811
    async def body(session: Any, init: Any) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        group = tools["search"].input_schema["properties"]["group"]
        assert group["enum"] == ["span", "file"]
        found = await session.call_tool(
            "search", {"query": "save a session token", "k": 2, "group": "file"}
        )
        assert not found.is_error, _text(found)
        files = found.structured_content["files"]
        assert found.structured_content["file_ranker"] == "learned"
        assert files[0]["path"] == "app/store.py" and files[0]["spans"]
        assert len({f["path"] for f in files}) == len(files) <= 2
        assert _text(found).startswith(f"{len(files)} files for")
        bad = await session.call_tool("search", {"query": "store", "group": "repo"})
        assert bad.is_error and "group" in _text(bad)

    _session(indexed_repo, tmp_path / "mcp.stderr", body)
