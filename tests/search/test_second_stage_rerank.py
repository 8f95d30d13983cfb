"""Cross-encoder stage (llmc/search/rerank.py): ordering rules with a scripted scorer, then
the real reranker llmc ships reordering a real candidate list, and the stage in the
pipeline (trace, flags, a missing model)."""

from __future__ import annotations

import copy

import pytest

from llmc.config import load_config
from llmc.errors import ConfigError, ModelError
from llmc.models.reranker import SHIPPED_DIR, WEIGHTS, get_reranker, span_passage
from llmc.search import Searcher
from llmc.search.rerank import RERANK, rerank
from llmc.search.types import Candidate

shipped = pytest.mark.skipif(
    not (SHIPPED_DIR / WEIGHTS).is_file(),
    reason="the shipped reranker weights are not in llmc/models/reranker/ yet",
)


class Scripted:
    """A reranker that scores each passage by a table; records what it was asked."""

    model_id = "scripted"

    def __init__(self, table: dict[str, float]):
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, texts: list[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        return [self.table[t] for t in texts]


def cands(*scores: float, pinned: int = 0) -> list[Candidate]:
    return [
        Candidate(i, s, ranks={"bm25": i}, pinned=i <= pinned)
        for i, s in enumerate(scores, start=1)
    ]


PASSAGES = {i: f"p{i}" for i in range(1, 9)}


def test_replace_orders_the_window_by_the_model_and_keeps_the_rest_below() -> None:
    model = Scripted({"p1": 0.1, "p2": 0.9, "p3": 0.5, "p4": 0.7, "p5": 0.99})
    out = rerank("q", cands(0.05, 0.04, 0.03, 0.02, 0.01, 0.009), PASSAGES, model, top_k=4)
    assert [c.span_id for c in out.candidates] == [2, 4, 3, 1, 5, 6]  # 5, 6 past the window
    assert [c.score for c in out.candidates[:4]] == [0.9, 0.7, 0.5, 0.1]
    scores = [c.score for c in out.candidates]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert out.candidates[0].scores[RERANK] == 0.9 and out.scored == 4
    assert out.moves == ((2, 2, 1), (4, 4, 2), (1, 1, 4))
    assert model.calls == [("q", ["p1", "p2", "p3", "p4"])]  # one batch, the query as given


def test_blend_mixes_the_probability_with_the_fused_share_of_the_best() -> None:
    model = Scripted({"p1": 0.0, "p2": 1.0, "p3": 0.4})
    out = rerank("q", cands(0.03, 0.02, 0.01), PASSAGES, model, 3, "blend", 0.5)
    # fused / top = 1, 2/3, 1/3 -> 0.5 * (0, 1, 0.4) + 0.5 * (1, 2/3, 1/3)
    assert [c.span_id for c in out.candidates] == [2, 1, 3]
    assert [c.score for c in out.candidates] == pytest.approx([5 / 6, 0.5, 0.2 + 1 / 6])
    fused_only = rerank("q", cands(0.03, 0.02, 0.01), PASSAGES, model, 3, "blend", 0.0)
    assert [c.span_id for c in fused_only.candidates] == [1, 2, 3] and not fused_only.moves


def test_blend_scales_logits_to_the_window_first() -> None:
    model = Scripted({"p1": -2.0, "p2": 3.0, "p3": 0.0})  # a model without a sigmoid
    out = rerank("q", cands(0.03, 0.02, 0.01), PASSAGES, model, 3, "blend", 0.5)
    assert [c.score for c in out.candidates] == pytest.approx([5 / 6, 0.5, 0.2 + 1 / 6])
    assert out.candidates[0].scores[RERANK] == 3.0  # the raw score stays in the trace


def test_blend_scales_fused_scores_below_zero_to_the_window() -> None:
    model = Scripted({"p1": 0.0, "p2": 1.0, "p3": 0.4})
    out = rerank("q", cands(1.0, 0.0, -1.0), PASSAGES, model, 3, "blend", 0.5)
    # the learned ranker's scores: min-max over the window, 1, 1/2, 0
    assert [c.score for c in out.candidates] == pytest.approx([0.75, 0.5, 0.2])


def test_pinned_stay_first_and_spans_without_text_drop_below_the_window() -> None:
    model = Scripted({"p2": 0.2, "p3": 0.8, "p4": 0.5})
    passages = {i: p for i, p in PASSAGES.items() if i != 4}
    out = rerank("q", cands(0.9, 0.04, 0.03, 0.02, 0.01, pinned=1), passages, model, 4)
    assert [c.span_id for c in out.candidates] == [1, 3, 2, 4, 5]
    assert out.candidates[0].pinned and out.candidates[0].score > 0.8
    assert model.calls[0][1] == ["p2", "p3"]


def test_ties_keep_the_fused_order_and_short_windows_are_left_alone() -> None:
    model = Scripted({"p1": 0.5, "p2": 0.5, "p3": 0.5})
    out = rerank("q", cands(0.03, 0.02, 0.01), PASSAGES, model, 3)
    assert [c.span_id for c in out.candidates] == [1, 2, 3]
    one = rerank("q", cands(0.03), PASSAGES, model, 3)
    assert one.scored == 0 and len(model.calls) == 1


def test_bad_settings_and_bad_models() -> None:
    model = Scripted({"p1": 0.5, "p2": 0.5})
    with pytest.raises(ConfigError, match="rerank.blend must be one of replace, blend"):
        rerank("q", cands(0.2, 0.1), PASSAGES, model, 2, "mix")
    with pytest.raises(ConfigError, match="blend_weight"):
        rerank("q", cands(0.2, 0.1), PASSAGES, model, 2, "blend", 2.0)

    class Short(Scripted):
        def score(self, query, texts):
            return [0.5]

    with pytest.raises(ModelError, match="1 scores for 2 passages"):
        rerank("q", cands(0.2, 0.1), PASSAGES, Short({}), 2)


# -- the real shipped model ------------------------------------------------------------------
@shipped
def test_the_shipped_reranker_puts_the_answer_first(indexed_repo) -> None:
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(indexed_repo), readonly=True)
    try:
        spans = {s.span.symbol: s for s in store.iter_spans()}
    finally:
        store.close()
    # A fused list with the answer last: the model reads each span and moves it up.
    order = ["refund_payment", "compute_legacy_vat", "renderInvoice", "add_item", "apply_discount"]
    fused = [Candidate(spans[n].id, 0.05 - i * 0.01) for i, n in enumerate(order)]
    passages = {spans[n].id: span_passage(spans[n].span) for n in order}
    model = get_reranker("default", "cpu")
    out = rerank(
        "reduce the total by the percentage a discount code encodes", fused, passages, model, 20
    )
    assert out.candidates[0].span_id == spans["apply_discount"].id
    assert out.scored == 5 and (spans["apply_discount"].id, 5, 1) in out.moves


