"""The learned ranker at query time: features by hand, the tree walk by hand, the shipped
model, and the pipeline with it on the fixture repo (real model, indexed once)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from llmc.config import load_config
from llmc.search import Searcher, router
from llmc.search.features import (
    FEATURES,
    MISSING_RANK,
    MISSING_REL,
    MISSING_SCORE,
    QueryInfo,
    SpanMeta,
    build_pool,
    path_class,
    query_shape,
)
from llmc.search.learned import blend_rrf, load_model, model_from_json, rank_pool, rrf_order
from llmc.search.types import Candidate, Hit, RankedList, RouteDecision

COL = {name: i for i, name in enumerate(FEATURES)}


def decision(p_code: float = 0.8, intent: str = "code") -> RouteDecision:
    return RouteDecision(intent, p_code, {"code": 1.0, "docs": 0.5}, abs(2 * p_code - 1))


def meta(span_id: int, path: str, kind: str = "function", symbol: str = "") -> SpanMeta:
    category = "doc" if path.endswith(".md") else "code"
    return SpanMeta(span_id, path, category, kind, symbol, symbol, 1, 10, 0)


def test_features_ranks_scores_and_sentinels() -> None:
    lists = [
        RankedList("bm25", "code", (Hit(1, 8.0), Hit(2, 4.0))),
        RankedList("dense", "code", (Hit(2, 0.9), Hit(3, 0.6))),
        RankedList("bm25", "doc", (Hit(4, 2.0),)),
    ]
    metas = {
        1: meta(1, "src/shop/cart.py", symbol="apply_discount"),
        2: meta(2, "tests/test_cart.py", symbol="test_discount"),
        3: meta(3, "examples/demo.py", kind="module"),
        4: meta(4, "docs/guide.md", kind="section", symbol="Discounts"),
    }
    pool = build_pool(lists, QueryInfo("apply a discount code", decision(), pinned=(1,)), metas)
    assert pool.span_ids == (1, 2, 3, 4)
    row = {sid: pool.matrix[i] for i, sid in enumerate(pool.span_ids)}
    assert row[2][COL["bm25.code:rank"]] == 2
    assert row[2][COL["bm25.code:rel"]] == pytest.approx(0.5)
    assert row[2][COL["dense.code:rank"]] == 1
    assert row[3][COL["dense.code:rel"]] == pytest.approx(0.6 - 0.9)
    # not retrieved by a list: its sentinels
    assert row[1][COL["dense.code:rank"]] == MISSING_RANK
    assert row[1][COL["dense.code:score"]] == MISSING_SCORE
    assert row[1][COL["dense.code:rel"]] == MISSING_REL
    assert row[4][COL["exact:rank"]] == MISSING_RANK
    # over lists
    assert row[2][COL["pool:n_lists"]] == 2
    assert row[2][COL["pool:rrf"]] == pytest.approx(1 / 62 + 1 / 61)
    assert row[1][COL["pool:pinned"]] == 1 and row[2][COL["pool:pinned"]] == 0
    # the query: router probabilities are features
    assert row[3][COL["query:p_code"]] == pytest.approx(0.8)
    assert row[3][COL["query:intent_code"]] == 1
    # the span and its path class
    assert row[2][COL["path:test"]] == 1 and row[1][COL["path:test"]] == 0
    assert row[3][COL["path:example"]] == 1
    assert row[4][COL["path:docs"]] == 1 and row[4][COL["span:is_code"]] == 0
    assert row[4][COL["span:kind_section"]] == 1
    # query words "apply", "discount", "code" against the symbol apply_discount
    assert row[1][COL["overlap:symbol"]] == pytest.approx(2 / 3)


def test_path_class() -> None:
    assert path_class("tests/test_x.py")["path:test"] == 1
    assert path_class("src/pkg/mod_test.py")["path:test"] == 1
    assert path_class("docs/api/index.rst")["path:docs"] == 1
    assert path_class("CHANGES.md")["path:docs"] == 1
    assert path_class("examples/run.py")["path:example"] == 1
    assert path_class("types/index.d.ts")["path:stub"] == 1
    assert path_class("README.md")["path:readme"] == 1
    assert path_class("a/b/c.py")["path:depth"] == 2
    assert path_class("src/pkg/core.py")["path:test"] == 0


def hand_model() -> dict:
    """Two trees over FEATURES: tree 0 splits on bm25.code:rank <= 1.5 (left +1, right -1);
    tree 1 on path:test <= 0.5 (left +0.5, right -0.5)."""
    return {
        "format": "llmc-ranker-v1",
        "features": list(FEATURES),
        "depth": 1,
        "trees": [
            {
                "feature": [COL["bm25.code:rank"], -1, -1],
                "threshold": [1.5, 0, 0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "value": [0.0, 1.0, -1.0],
            },
            {
                "feature": [COL["path:test"], -1, -1],
                "threshold": [0.5, 0, 0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "value": [0.1, 0.5, -0.5],
            },
        ],
    }


def test_tree_walk_by_hand() -> None:
    model = model_from_json(hand_model())
    x = np.zeros((3, len(FEATURES)), dtype=np.float32)
    x[0, COL["bm25.code:rank"]] = 1  # +1, not a test: +0.5
    x[1, COL["bm25.code:rank"]] = 2  # -1, a test: -0.5
    x[1, COL["path:test"]] = 1
    x[2, COL["bm25.code:rank"]] = MISSING_RANK  # -1, +0.5
    assert model.predict(x).tolist() == pytest.approx([1.5, -1.5, -0.5])
    shares = model.contributions(x[1])
    assert shares == pytest.approx({"bm25.code:rank": -1.0, "path:test": -0.6})


def test_rank_pool_orders_by_model_and_explains() -> None:
    lists = [RankedList("bm25", "code", (Hit(7, 3.0), Hit(8, 2.0)))]
    metas = {7: meta(7, "tests/test_a.py"), 8: meta(8, "src/a.py")}
    pool = build_pool(lists, QueryInfo("a", decision()), metas)
    ranked, explained = rank_pool(pool, model_from_json(hand_model()), explain_top=2)
    # 7: rank 1 (+1) but a test (-0.5) = 0.5; 8: rank 2 (-1), not a test (+0.5) = -0.5
    assert [c.span_id for c in ranked] == [7, 8]
    assert ranked[0].score == pytest.approx(0.5)
    assert ranked[0].contributions == {"bm25.code": pytest.approx(1.0)}
    assert explained[8]["path:test"] == pytest.approx(0.4)


def test_shipped_model_loads() -> None:
    model = load_model("default")
    assert model.features == FEATURES
    assert model.trees > 0
    scores = model.predict(np.zeros((2, len(FEATURES)), dtype=np.float32))
    assert scores.shape == (2,) and np.isfinite(scores).all()


def walk(model, row: np.ndarray) -> float:
    """One row through every tree, node by node: the tree walk by the book."""
    total = 0.0
    for t in range(model.trees):
        node = 0
        while not model.is_leaf[t, node]:
            go_left = float(row[model.feature[t, node]]) <= model.threshold[t, node]
            node = int(model.left[t, node] if go_left else model.right[t, node])
        total += float(model.value[t, node])
    return total


def test_shipped_model_predicts_as_the_trees_walk() -> None:
    model = load_model("default")
    rng = np.random.default_rng(0)
    x = rng.normal(0, 3, size=(64, len(FEATURES))).astype(np.float32)
    x[:, ::2] = np.round(x[:, ::2])  # many values on the thresholds' grid
    x[:8] = 0.0
    assert model.predict(x) == pytest.approx([walk(model, r) for r in x], abs=1e-9)


def test_pool_span_columns_are_span_row() -> None:
    """build_pool fills the span, path and overlap columns column-wise from per-span
    values it remembers: they must be exactly what span_row says, for every span."""
    from llmc.search.features import span_row

    metas = {
        1: SpanMeta(1, "src/shop/cart.py", "code", "method", "apply", "Cart.apply", 3, 9, 0),
        2: SpanMeta(
            2, "tests/test_cart.py", "code", "function", "test_apply", "test_apply", 1, 1, 2
        ),
        3: SpanMeta(3, "docs/guide/README.md", "doc", "section", "Discount codes", "", 5, 40, 1),
        4: SpanMeta(4, "types/index.d.ts", "code", "block", "", "", 10, 300, 0),
    }
    lists = [RankedList("bm25", "code", tuple(Hit(i, 10.0 - i) for i in (1, 2, 3, 4, 5)))]
    for text in ("apply a discount code in the cart", "???", "readme guide"):
        query = QueryInfo(text, decision())
        for _ in range(2):  # the second time from what was remembered
            pool = build_pool(lists, query, metas)
            for i, span_id in enumerate(pool.span_ids):
                want = span_row(metas.get(span_id), query.words)
                for name in FEATURES:
                    if name.startswith(("span:", "path:", "overlap:")):
                        assert pool.matrix[i, COL[name]] == np.float32(want.get(name, 0.0))


@pytest.fixture(scope="module")
def learned(indexed_repo):
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.search.ranker = "learned"
    cfg.search.hyde = False
    with Searcher(indexed_repo, cfg) as s:
        yield s


def test_pipeline_with_the_shipped_model(learned) -> None:
    response = learned.search("Reduce the total by the percentage in a discount code", k=5)
    assert response.results[0].path == "src/shop/cart.py"
    assert response.results[0].symbol == "apply_discount"
    assert "ranker" in response.timings_ms and "fusion" not in response.timings_ms
    assert not response.warnings


def test_pool_holds_every_list_and_explain_names_features(learned) -> None:
    pool = learned.candidate_pool("charge a card payment")
    assert len(pool) == pool.matrix.shape[0] and pool.matrix.shape[1] == len(FEATURES)
    names = {n for r in pool.ranks for n in r}
    assert {"bm25.code", "dense.code", "dense.doc"} <= names  # both routes, not gated
    response = learned.search("charge a card payment", k=3, explain=True)
    notes = [s.note for s in response.explain.stages if s.stage == "ranker"]
    assert notes and "learned ranker" in notes[0]
    assert any(":" in n and ("+" in n or "-" in n) for n in notes[1:])


def test_the_pool_of_a_report_has_the_whole_reports_shape(learned) -> None:
    """The ranker's shape columns come from the whole query, not the router's focus (as
    the training pools compute them): a report with a traceback reads as one."""
    report = (
        "Discount codes are applied twice at checkout\n\n"
        "When a customer enters a discount code and then changes the quantity of an item, "
        "the total is reduced by the percentage a second time. Expected the discount once.\n\n"
        "```\nTraceback (most recent call last):\n"
        '  File "/home/me/shop/src/shop/cart.py", line 12, in apply_discount\n'
        "    total = total * (1 - code.percent / 100)\nValueError: negative total\n```\n"
    )
    pool = learned.candidate_pool(report)
    row = pool.matrix[0]
    for name, value in query_shape(report, learned.cfg.search.max_query_chars).items():
        assert row[FEATURES.index(name)] == pytest.approx(value), name
    assert row[FEATURES.index("query:long")] == 1.0
    assert row[FEATURES.index("query:frames")] > 0.0  # log1p of the frames quoted


def test_missing_model_falls_back_to_fusion(indexed_repo, tmp_path) -> None:
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.search.ranker = "learned"
    cfg.search.ranker_model = str(tmp_path / "nope.json")
    with Searcher(indexed_repo, cfg) as s:
        response = s.search("ShoppingCart")
    assert response.results and "fusion" in response.timings_ms
    assert any("ranker model" in w for w in response.warnings)


def test_auto_ranks_docs_questions_by_fusion(indexed_repo) -> None:
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.search.ranker = "auto"
    cfg.search.hyde = False
    with Searcher(indexed_repo, cfg) as s:
        docs = s.search("how do I install the toolkit with pip", k=3)
        code = s.search("where is apply_discount implemented", k=3)
    assert docs.route.intent == "docs" and "fusion" in docs.timings_ms
    assert code.route.intent == "code" and "ranker" in code.timings_ms
    assert code.results[0].symbol == "apply_discount"


def test_learned_is_the_default_but_not_for_test_questions_or_fixed_routes(indexed_repo) -> None:
    cfg = copy.deepcopy(load_config(indexed_repo))
    assert cfg.search.ranker == "learned"
    cfg.search.hyde = False
    with Searcher(indexed_repo, cfg) as s:
        tests = s.search("tests for apply discount", k=3, explain=True)
        docs = s.search("discount codes", k=3, route="docs")
        exact = s.search("ShoppingCart", k=3)
    # no training query asked for tests, so fusion ranks those (and says so)
    assert "fusion" in tests.timings_ms and "ranker" not in tests.timings_ms
    assert tests.results[0].path == "tests/test_cart.py"
    assert any("asks about tests" in x.note for x in tests.explain.stages)
    # a route fixed by --route stays the only one searched
    assert "ranker" in docs.timings_ms
    assert docs.results and all(r.path.endswith(".md") for r in docs.results)
    # exact-symbol lookup is a feature here, and still a named source
    assert exact.results[0].symbol == "ShoppingCart" and "exact" in exact.results[0].sources


def test_rrf_order_merges_each_retriever_by_score() -> None:
    lists = [
        RankedList("bm25", "code", (Hit(1, 9.0), Hit(2, 3.0))),
        RankedList("bm25", "doc", (Hit(3, 5.0),)),  # between 1 and 2 in the merged BM25 list
        RankedList("dense", "code", (Hit(2, 0.9), Hit(1, 0.8))),
        RankedList("dense", "doc", (Hit(4, 0.95),)),
        RankedList("exact", None, (Hit(5, 1.0),)),  # takes no part, as in the rrf baseline
    ]
    # merged BM25: 1, 3, 2; merged dense: 4, 2, 1 -> RRF: 1 (1st + 3rd), 2 (3rd + 2nd), 4, 3
    assert rrf_order(lists) == {1: 1, 2: 2, 4: 3, 3: 4}
    assert rrf_order(lists, depth=1) == {1: 1, 4: 1 + 1}  # top 1 of each list, ties by span id


def test_blend_rrf_moves_what_both_rank_well_above_a_learned_only_pick() -> None:
    ranked = [Candidate(span_id=i, score=10.0 - i) for i in (7, 1, 2, 3)]  # the trees' order
    lists = [
        RankedList("bm25", "code", (Hit(1, 9.0), Hit(2, 8.0), Hit(3, 7.0))),
        RankedList("dense", "code", (Hit(1, 0.9), Hit(2, 0.8), Hit(3, 0.7))),
    ]  # span 7: only the exact list found it, so it has no RRF rank
    assert [c.span_id for c in blend_rrf(ranked, lists, 0.0, 10)] == [7, 1, 2, 3]
    # weight 0.2, k 10: 7 = 0.8/11 + 0.2/(10 + 8) = 0.0838; 1 = 0.8/12 + 0.2/11 = 0.0848
    out = blend_rrf(ranked, lists, 0.2, 10)
    assert [c.span_id for c in out] == [1, 7, 2, 3]
    assert out[0].score == pytest.approx(0.8 / 12 + 0.2 / 11)
    # a smaller weight keeps the trees' first pick first
    assert [c.span_id for c in blend_rrf(ranked, lists, 0.1, 10)] == [7, 1, 2, 3]


def test_learned_results_take_their_own_per_file_cap(indexed_repo) -> None:
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.search.hyde = False
    assert cfg.search.ranker_max_per_file == 0 and cfg.search.ranker_rrf_weight > 0
    query = "shopping cart discount total payment"
    with Searcher(indexed_repo, cfg) as s:
        free = s.search(query, k=10, explain=True)
    cfg.search.ranker_max_per_file = 1
    with Searcher(indexed_repo, cfg) as s:
        capped = s.search(query, k=10)
    per_file = {}
    for r in capped.results:
        per_file[r.path] = per_file.get(r.path, 0) + 1
    files = len(per_file)
    # with a cap of 1 a file's extra spans come back only after every other file's first
    assert [r.path for r in capped.results[:files]] == list(
        dict.fromkeys(r.path for r in capped.results)
    )
    assert (
        max(sum(r.path == p for r in free.results[:files]) for p in per_file) > 1
    )  # without the cap one file holds several of the first results
    notes = [x.note for x in free.explain.stages if x.stage == "ranker"]
    assert "blended with the BM25 + dense RRF order" in notes[0]


@pytest.mark.parametrize(
    ("query", "question"),
    [
        ("how do I install the toolkit with pip", True),
        ("Why does checkout charge twice", True),
        ("what's the default currency", True),
        ("the discount is applied twice?", True),
        ('"can I" use a coupon', True),
        ("Reduce the total by the percentage in a discount code", False),  # a docstring
        ("Fix rounding of discounts", False),  # a commit subject
        ("ShoppingCart.total", False),
        ("however the cart is empty", False),  # "how" only as a word's start
        ("is_valid coupon check", False),  # a name, not a question word
        ("has_discount(cart)", False),
        ("Is the cart saved, when the tab closes", True),
        ("", False),
    ],
)
def test_is_question(query: str, question: bool) -> None:
    assert router.is_question(query) is question


def test_a_question_weighs_rrf_more_in_the_blend(indexed_repo) -> None:
    """A short question blends RRF at ranker_question_rrf_weight, other queries at
    ranker_rrf_weight (the trace says which)."""
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.search.hyde = False
    assert cfg.search.ranker_question_rrf_weight > cfg.search.ranker_rrf_weight
    same = copy.deepcopy(cfg)
    same.search.ranker_question_rrf_weight = cfg.search.ranker_rrf_weight
    query = "how do I apply a discount code to the cart total"
    with Searcher(indexed_repo, cfg) as s, Searcher(indexed_repo, same) as t:
        asked = s.search(query, k=10, explain=True)
        stated = s.search("apply a discount code to the cart total", k=10, explain=True)
        flat = t.search(query, k=10, explain=True)
    notes = [x.note for x in asked.explain.stages if x.stage == "ranker"]
    assert any(
        f"a question: RRF weighs {cfg.search.ranker_question_rrf_weight:g}" in n for n in notes
    )
    assert any(f"weight {cfg.search.ranker_question_rrf_weight:g}," in n for n in notes)
    stated_notes = [x.note for x in stated.explain.stages if x.stage == "ranker"]
    assert not any("a question" in n for n in stated_notes)
    assert any(f"weight {cfg.search.ranker_rrf_weight:g}," in n for n in stated_notes)
    assert any(f"weight {cfg.search.ranker_rrf_weight:g}," in n
               for n in (x.note for x in flat.explain.stages if x.stage == "ranker"))  # fmt: skip
    assert asked.results[0].symbol == "apply_discount"
