"""Code-aware tokens for BM25: ``parse_query``, ``parseQuery`` and ``parse.query`` all
yield ``parse`` and ``query`` while the original identifier is kept as a token too.

The output is a whitespace-joined token string; tantivy then lowercases and stems it
(see ``lexical.py``), so the same function serves documents and queries and no user
punctuation ever reaches a query parser.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_][\w]*|_+[^\W_]\w*", re.UNICODE)
_DOTTED = re.compile(r"[A-Za-z_][\w]*(?:[./:\\-][A-Za-z_][\w]*)+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
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
    """Tokens of ``text``: every identifier, its parts, and dotted/path names whole."""
    out: list[str] = []
    for m in _DOTTED.finditer(text):
        whole = m.group(0).lower()
        if len(whole) <= MAX_TOKEN_LEN:
            out.append(whole)
    for m in _WORD.finditer(text):
        word = m.group(0)
        low = word.lower().strip("_")
        if not low or len(low) > MAX_TOKEN_LEN:
            continue
        out.append(low)
        parts = split_identifier(word)
        if len(parts) > 1 or (parts and parts[0] != low):
            out.extend(p for p in parts if p != low)
    return out


def token_string(text: str) -> str:
    return " ".join(code_tokens(text))


__all__ = ["code_tokens", "split_identifier", "token_string"]
