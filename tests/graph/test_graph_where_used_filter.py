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
