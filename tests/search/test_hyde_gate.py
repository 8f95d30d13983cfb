"""HyDE gating: vague natural-language questions get it; exact lookups do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc.config import Config
from llmc.search.hyde import HydeStage
from llmc.search.hyde.rules import gate
from llmc.search.router import fixed_route, route_query


@pytest.mark.parametrize(
    "query",
    [
        "how do I get my money back after buying something",
        "where is the retry delay computed",
        "what happens to the stored vectors when I switch to a different embedding model",
        "mutable default list shared between instances",
        # a long question that mentions an identifier is still a vague question
        "how does define decide whether to collect annotated attributes when auto_attribs is None",
        # a product name in a sentence is no identifier lookup
        "Flask SQLAlchemy quotes API example",
    ],
)
def test_vague_questions_use_hyde(query):
    verdict = gate(query)
    assert verdict.use, verdict.reason
    assert verdict.reason == "vague natural-language query"


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("parse_config", "identifier-shaped"),
        ("ShoppingCart", "identifier-shaped"),
        ("where is apply_discount", "identifier-shaped"),
        ("fetchOrders error handling", "identifier-shaped"),
        ("attrs.define options", "identifier-shaped"),
        ("`evolve` usage", "identifier-shaped"),
        ("VersionInfo comparison", "identifier-shaped"),
        # six words: underscores do not make a short lookup a long question
        ("slotted class cached_property __getattr__ wrapper generation", "identifier-shaped"),
        ("src/shop/cart.py", "names a path"),
        ("what does setup.cfg configure", "names a path"),
        ("E501 line too long", "error-code-shaped"),
        ("ORA-00942 table or view does not exist", "error-code-shaped"),
        ("ENOENT when opening the config file", "error-code-shaped"),
        ("HTTP 404 from the orders endpoint", "error-code-shaped"),
        ("exit code 137 in the indexer", "error-code-shaped"),
        ('File "cart.py", line 12, in total_price', "error-code-shaped"),
        ("ValueError unknown discount code", "names the error"),
        ('"unknown discount code"', "quoted exact lookup"),
        ("install", "short exact lookup"),
        ("getting started", "short exact lookup"),
        ("the cart", "short exact lookup"),
        ("how do I", "short exact lookup"),
    ],
)
def test_exact_lookups_skip_hyde(query, why):
    verdict = gate(query)
    assert not verdict.use
    assert verdict.reason.startswith(why), verdict.reason


def _stage(**hyde) -> HydeStage:
    cfg = Config()
    for key, value in hyde.items():
        setattr(cfg.hyde, key, value)
    return HydeStage(Path("/nonexistent"), cfg)


def test_auto_mode_serves_only_the_configured_intents():
    query = "how do I get my money back after buying something"
    decision = route_query(query)
    assert decision.intent == "docs"
    assert _stage(intents=["docs"]).decide(query, decision).use
    verdict = _stage(intents=["code", "mixed"]).decide(query, decision)
    assert not verdict.use and verdict.reason == "docs intent: not in hyde.intents"


def test_always_mode_skips_the_gate():
    verdict = _stage(mode="always", intents=[]).decide("parse_config", fixed_route("code", "flag"))
    assert verdict.use and "always" in verdict.reason


def test_auto_mode_still_gates_shapes_for_served_intents():
    stage = _stage(intents=["code", "docs", "mixed"])
    verdict = stage.decide("apply_discount", fixed_route("code", "flag"))
    assert not verdict.use and verdict.reason.startswith("identifier-shaped")


def test_auto_mode_can_wait_for_weak_dense_results():
    query = "how do I get my money back after buying something"
    decision = route_query(query)
    stage = _stage(intents=["docs"], dense_below=0.5)
    assert stage.decide(query, decision, dense_best=0.42).use
    verdict = stage.decide(query, decision, dense_best=0.61)
    assert (
        not verdict.use and verdict.reason == "raw dense found cosine 0.61 >= hyde.dense_below 0.5"
    )
    assert stage.decide(query, decision, dense_best=None).use  # dense off: nothing to wait for
    assert _stage(intents=["docs"]).decide(query, decision, dense_best=0.99).use  # 1.0: any
