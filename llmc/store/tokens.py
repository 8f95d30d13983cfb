"""Code-aware tokens for BM25: ``parse_query``, ``parseQuery`` and ``parse.query`` all
yield ``parse`` and ``query`` while the original identifier is kept as a token too.

The output is a whitespace-joined token string; tantivy then lowercases and stems it
(see ``lexical.py``), so the same function serves documents and queries and no user
punctuation ever reaches a query parser.
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[^\W_][\w]*|_+[^\W_]\w*", re.UNICODE)
_DOTTED = re.compile(r"[A-Za-z_][\w]*(?:[./:\\-][A-Za-z_][\w]*)+")
_RUN = re.compile(r"[\w./:\\-]+", re.UNICODE)  # holds every _WORD and _DOTTED match
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SEPARATOR = re.compile(r"[./:\\-]")  # the characters of _RUN that are not \w
MAX_TOKEN_LEN = 60


def split_identifier(word: str) -> list[str]:
    """``HTTPServer_v2`` → ``http server v 2``; parts only, lowercased."""
    parts: list[str] = []
    for piece in word.split("_"):
        if not piece:
            continue
        if piece.isascii():
            parts.extend(p.lower() for p in _CAMEL.findall(piece))
        else:
            parts.append(piece.lower())
    return parts


def code_tokens(text: str) -> list[str]:
    """Tokens of ``text``: every identifier, its parts, and dotted/path names whole.

    Dotted names come first, then words, each in text order. Both lie inside runs of word
    characters and ``./:\\-`` (``_RUN``), and such runs repeat a lot in code, so each run's
    tokens are memoised: indexing a large repository spends most of its lexical time here.
    """
    dotted: list[str] = []
    words: list[str] = []
    run = _run_tokens
    for r in _RUN.findall(text):
        d, w = run(r)
        if d:
            dotted.extend(d)
        words.extend(w)
    dotted.extend(words)
    return dotted


@functools.lru_cache(maxsize=1 << 17)
def _run_tokens(run: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(dotted names, word tokens) of one run of name characters."""
    if _SEPARATOR.search(run) is None:  # one identifier, as most runs are: no dotted name,
        return (), (_word_tokens(run) if run.strip("_") else ())  # and it is its one _WORD
    dotted = (
        tuple(d.lower() for d in _DOTTED.findall(run) if len(d) <= MAX_TOKEN_LEN)
        if len(run) > 2
        else ()
    )
    words: list[str] = []
    for w in _WORD.findall(run):
        words.extend(_word_tokens(w))
    return dotted, tuple(words)


@functools.lru_cache(maxsize=1 << 17)
def _word_tokens(word: str) -> tuple[str, ...]:
    """One word's tokens: itself, lowercased, then its parts. Identifiers repeat a lot in
    code, so this is memoised: indexing a large repository spends most of its lexical
    time here otherwise."""
    low = word.lower().strip("_")
    if not low or len(low) > MAX_TOKEN_LEN:
        return ()
    parts = split_identifier(word)
    if len(parts) > 1 or (parts and parts[0] != low):
        return (low, *(p for p in parts if p != low))
    return (low,)


def token_string(text: str) -> str:
    return " ".join(code_tokens(text))


__all__ = ["code_tokens", "split_identifier", "token_string"]
