"""Rocchio term selection and weighting for HyDE's BM25 expansion, with hand numbers.

Two hypotheses (analysed terms, ``self`` dropped as noise):
    h1 = cart total price cart     |h1| = 4
    h2 = price discount            |h2| = 2
centroid c(t) = mean over h of tf_h(t) / |h|:
    cart     (2/4 + 0)   / 2 = 0.25
    total    (1/4 + 0)   / 2 = 0.125
    price    (1/4 + 1/2) / 2 = 0.375   ← max
    discount (0 + 1/2)   / 2 = 0.25
nf = c / 0.375: price 1, cart 2/3, discount 2/3, total 1/3.
"""

from __future__ import annotations

import pytest

from llmc.errors import ConfigError
from llmc.search.rocchio import centroid, expand, keep_term

H1 = ["cart", "self", "total", "price", "cart"]
H2 = ["price", "discount"]
DF = {"cart": 5, "total": 30, "discount": 2, "price": 50}  # of 100 spans


def test_centroid_of_length_normalised_frequencies():
    c = centroid([[t for t in H1 if keep_term(t)], H2])
    assert c == pytest.approx({"cart": 0.25, "total": 0.125, "price": 0.375, "discount": 0.25})
    assert centroid([]) == {}
    assert centroid([[], ["a"]]) == {"a": 0.5}  # an empty hypothesis still counts in the mean


def test_query_terms_weighted_up_expansion_terms_weighted_down():
    w = expand(["price"], [H1, H2], DF, 100, alpha=1.0, beta=0.5, max_terms=10, max_df=0.1)
    # price is a query term: (alpha + beta * nf) / alpha = 1 + 0.5 * 1
    # total is in 30% of spans (>= 10%): never an expansion term
    # cart, discount: beta * nf / alpha = 0.5 * 2/3
    assert w == pytest.approx({"price": 1.5, "cart": 1 / 3, "discount": 1 / 3})
    assert list(w) == ["price", "cart", "discount"]  # tie on nf: by term


def test_max_terms_keeps_the_best_by_normalised_frequency():
    w = expand(["price"], [H1, H2], DF, 100, alpha=1.0, beta=0.5, max_terms=1, max_df=0.1)
    assert w == pytest.approx({"price": 1.5, "cart": 1 / 3})


def test_alpha_and_beta_scale_the_weights():
    w = expand(["price"], [H1, H2], DF, 100, alpha=2.0, beta=0.5, max_terms=1, max_df=0.1)
    assert w == pytest.approx({"price": (2 + 0.5) / 2, "cart": 0.5 * (2 / 3) / 2})
    w = expand(["price"], [H1, H2], DF, 100, alpha=1.0, beta=0.0, max_terms=5, max_df=0.1)
    assert w == {"price": 1.0}  # beta 0: the original query, nothing added


def test_max_df_bounds_the_corpus_share():
    w = expand([], [H1, H2], DF, 100, alpha=1.0, beta=1.0, max_terms=10, max_df=0.4)
    assert set(w) == {"cart", "discount", "total"}  # price is in 50% of spans
    assert w["total"] == pytest.approx(1 / 3)


def test_terms_absent_from_the_corpus_are_never_added():
    w = expand(["refund"], [["refund", "gateway", "zzyzx"]], {"gateway": 1}, 100, max_df=0.1)
    assert "zzyzx" not in w  # df 0: BM25 could not match it anyway
    assert w == pytest.approx({"refund": 1.5, "gateway": 0.5})


def test_query_terms_missing_from_the_hypotheses_keep_weight_one():
    w = expand(["how", "refund"], [["gateway", "gateway"]], {"gateway": 1}, 100)
    assert w == pytest.approx({"how": 1.0, "refund": 1.0, "gateway": 0.5})


def test_noise_and_stopwords_are_not_expansion_terms():
    assert not keep_term("self") and not keep_term("the") and not keep_term("42")
    assert not keep_term("ab") and keep_term("refund")
    w = expand([], [["return", "self", "the", "refund"]], {"refund": 1, "return": 1}, 100)
    assert set(w) == {"refund"}


def test_alpha_must_be_positive():
    with pytest.raises(ConfigError, match="rocchio_alpha"):
        expand(["a"], [["b"]], {"b": 1}, 10, alpha=0.0)
    with pytest.raises(ConfigError, match="rocchio_beta"):
        expand(["a"], [["b"]], {"b": 1}, 10, beta=-1.0)
