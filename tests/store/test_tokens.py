"""Code-aware BM25 tokens (llmc/store/tokens.py), with hand-written expectations."""

from __future__ import annotations

from llmc.store.tokens import code_tokens, split_identifier, token_string


def test_identifiers_yield_themselves_and_their_parts():
    assert code_tokens("parse_query parseQuery parse.query HTTPServer_v2 __init__ x") == [
        "parse.query",
        "parse_query", "parse", "query",
        "parsequery", "parse", "query",
        "parse", "query",
        "httpserver_v2", "http", "server", "v", "2",
        "init",
        "x",
    ]  # fmt: skip


def test_paths_and_non_ascii_words():
    assert code_tokens("a/b/c.py Ünïcode_wörd") == [
        "a/b/c.py", "a", "b", "c", "py", "ünïcode_wörd", "ünïcode", "wörd"
    ]  # fmt: skip
    assert split_identifier("HTTPServer_v2") == ["http", "server", "v", "2"]


def test_over_long_tokens_are_dropped_and_repeats_stay_repeated():
    long = "x" * 61
    assert code_tokens(f"{long} ok {long}.y ok") == ["ok", "y", "ok"]
    assert token_string("fooBar fooBar") == "foobar foo bar foobar foo bar"


def test_a_run_without_separators_tokenizes_as_the_general_rule_says():
    """A run of word characters only takes a short cut (no dotted names, the run is its one
    word); its tokens are those of the general rule: every _WORD match's tokens."""
    from llmc.store import tokens

    def general(run: str) -> list[str]:
        return [t for w in tokens._WORD.findall(run) for t in tokens._word_tokens(w)]

    for run in ("x", "_", "___", "_a", "a_", "__init__", "_9", "9a", "HTTPServer_v2", "é_ü",
                "a" * 61, "_" + "b" * 60, "fooBar_", "__FooBar__x1"):  # fmt: skip
        assert code_tokens(run) == general(run), run
        assert code_tokens(f"{run} {run}") == general(run) * 2, run
