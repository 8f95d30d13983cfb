"""Query cleaning and identifier spotting."""

from __future__ import annotations

import pytest

from llmc.errors import LlmcError
from llmc.search.query import identifiers, normalize_query, paths, symbol_lookups, word_groups


@pytest.mark.parametrize("raw", ["", "   ", "\n\t", "\x00\x01\x02", "\ufffd\ufffd"])
def test_empty_queries_are_one_clear_error(raw: str) -> None:
    with pytest.raises(LlmcError, match="empty query"):
        normalize_query(raw)


def test_control_characters_and_lone_surrogates_are_removed() -> None:
    text, warnings = normalize_query("parse\x00query\udcff  now\x1b")
    assert text == "parse query now"
    assert warnings and "control" in warnings[0]
    text.encode("utf-8")  # no surrogate survives


def test_long_queries_are_cut_with_a_warning() -> None:
    text, warnings = normalize_query("word " * 2000, max_chars=100)
    assert len(text) <= 100
    assert any("cut to its first 100" in w for w in warnings)


def test_bytes_and_non_text() -> None:
    assert normalize_query(b"caf\xc3\xa9 \xff")[0] == "café"
    with pytest.raises(LlmcError, match="must be text"):
        normalize_query(42)


def test_unicode_is_kept() -> None:
    assert normalize_query("  日本語  ünïcödé 🙂 ")[0] == "日本語 ünïcödé 🙂"


def names(query: str) -> dict[str, tuple[bool, str]]:
    return {i.name: (i.strong, i.why) for i in identifiers(query)}


def test_identifier_shapes() -> None:
    found = names("why does parse_query call LexicalIndex.search and fetchOrders()")
    assert found["parse_query"] == (True, "snake_case")
    assert found["LexicalIndex.search"] == (True, "dotted name")
    assert found["fetchOrders"] == (True, "called with ()")
    assert found["call"][0] is False  # a plain word is weak
    assert "why" not in found and "and" not in found  # stopwords


def test_identifier_backticks_keywords_and_whole_query() -> None:
    assert names("what is `Store`")["Store"] == (True, "in backticks")
    assert names("def charge_card")["charge_card"][0] is True
    assert names("ShoppingCart")["ShoppingCart"] == (True, "PascalCase")
    assert names("class Meta options")["Meta"] == (True, "after a definition keyword")
    assert "is" not in names("after the class is built")
    whole = identifiers("walk")[0]
    assert whole.strong and not whole.code_shaped


def test_paths_and_abbreviations_are_not_symbols() -> None:
    found = names("see src/shop/cart.py and README.md, e.g. here")
    assert "cart.py" not in found and "README.md" not in found and "e.g" not in found
    assert paths("see src/shop/cart.py and README.md") == [
        ("src/shop/cart.py", "py"),
        ("README.md", "md"),
    ]


def test_symbol_lookups_fall_back_to_the_last_parts() -> None:
    ident = identifiers("llmc.store.db.Store")[0]
    assert symbol_lookups(ident) == ["llmc.store.db.Store", "db.Store", "Store"]


def test_word_groups_keep_content_words_and_stems() -> None:
    groups = word_groups("how do I rebuild the lexical index?", stem=lambda w: [w[:-1]])
    assert groups == (("rebuild", "rebuil"), ("lexical", "lexica"), ("index", "inde"))
