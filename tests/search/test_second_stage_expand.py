"""Graph-neighbor expansion and graph priors (llmc/search/expand.py).

Unit tests run on a hand-built graph (networkx, as rag_graph.json loads) and an in-memory
store, so every added neighbor, cap, skip and score is known; the pipeline tests run the
real stage on the indexed fixture repo."""

from __future__ import annotations

import copy

import networkx as nx
import pytest

from llmc.config import ExpandConfig, load_config
from llmc.graph import RepoGraph
from llmc.paths import graph_path
from llmc.search import Searcher
from llmc.search.expand import GRAPH, expand
from llmc.search.types import Candidate
from llmc.types import Span, StoredSpan

# span id → (node id, kind, path, symbol)
NODES = {
    1: ("src/a.py::search", "function", "src/a.py", "search"),
    2: ("src/a.py::helper", "function", "src/a.py", "helper"),
    3: ("src/a.py::parse", "function", "src/a.py", "parse"),
    4: ("src/hub.py::Registry", "class", "src/hub.py", "Registry"),
    5: ("tests/test_a.py::test_search", "function", "tests/test_a.py", "test_search"),
    6: ("docs/guide.md::Guide > Searching", "section", "docs/guide.md", "Searching"),
    7: ("src/b.py::render", "function", "src/b.py", "render"),
    8: ("src/b.py::format_row", "function", "src/b.py", "format_row"),
    9: ("src/a.py::tokenize", "function", "src/a.py", "tokenize"),
}
FILLERS = 60  # callers that make Registry a hub


def build_graph() -> RepoGraph:
    g = nx.MultiDiGraph()
    for span_id, (nid, kind, path, name) in NODES.items():
        g.add_node(nid, kind=kind, name=name, path=path, qualname=nid.split("::")[1],
                   start_line=span_id * 10, end_line=span_id * 10 + 5, span_id=span_id)  # fmt: skip
    g.add_node("src/a.py", kind="file", name="a.py", path="src/a.py")
    g.add_node("?mystery", kind="unresolved", name="mystery")

    def edge(a: str, b: str, type_: str, confidence: float = 1.0) -> None:
        g.add_edge(a, b, type=type_, confidence=confidence)

    search, helper, parse, hub = (NODES[i][0] for i in (1, 2, 3, 4))
    edge(search, helper, "calls")
    edge(search, parse, "calls")
    edge(search, NODES[9][0], "calls")
    edge(search, hub, "calls")
    edge(search, "?mystery", "calls", 0.3)
    edge(search, "src/a.py", "imports")  # a file node: no span of its own
    edge(NODES[5][0], search, "tests")
    edge(NODES[6][0], search, "mentions")
    edge(NODES[7][0], NODES[8][0], "calls", 0.6)
    for i in range(FILLERS):
        g.add_node(f"src/f{i}.py::f", kind="function", name="f", path=f"src/f{i}.py", span_id=None)
        edge(f"src/f{i}.py::f", hub, "calls")
    g.graph["span_nodes"] = {str(i): n[0] for i, n in NODES.items()}
    return RepoGraph(g)


def stored_span(span_id: int, path: str, symbol: str, start: int, end: int, kind: str):
    doc = path.endswith(".md")
    span = Span(path=path, lang="markdown" if doc else "python",
                category="doc" if doc else "code", kind=kind, symbol=symbol, qualname=symbol,
                start_line=start, end_line=end, text=f"def {symbol}():\n    pass\n", header="")  # fmt: skip
    return StoredSpan(span_id, span)


class FakeStore:
    """The two Store calls the stage makes: spans_by_ids and vectors (unused here)."""

    def __init__(self, missing: tuple[int, ...] = ()):
        self.spans = {
            i: stored_span(i, path, symbol, i * 10, i * 10 + 5, kind)
            for i, (_, kind, path, symbol) in NODES.items()
            if i not in missing
        }

    def spans_by_ids(self, ids) -> dict[int, StoredSpan]:
        return {i: self.spans[i] for i in ids if i in self.spans}


# Cosine of each span to the query, as the stored vectors would give it.
SIMS = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6, 5: 0.5, 6: 0.45, 7: 0.8, 8: 0.6, 9: 0.1}


def similarity(spans):
    return {s.id: SIMS[s.id] for s in spans}


def cfg(**kw) -> ExpandConfig:
    base = ExpandConfig(top_n=5, alpha=0.5, per_source=3, min_confidence=0.6,
                        hub_degree=50, semantic_floor=0.3)  # fmt: skip
    for k, v in kw.items():
        setattr(base, k, v)
    return base


def run(cands, config=None, **kw):
    return expand(cands, build_graph(), FakeStore(), config or cfg(), similarity, **kw)


def by_id(exp) -> dict[int, Candidate]:
    return {c.span_id: c for c in exp.candidates}


