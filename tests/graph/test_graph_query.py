"""The read API the search pipeline and the CLI use: load, neighbors, degree, PageRank,
node <-> span, name resolution, where-used, deps."""

from __future__ import annotations

import networkx as nx
import pytest
from graph_helpers import copy_project, filler_factory, touch_later

from llmc.errors import AmbiguousSymbolError, GraphMissingError, SymbolNotFoundError
from llmc.graph import load_graph, update_graph
from llmc.graph.model import CALLS, GRAPH_FILE, IMPORTS
from llmc.graph.query import RepoGraph, pagerank

filler = pytest.fixture(name="filler")(filler_factory)


@pytest.fixture
def shop(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    changed = f.put()
    update_graph(root, f.store, changed, [], f.bump())
    return root, f.store


def _g(edges: list[tuple[str, str]], etype: str = CALLS) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    for s, d in edges:
        g.add_edge(s, d, key=etype, type=etype, confidence=1.0)
    return g


def test_pagerank_hand_numbers():
    # a <-> b: symmetric, so 1/2 each
    assert pagerank(_g([("a", "b"), ("b", "a")])) == pytest.approx({"a": 0.5, "b": 0.5})
    # a -> b, b dangling: x_a = 0.15/2 + 0.85 * x_b/2 ; x_b = x_a + x_a... solve:
    # x_a = 0.075 + 0.425 x_b, x_b = 0.075 + 0.85 x_a + 0.425 x_b  ->  x_a = 0.35 / 1.0 ...
    ranks = pagerank(_g([("a", "b")]), tol=1e-12, max_iter=500)
    xa = 1 / (1 + 1.85)  # from x_b = 1.85 x_a (substitute and simplify)
    assert ranks["a"] == pytest.approx(xa, rel=1e-6)
    assert ranks["b"] == pytest.approx(1 - xa, rel=1e-6)
    # edge types filter and the induced subgraph
    g = _g([("a", "b")])
    g.add_edge("b", "a", key=IMPORTS, type=IMPORTS, confidence=1.0)
    assert pagerank(g, edge_types=[IMPORTS])["a"] > 0.5
    assert pagerank(g, nodes=["a"]) == {"a": 1.0}
    # personalization pulls rank toward its nodes
    chain = _g([("a", "b"), ("b", "c"), ("c", "a")])
    pushed = pagerank(chain, personalization={"a": 1.0})
    assert pushed["a"] > pushed["b"] > pushed["c"]


def test_pagerank_matches_networkx():
    pytest.importorskip("scipy")
    g = nx.gnp_random_graph(40, 0.08, seed=3, directed=True)
    mg = nx.MultiDiGraph()
    mg.add_nodes_from(str(n) for n in g)
    for s, d in g.edges:
        mg.add_edge(str(s), str(d), key=CALLS, type=CALLS, confidence=1.0)
    ours = pagerank(mg, tol=1e-12, max_iter=1000)
    theirs = nx.pagerank(nx.DiGraph(mg), tol=1e-12, max_iter=1000)
    for n in ours:
        assert ours[n] == pytest.approx(theirs[n], abs=1e-8)


def test_neighbors_and_degree(shop):
    graph = load_graph(shop[0])
    place = "shop/service.py::OrderService.place"
    out = graph.neighbors(place, [CALLS])
    assert {e.other for e in out} == {
        "shop/storage/base.py::Repository.save",
        "shop/pricing.py::PriceCalculator.price",
        "shop/util.py::note",
        "shop/util.py::round2",
    }
    assert all(e.direction == "out" and e.type == CALLS and e.line > 0 for e in out)
    callers = graph.neighbors(place, [CALLS], "in")
    assert {e.other for e in callers} == {
        "shop/cli.py::main",
        "tests/service_checks.py::test_place",
    }
    assert graph.degree(place, [CALLS]) == 6
    assert graph.degree(place, [CALLS], "in") == 2
    assert graph.neighbors(place, [CALLS], "in", min_confidence=0.95) == [
        e for e in callers if e.confidence >= 0.95
    ]
    assert graph.neighbors("no/such::node") == []


def test_node_and_span_mapping(shop):
    root, store = shop
    graph = load_graph(root)
    info = graph.node("shop/models.py::Order.add")
    assert (info.kind, info.path, info.qualname) == ("method", "shop/models.py", "Order.add")
    assert graph.node_for_span(info.span_id) == info.id
    # every span maps to a node: a module-level block to its file, a section to itself
    block = [s for s in store.spans_for_path("shop/cli.py") if s.span.start_line == 1][0]
    assert graph.node_for_span(block.id) == "shop/cli.py"
    for s in store.iter_spans():
        assert graph.node_for_span(s.id) is not None, s.span
    pricing = [s for s in store.spans_for_path("docs/usage.md") if "Pricing" in s.span.qualname]
    assert graph.node_for_span(pricing[0].id) == "docs/usage.md::Shop > Pricing"
    assert graph.node_at("shop/cli.py", 19) == "shop/cli.py::main.fmt"
    assert graph.node_at("shop/cli.py", 2) == "shop/cli.py"


def test_resolve_names(shop):
    graph = load_graph(shop[0])
    assert graph.resolve("shop/util.py::round2") == ["shop/util.py::round2"]
    assert graph.resolve("shop/util.py") == ["shop/util.py"]
    assert graph.resolve("storage/memory.py") == ["shop/storage/memory.py"]
    assert graph.resolve("OrderService.place") == ["shop/service.py::OrderService.place"]
    assert graph.resolve("shop.pricing.apply_discount") == ["shop/pricing.py::apply_discount"]
    assert graph.resolve("shop.pricing") == ["shop/pricing.py"]
    assert graph.resolve("round2()") == ["shop/util.py::round2"]
    with pytest.raises(AmbiguousSymbolError) as e:
        graph.resolve_one("save")
    assert set(e.value.candidates) == {
        "shop/storage/base.py::Repository.save",
        "shop/storage/memory.py::MemoryRepository.save",
    }
    with pytest.raises(SymbolNotFoundError) as nf:
        graph.resolve_one("round3")
    assert "round2" in nf.value.suggestions


def test_where_used(shop):
    graph = load_graph(shop[0])
    u = graph.where_used("apply_discount")
    assert {r.node for r in u.callers} == {
        "shop/pricing.py::PriceCalculator.price",
        "tests/service_checks.py::test_discount",
    }
    assert {r.node for r in u.importers} == {"tests/service_checks.py"}
    assert {r.node for r in u.tests} >= {"tests/service_checks.py::test_discount"}
    assert {r.node for r in u.docs} == {"docs/usage.md::Shop > Pricing"}
    line = next(r.line for r in u.callers if r.node.endswith("PriceCalculator.price"))
    assert line == 19

    repo = graph.where_used("Repository")
    assert {r.node for r in repo.subclasses} == {"shop/storage/memory.py::MemoryRepository"}
    assert "shop/service.py" in {r.node for r in repo.importers}

    util = graph.where_used("shop/util.py")
    assert {r.node for r in util.importers} >= {"shop/models.py", "shop/pricing.py"}
    as_json = util.to_json()
    assert set(as_json) == {"target", *u.GROUPS}


def test_deps(shop):
    graph = load_graph(shop[0])
    one = graph.deps("create_service", depth=1)
    assert [(d.node, d.depth) for d in one] == [("shop/service.py::OrderService", 1)]
    two = {d.node: d for d in graph.deps("create_service", depth=2)}
    assert two["shop/storage/memory.py::MemoryRepository"].depth == 2
    assert (
        two["shop/pricing.py::PriceCalculator"].source == "shop/service.py::OrderService.__init__"
    )
    # a class counts its methods' uses, but not uses of itself
    cls = {d.node for d in graph.deps("OrderService")}
    assert "shop/util.py::round2" in cls and "shop/service.py::OrderService.place" not in cls


def test_summary(shop):
    s = load_graph(shop[0]).summary(top=5)
    assert s["nodes"] > 50 and s["edges_by_type"][CALLS] >= 35
    assert set(s["resolution"]) == {"calls", "imports", "inherits", "mentions"}
    assert len(s["top"]) == 5 and s["top"][0]["pagerank"] >= s["top"][-1]["pagerank"]


def test_load_is_cached(shop):
    """The same graph object while the file is unchanged; how fast that is lives in
    benchmarks/bench_guards.py."""
    root, _ = shop
    first = load_graph(root)
    for _ in range(20):
        assert load_graph(root) is first
    # a rewritten file is re-read
    path = root / ".llmc" / GRAPH_FILE
    touch_later(path, path.read_text())
    assert load_graph(root) is not first


def test_missing_and_corrupt_graphs_say_run_llmc_index(tmp_path):
    with pytest.raises(GraphMissingError, match="llmc index"):
        load_graph(tmp_path)
    (tmp_path / ".llmc").mkdir()
    (tmp_path / ".llmc" / GRAPH_FILE).write_text("{")
    with pytest.raises(GraphMissingError, match="corrupt.*llmc index"):
        load_graph(tmp_path)
    (tmp_path / ".llmc" / GRAPH_FILE).write_text('{"graph": {"schema": "other"}}')
    with pytest.raises(GraphMissingError, match="not an llmc graph"):
        load_graph(tmp_path)


def test_repograph_accepts_any_multidigraph():
    g = _g([("a.py::f", "b.py::g")])
    g.nodes["a.py::f"].update(kind="function", name="f", qualname="f", path="a.py")
    g.nodes["b.py::g"].update(kind="function", name="g", qualname="g", path="b.py")
    rg = RepoGraph(g)
    assert rg.resolve("g") == ["b.py::g"]
    assert [r.node for r in rg.where_used("g").callers] == ["a.py::f"]
