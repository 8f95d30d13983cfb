"""The adaptive threshold (step-down math, per-category lists), hypothesis plans and the
clean-up and garbage checks of hypotheses. Hand numbers, fake store and embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llmc.config import Config
from llmc.errors import ConfigError
from llmc.search.hyde import HydeStage
from llmc.search.hyde.rules import check, clean, garbage, plan, step_down, thresholds
from llmc.search.router import fixed_route, route_query
from llmc.search.types import RouteDecision

LADDER = [0.7, 0.6, 0.5, 0.4, 0.3]


def test_thresholds_from_initial_down_to_min():
    assert thresholds(0.7, 0.1, 0.3) == LADDER  # no 0.30000000000000004
    assert thresholds(0.7, 0.25, 0.3) == [0.7, 0.45]  # 0.2 would be below the minimum
    assert thresholds(0.5, 0.0, 0.3) == [0.5]  # no step: one try
    assert thresholds(0.4, 0.1, 0.4) == [0.4]
    with pytest.raises(ConfigError, match="min_threshold"):
        thresholds(0.3, 0.1, 0.5)


@pytest.mark.parametrize(
    ("best", "expected"),
    [
        (0.82, (0.7, 0)),  # found at the initial threshold: no step
        (0.70, (0.7, 0)),  # reaching the threshold counts
        (0.7 - 1e-12, (0.7, 0)),  # float noise around a threshold counts as reaching it
        (0.55, (0.5, 2)),  # 0.7 and 0.6 find nothing: two steps down
        (0.30, (0.3, 4)),
        (0.29, (None, 4)),  # nothing even at the minimum: all the way down, nothing
        (None, (None, 4)),  # no hits at all
    ],
)
def test_step_down(best, expected):
    assert step_down(best, LADDER) == expected


def test_step_down_with_a_single_threshold():
    assert step_down(0.1, [0.5]) == (None, 0)
    assert step_down(0.5, [0.5]) == (0.5, 0)


class FakeStore:
    """``knn`` answers per query vector (its first component picks the answer); the stage
    is handed the bound method, as the pipeline hands it ``Sources.knn``."""

    def __init__(self, answers):
        self.answers = answers
        self.asked = []

    def knn(self, category, vector, k):
        self.asked.append((category, k))
        return self.answers[int(vector[0])][:k]


def test_dense_list_keeps_hits_at_the_effective_threshold_merged_by_best_cosine():
    store = FakeStore(
        {
            0: [(1, 0.55), (2, 0.52), (3, 0.41)],
            1: [(2, 0.58), (4, 0.49), (5, 0.31)],
        }
    )

    def embed(category, texts):
        assert category == "doc" and texts == ["first", "second"]
        return np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)

    stage = HydeStage(Path("/nonexistent"), Config())
    ranked, step = stage._dense(store.knn, embed, "doc", ["first", "second"], depth=50)
    # best 0.58: nothing at 0.7 or 0.6, so 0.5 after two steps; span 2 at its best cosine
    assert (step.threshold, step.steps, step.best) == (0.5, 2, 0.58)
    assert ranked.name == "hyde.doc"
    assert [(h.span_id, h.score) for h in ranked.hits] == [(2, 0.58), (1, 0.55)]
    assert step.hits == 2
    assert store.asked == [("doc", 50), ("doc", 50)]


def test_dense_list_is_empty_when_nothing_reaches_the_minimum():
    store = FakeStore({0: [(1, 0.25), (2, 0.1)]})
    stage = HydeStage(Path("/nonexistent"), Config())
    ranked, step = stage._dense(
        store.knn, lambda c, t: np.zeros((1, 2), np.float32), "code", ["h"], depth=10
    )
    assert ranked.hits == () and step.threshold is None and step.steps == 4 and step.best == 0.25


def test_dense_off_gives_no_list_and_no_step():
    stage = HydeStage(Path("/nonexistent"), Config())
    ranked, step = stage._dense(FakeStore({}).knn, lambda c, t: None, "code", ["h"], depth=10)
    assert ranked.hits == () and step is None


def test_configured_thresholds_are_used():
    cfg = Config()
    cfg.hyde.initial_threshold, cfg.hyde.threshold_step, cfg.hyde.min_threshold = 0.5, 0.2, 0.1
    store = FakeStore({0: [(7, 0.2), (8, 0.05)]})
    ranked, step = HydeStage(Path("/x"), cfg)._dense(
        store.knn, lambda c, t: np.zeros((1, 2), np.float32), "code", ["h"], depth=5
    )
    assert (step.threshold, step.steps) == (0.1, 2)  # 0.5, 0.3, 0.1
    assert [h.span_id for h in ranked.hits] == [7]


def test_plan_follows_the_route():
    assert plan(fixed_route("code", "flag"), 3) == ["code", "code", "code"]
    assert plan(fixed_route("docs", "flag"), 2) == ["docs", "docs"]
    mixed = fixed_route("mixed", "flag")  # p_code 0.5: code is favoured
    assert plan(mixed, 1) == ["code"]
    assert plan(mixed, 3) == ["code", "docs", "code"]
    docs_only = RouteDecision("mixed", 0.4, {"docs": 1.0, "code": 0.0}, 0.2)
    assert plan(docs_only, 2) == ["docs", "docs"]
    assert plan(route_query("how do I install the toolkit"), 1) == ["docs"]


def test_clean_drops_preamble_fences_and_loops():
    text = (
        "Sure! Here is the code you asked for:\n```python\ndef refund(receipt):\n"
        "    return True\n    return True\n    return True\n```\n"
    )
    assert clean(text) == "def refund(receipt):\n    return True"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty answer"),
        ("   \n ", "empty answer"),
        ("ok then", "too short"),
        ("{} [] () <> ;; ## !! ?? ** && || %% $$ 12 34 a b c", "hardly any words"),
        ("the " * 40, "repeats itself"),
    ],
)
def test_garbage(text, why):
    assert garbage(text) == why


def test_a_real_looking_answer_is_not_garbage():
    assert garbage("def refund_payment(receipt_id):\n    return gateway.refund(receipt_id)") is None


def test_check_rejects_unusable_settings():
    for key, value, match in [
        ("mode", "sometimes", "hyde.mode"),
        ("intents", ["code", "tests"], "hyde.intents"),
        ("n", 0, "hyde.n"),
        ("max_tokens", 0, "hyde.max_tokens"),
        ("min_threshold", 0.9, "min_threshold"),
    ]:
        cfg = Config()
        setattr(cfg.hyde, key, value)
        with pytest.raises(ConfigError, match=match):
            check(cfg)
    check(Config())