def test_adds_the_most_similar_neighbors_up_to_the_cap_scored_source_times_alpha() -> None:
    exp = run([Candidate(1, 0.04, ranks={"bm25": 1})])
    added = {a.span_id: a for a in exp.added}
    # helper 0.8, parse 0.7, test 0.5 beat the guide section (0.45); tokenize is under the
    # floor, Registry is a hub, ?mystery is unresolved (0.3), src/a.py is a file.
    assert list(added) == [2, 3, 5]
    assert [c.span_id for c in exp.candidates] == [1, 2, 3, 5]
    for span_id in (2, 3, 5):
        c = by_id(exp)[span_id]
        assert c.score == pytest.approx(0.04 * 0.5)
        assert c.sources == (GRAPH,) and c.ranks[GRAPH] == 1  # put there by the #1 result
    assert added[2].edge == "calls>" and added[5].edge == "<tests"
    assert exp.skipped == {
        "below the semantic floor": 1,
        "hubs": 1,
        "over the per-source cap": 1,
        "without a span of their own": 1,
    }


def test_per_source_cap_and_top_n() -> None:
    exp = run([Candidate(1, 0.04), Candidate(7, 0.03)], cfg(per_source=1))
    assert sorted(a.span_id for a in exp.added) == [2, 8]
    exp = run([Candidate(1, 0.04), Candidate(7, 0.03)], cfg(top_n=1))
    assert 8 not in {a.span_id for a in exp.added} and exp.sources == 1


def test_hub_is_skipped_unless_retrieval_found_it_or_the_query_names_it() -> None:
    assert 4 not in {a.span_id for a in run([Candidate(1, 0.04)], cfg(per_source=9)).added}
    named = run([Candidate(1, 0.04)], cfg(per_source=9), query_words=frozenset({"registry"}))
    assert 4 in {a.span_id for a in named.added}
    found = run([Candidate(1, 0.04), Candidate(4, 0.001)], cfg(per_source=9, top_n=1))
    lifted = {a.span_id: a for a in found.added}[4]
    assert lifted.lifted and by_id(found)[4].score == pytest.approx(0.02)
    assert set(by_id(found)[4].ranks) == {GRAPH}  # its own rank list was empty here
    assert by_id(found)[4].contributions[GRAPH] == pytest.approx(0.02 - 0.001)


def test_semantic_floor_and_confidence() -> None:
    exp = run([Candidate(7, 0.04)], cfg(semantic_floor=0.7))
    assert not exp.added and exp.skipped == {"below the semantic floor": 1}
    exp = run([Candidate(7, 0.04)], cfg(min_confidence=0.7))
    assert not exp.added and not exp.skipped  # the 0.6 edge is not followed at all
    no_floor = expand([Candidate(1, 0.04)], build_graph(), FakeStore(), cfg(per_source=9), None)
    assert 9 in {a.span_id for a in no_floor.added}  # no query vector: no floor


def test_edge_types_and_route_weight() -> None:
    exp = run([Candidate(1, 0.04)], cfg(edge_types=["tests", "mentions"]))
    assert sorted(a.span_id for a in exp.added) == [5, 6]
    docs_dropped = run(
        [Candidate(1, 0.04)],
        cfg(edge_types=["tests", "mentions"]),
        span_weight=lambda s: 0.0 if s.span.category == "doc" else 0.5,
    )
    assert [a.span_id for a in docs_dropped.added] == [5]
    assert by_id(docs_dropped)[5].score == pytest.approx(0.04 * 0.5 * 0.5)
    assert docs_dropped.skipped == {"weighted out by the route": 1}


def test_a_neighbor_retrieval_ranks_higher_is_left_alone() -> None:
    exp = run([Candidate(1, 0.04), Candidate(2, 0.035, ranks={"dense": 2})])
    assert 2 not in {a.span_id for a in exp.added}
    assert by_id(exp)[2].score == 0.035 and GRAPH not in by_id(exp)[2].ranks


@pytest.mark.parametrize("retrieved", [False, True])
def test_only_a_neighbor_retrieval_found_may_outrank_its_source(retrieved) -> None:
    # render calls format_row: PageRank favours format_row, and a huge weight would lift
    # it past render; only a neighbor with its own retrieval score may go past.
    cands = [Candidate(7, 0.04, ranks={"bm25": 1})]
    if retrieved:
        cands.append(Candidate(8, 0.001, ranks={"bm25": 40}))
    exp = run(cands, cfg(alpha=0.9, pagerank_prior=50.0))
    c = by_id(exp)
    assert [a.span_id for a in exp.added] == [8]
    assert {b.span_id for b in exp.boosts} == {7, 8}
    if retrieved:
        assert [x.span_id for x in exp.candidates] == [8, 7]
        assert c[8].sources == ("graph", "bm25")
    else:
        assert [x.span_id for x in exp.candidates] == [7, 8]
        assert c[8].score == pytest.approx(c[7].score * (1 - 1e-6))


