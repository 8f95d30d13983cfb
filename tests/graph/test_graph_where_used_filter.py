"""`graph where-used` thresholds and suggestions (issue 40, item 9)."""

from __future__ import annotations

import networkx as nx
import pytest

from llmc.errors import SymbolNotFoundError
from llmc.graph.model import CALLS, NAME_ONLY, unresolved_id
from llmc.graph.query import RepoGraph


def _graph() -> RepoGraph:
    g = nx.MultiDiGraph()
    nodes = {
        "lib.py::send": ("send", "lib.py"),
        "session.py::Session.request": ("request", "session.py"),
        "tests/server.py::handler": ("handler", "tests/server.py"),
    }
    for node, (name, path) in nodes.items():
        g.add_node(node, kind="function", name=name, qualname=name, path=path)
    g.add_node(unresolved_id("send"), kind="unresolved", name="send")
    g.add_edge("session.py::Session.request", "lib.py::send", key=CALLS, type=CALLS,
               confidence=0.9)  # fmt: skip
    g.add_edge("tests/server.py::handler", unresolved_id("send"), key=CALLS, type=CALLS,
               confidence=NAME_ONLY)  # fmt: skip
    return RepoGraph(g)


def test_a_high_threshold_hides_guesses_before_real_callers():
    graph = _graph()
    default = graph.where_used("send")
    assert [r.node for r in default.callers] == ["session.py::Session.request"]
    assert [r.node for r in default.possible_callers] == ["tests/server.py::handler"]
    strict = graph.where_used("send", min_confidence=0.85)
    assert [r.node for r in strict.callers] == ["session.py::Session.request"]
    assert strict.possible_callers == []
    stricter = graph.where_used("send", min_confidence=0.95)
    assert stricter.callers == [] and stricter.possible_callers == []


def test_did_you_mean_names_each_suggestion_once():
    with pytest.raises(SymbolNotFoundError) as e:
        _graph().resolve_one("sned")
    hint = str(e.value)
    assert "did you mean" in hint
    assert hint.count("send") == 1, hint


ADAPTERS = """class BaseAdapter:
    def send(self, request):
        raise NotImplementedError


class HTTPAdapter(BaseAdapter):
    def send(self, request, stream=False):
        return request
"""
SESSIONS = """class Session:
    def __init__(self):
        self.adapters = {}

    def get_adapter(self, url):
        for prefix, adapter in self.adapters.items():
            if url.startswith(prefix):
                return adapter
        raise ValueError(url)

    def send(self, request):
        adapter = self.get_adapter(url=request.url)
        return adapter.send(request)
"""
SERVER = """def serve(sock):
    sock.send(b"hello")


def relay(conn):
    conn.send(b"x")
"""


def test_a_method_lookup_lists_the_caller_whose_receiver_names_its_class_first(tmp_path):
    """`where-used HTTPAdapter.send`: the session's `adapter.send(...)` (a receiver the
    resolver cannot type) comes before `sock.send` in a test server, and says why."""
    from click.testing import CliRunner

    from llmc.cli import main

    (tmp_path / "pkg").mkdir()
    for name, text in {"adapters": ADAPTERS, "sessions": SESSIONS, "server": SERVER}.items():
        (tmp_path / "pkg" / f"{name}.py").write_text(text)
    assert CliRunner().invoke(main, ["index", str(tmp_path), "-q"]).exit_code == 0
    for symbol, cls in (("HTTPAdapter.send", "HTTPAdapter"), ("BaseAdapter.send", "BaseAdapter")):
        out = CliRunner().invoke(main, ["graph", "where-used", symbol, "--repo", str(tmp_path)])
        assert out.exit_code == 0, out.output
        lines = [ln for ln in out.output.splitlines() if ln.startswith("  ")]
        assert "Session.send" in lines[0] and f"receiver `adapter` ~ {cls}" in lines[0], lines
        assert {ln.split()[1] for ln in lines[1:]} == {"serve", "relay"}
        assert all("0.30 (name)" in ln for ln in lines[1:]), lines
    # the session's own send is named by nobody's receiver: every guess stays a plain guess
    out = CliRunner().invoke(main, ["graph", "where-used", "Session.send", "--repo", str(tmp_path),
                                    "--json"])  # fmt: skip
    import json

    refs = json.loads(out.output)["possible_callers"]
    assert {r["confidence"] for r in refs} == {NAME_ONLY} and {r["via"] for r in refs} == {"name"}