@pytest.fixture(scope="module")
def rerank_cfg(indexed_repo):
    cfg = load_config(indexed_repo)
    cfg.set("search.rerank", True, "test")  # asked for: runs whatever the latency budget
    cfg.search.graph = cfg.search.llm_rerank = cfg.search.hyde = False
    cfg.rerank.device = "cpu"
    return cfg


@shipped
def test_pipeline_reranks_with_the_original_query_and_traces_it(indexed_repo, rerank_cfg):
    with Searcher(indexed_repo, rerank_cfg) as s:
        r = s.search("where is a refund given back to the customer", k=5, explain=True)
    notes = [n.note for n in r.explain.stages if n.stage == "rerank"]
    blend = rerank_cfg.rerank.blend
    assert len(notes) == 1 and notes[0].startswith(f"llmc/reranker-minilm-l6 ({blend}) scored")
    assert r.results[0].symbol == "refund_payment"
    assert "rerank" in r.timings_ms
    scores = [x.score for x in r.results]
    assert scores == sorted(scores, reverse=True)


def test_a_missing_model_degrades_with_one_warning(indexed_repo, rerank_cfg, tmp_path) -> None:
    cfg = copy.deepcopy(rerank_cfg)
    cfg.rerank.model = str(tmp_path / "no-such-model")
    off = copy.deepcopy(cfg)
    off.search.rerank = False
    query = "discount code percentage"
    with Searcher(indexed_repo, cfg) as s:
        on = s.search(query, k=5)
    with Searcher(indexed_repo, off) as s:
        plain = s.search(query, k=5)
    assert [w for w in on.warnings if "rerank is off" in w] == list(on.warnings)
    assert len(on.warnings) == 1 and "no-such-model" in on.warnings[0]
    assert [x.span_id for x in on.results] == [x.span_id for x in plain.results]


def test_search_flags_switch_the_second_stage(indexed_repo, runner, monkeypatch) -> None:
    from llmc.cli import main
    from llmc.cli.search import _second_stage_overrides

    assert _second_stage_overrides(False, False, None) == {
        "search.graph": False,
        "search.rerank": False,
    }
    assert _second_stage_overrides(None, True, True) == {
        "search.graph": None,
        "search.rerank": True,
        "search.llm_rerank": True,
        "llm_rerank.always": True,
    }
    assert _second_stage_overrides(None, None, False)["search.llm_rerank"] is False
    monkeypatch.setenv("LLMC_SEARCH__RERANK", "true")
    monkeypatch.setenv("LLMC_RERANK__MODEL", "/nonexistent/model")
    monkeypatch.setenv("LLMC_SEARCH__HYDE", "false")
    args = ["search", "discount code", "--repo", str(indexed_repo), "--json"]
    warned = runner.invoke(main, args)
    assert warned.exit_code == 0 and "rerank is off" in warned.output
    quiet = runner.invoke(main, [*args, "--no-rerank", "--no-graph", "--no-llm-rerank"])
    assert quiet.exit_code == 0, quiet.output
    assert "rerank is off" not in quiet.output
    graphed = runner.invoke(main, [*args, "--no-rerank", "--graph", "--explain"])
    assert graphed.exit_code == 0, graphed.output
    assert '"stage": "graph"' in graphed.output and '"stage": "rerank"' not in graphed.output
