"""Router cases: each cue moves p_code the documented way, with a reason."""

from __future__ import annotations

import math

import pytest

from llmc.errors import LlmcError
from llmc.search.router import evidence, fixed_route, is_test_path, route_query


def p(logit: float) -> float:
    return 1 / (1 + math.exp(-logit))


@pytest.mark.parametrize(
    "query, intent",
    [
        ("parse_query", "code"),
        ("LexicalIndex.search", "code"),
        ("where is the lexical index rebuilt", "code"),
        ("`fetchOrders()` returns what", "code"),
        ("src/shop/cart.py", "code"),
        ("how do I install llmc", "docs"),
        ("how to configure the database url", "docs"),
        ("docs/install.md", "docs"),
        ("what is the best practice for discount codes?", "docs"),
        ("embedding cache", "mixed"),
        ("discount", "mixed"),
    ],
)
def test_intents(query: str, intent: str) -> None:
    decision = route_query(query)
    assert decision.intent == intent, decision.reasons
    assert 0.0 <= decision.p_code <= 1.0
    assert decision.reasons


def test_snake_case_is_one_step_plus_terse() -> None:
    # +1.5 identifier, +0.5 terse keyword query: logit 2.0, confidence 0.76
    decision = route_query("parse_query")
    assert decision.p_code == pytest.approx(p(2.0))
    assert decision.confidence == pytest.approx(2 * p(2.0) - 1)
    assert any("snake_case" in r for r in decision.reasons)
    # not dropped (0.76 < 0.8): docs keep max(0.5, 1 - 0.76 ** 2) = 0.5
    assert decision.weights == {"code": 1.0, "docs": pytest.approx(0.5), "tests": 1.0}


def test_soft_weight_of_the_other_route() -> None:
    # "where is": +1, logit 1, confidence 0.462: docs keep 1 - 0.462 ** 2 = 0.786
    decision = route_query("where is the lexical index rebuilt")
    confidence = 2 * p(1.0) - 1
    assert decision.weight("docs") == pytest.approx(1 - confidence**2)


def test_docs_question_drops_code_at_high_confidence() -> None:
    # -1 "how do i", -1 "install", -0.75 asked as a user: logit -2.75, confidence 0.88
    decision = route_query("how do I install llmc?")
    assert decision.p_code == pytest.approx(p(-2.75))
    assert decision.weights["docs"] == 1.0 and decision.weights["code"] == 0.0
    assert any("code route dropped" in r for r in decision.reasons)


def test_uncertain_query_is_mixed_with_both_routes() -> None:
    decision = route_query("shipping estimates for international orders in the checkout flow")
    assert decision.intent == "mixed"
    assert decision.weight("code") == decision.weight("docs") == 1.0


def test_no_cues_at_all() -> None:
    decision = route_query("zebra lighthouse")
    assert decision.p_code == pytest.approx(p(0.5))  # only "terse keyword query"
    assert decision.intent == "mixed"


def test_identifier_in_a_sentence_counts_half() -> None:
    terse = dict((r, s) for s, r in evidence("parse_query tokens"))
    sentence = dict((r, s) for s, r in evidence("what does parse_query do with empty tokens"))
    assert terse["identifier `parse_query` (snake_case)"] == 1.5
    assert sentence["identifier `parse_query` (snake_case)"] == 0.75
    assert dict((r, s) for s, r in evidence("LexicalIndex"))[
        "identifier `LexicalIndex` (PascalCase)"
    ] == 0.75  # fmt: skip


def test_first_person_and_action_verbs() -> None:
    assert (-0.75, "asked as a user (I, my, we)") in evidence("my cart total is wrong")
    assert (0.75, "starts with 'parse': describes what code does") in evidence(
        "parse the discount code into a percentage"
    )


def test_negation_flips_docs_words_to_code() -> None:
    plain = route_query("retry configuration docs")
    negated = route_query("retry configuration, not the docs")
    assert plain.intent == "docs"
    assert negated.intent == "code"
    assert any("leave out the docs" in r for r in negated.reasons)
    assert not any("docs cue 'docs'" in r for r in negated.reasons)


def test_negation_of_code() -> None:
    decision = route_query("how the cache works, not the code")
    assert decision.intent == "docs"
    assert decision.weight("code") == 0.0


def test_defined_symbol_pushes_code() -> None:
    without = route_query("ShoppingCart")
    with_symbol = route_query("ShoppingCart", defined_symbols=["ShoppingCart"])
    assert with_symbol.p_code > without.p_code
    assert any("defined symbol `ShoppingCart`" in r for r in with_symbol.reasons)


def test_cues_are_capped_per_direction() -> None:
    steps = [s for s, r in evidence("implemented defined calls returns raises") if "cue" in r]
    assert steps == [1.0, 1.0]


def test_generic_code_nouns_are_no_cue() -> None:
    assert evidence("function method class argument for a shopping cart") == []


def test_punctuation_only_has_no_cues() -> None:
    assert evidence("???") == []
    assert route_query("???").intent == "mixed"


def test_drop_confidence_is_configurable() -> None:
    decision = route_query("how do I install llmc?", drop_confidence=0.99)
    assert decision.weight("code") == pytest.approx(0.5)


def test_test_files_are_weighted_unless_asked_for() -> None:
    plain = route_query("where is the cart total computed", test_weight=0.5)
    asked = route_query("tests for the cart total", test_weight=0.5)
    assert plain.weights["tests"] == 0.5
    assert asked.weights["tests"] == 1.0
    assert any("asks about tests" in r for r in asked.reasons)


@pytest.mark.parametrize(
    "path, is_test",
    [
        ("tests/test_cart.py", True),
        ("src/shop/tests/helpers.py", True),
        ("test_cart.py", True),
        ("pkg/cart_test.go", True),
        ("web/orders.spec.ts", True),
        ("web/__tests__/orders.js", True),
        ("src/main/java/CartTest.java", True),
        ("conftest.py", True),
        ("src/shop/cart.py", False),
        ("src/testing_utils_not.py", False),
        ("docs/testing.md", False),
        ("src/contest.py", False),
    ],
)
def test_is_test_path(path: str, is_test: bool) -> None:
    assert is_test_path(path) is is_test


def test_fixed_routes() -> None:
    assert fixed_route("code", "flag").weights == {"code": 1.0, "docs": 0.0, "tests": 1.0}
    assert fixed_route("docs", "config").weights == {"docs": 1.0, "code": 0.0, "tests": 1.0}
    off = fixed_route("mixed", "off")
    assert off.weights == {"code": 1.0, "docs": 1.0, "tests": 1.0}
    assert off.source == "off" and "routing is off" in off.reasons[0]
    with pytest.raises(LlmcError, match="unknown route"):
        fixed_route("everything", "flag")