def test_mutual_support_lifts_results_that_link_to_each_other() -> None:
    cands = [Candidate(1, 0.04), Candidate(7, 0.039), Candidate(8, 0.038)]
    exp = run(cands, cfg(mutual_support=0.5, top_n=0))
    # render and format_row call each other's way (one link each); search links to neither.
    assert [c.span_id for c in exp.candidates] == [7, 8, 1]
    assert by_id(exp)[7].score == pytest.approx(0.039 * 1.5)
    assert {b.span_id: b.why for b in exp.boosts} == {
        7: "linked to 1 top result(s)",
        8: "linked to 1 top result(s)",
    }


def test_priors_are_multiplicative_and_off_by_default() -> None:
    cands = [Candidate(1, 0.04), Candidate(2, 0.03), Candidate(7, 0.02)]
    plain = run(cands, cfg(top_n=0))
    assert [c.score for c in plain.candidates] == [0.04, 0.03, 0.02] and not plain.boosts
    support = run(cands, cfg(top_n=0, mutual_support=0.1))
    assert by_id(support)[1].score == pytest.approx(0.04 * 1.1)  # linked to helper
    assert by_id(support)[2].score == pytest.approx(0.03 * 1.1)
    assert by_id(support)[7].score == 0.02  # render links to nothing retrieved
    degree = run(cands, cfg(top_n=0, degree_prior=0.1, hub_degree=50))
    import math

    d = build_graph().degree(NODES[1][0], ExpandConfig().edge_types, "both")
    assert by_id(degree)[1].score == pytest.approx(
        0.04 * (1 + 0.1 * math.log1p(d) / math.log1p(50))
    )


def test_pinned_candidates_are_not_boosted_and_stay_first() -> None:
    pinned = Candidate(7, 0.05, ranks={"exact": 1}, pinned=True)
    exp = run([pinned, Candidate(1, 0.04), Candidate(2, 0.03)], cfg(mutual_support=1.0))
    assert exp.candidates[0] == pinned


def test_stale_spans_and_empty_input() -> None:
    exp = expand([Candidate(1, 0.04)], build_graph(), FakeStore(missing=(2,)), cfg(), similarity)
    assert 2 not in {a.span_id for a in exp.added}
    assert exp.skipped["no longer indexed"] == 1
    assert expand([], build_graph(), FakeStore(), cfg(), similarity).candidates == ()


def test_notes_name_every_addition() -> None:
    exp = run([Candidate(1, 0.04)])
    lines = exp.notes(lambda i: NODES[i][3])
    assert lines[0].startswith("expanded 1 result(s): 3 neighbor(s) added, 0 lifted; skipped")
    assert "added helper = 0.0200 via calls> from search, cos 0.80" in lines


# -- the stage in the pipeline, on the indexed fixture repo --------------------------------
@pytest.fixture(scope="module")
def graph_cfg(indexed_repo):
    cfg = load_config(indexed_repo)
    cfg.search.graph = True
    cfg.search.rerank = cfg.search.llm_rerank = cfg.search.hyde = False
    return cfg


def test_pipeline_lifts_a_neighbor_and_explains_it(indexed_repo, graph_cfg) -> None:
    cfg = copy.deepcopy(graph_cfg)
    cfg.search.ranker = "fusion"  # the lift below is measured against fusion's scores
    cfg.expand.alpha = 0.9
    cfg.expand.semantic_floor = 0.0
    with Searcher(indexed_repo, cfg) as s:
        r = s.search("Sum of price times quantity over every item", k=10, explain=True)
    notes = [n.note for n in r.explain.stages if n.stage == "graph"]
    assert notes[0] == "expanded 5 result(s): 0 neighbor(s) added, 1 lifted"
    assert notes[1].startswith("lifted tests/test_cart.py:1 test_cart = ")
    assert "via <imports from src/shop/cart.py:6 ShoppingCart" in notes[1]
    by_symbol = {x.symbol: (n, x) for n, x in enumerate(r.results)}
    n, lifted = by_symbol["test_cart"]
    source = by_symbol["ShoppingCart"][1]
    assert lifted.sources[0] == "graph"
    assert lifted.score == pytest.approx(source.score * 0.9 * cfg.search.test_weight)
    assert r.explain.ranks[n]["graph"] == by_symbol["ShoppingCart"][0] + 1
    assert "graph" in r.timings_ms


def test_pipeline_without_a_graph_degrades_with_one_line(repo_copy, graph_cfg) -> None:
    graph_path(repo_copy).unlink()
    with Searcher(repo_copy, graph_cfg) as s:
        on = s.search("charge the card", k=5)
    off_cfg = copy.deepcopy(graph_cfg)
    off_cfg.search.graph = False
    with Searcher(repo_copy, off_cfg) as s:
        off = s.search("charge the card", k=5)
    assert [w for w in on.warnings if "graph expansion is off" in w] == [on.warnings[0]]
    assert [(x.path, x.start_line) for x in on.results] == [
        (x.path, x.start_line) for x in off.results
    ]
