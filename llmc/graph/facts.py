"""One file's graph facts from the text the indexer read, where it chunks it.

The chunk workers (``llmc.index.chunk.pool``) call :func:`encoded_facts` with the spans they
cut and the tree-sitter parse the chunker made, so a file is read and parsed once for both
its spans and its graph facts, on every core; the indexer hands the JSON bytes
(:mod:`llmc.graph.codec`, data only) to ``update_graph``, which checks and decodes them
(and keeps the bytes as its cache entries) and resolves. ``update_graph`` reads a file
from disk itself only when no worker saw it (a rebuild, ``llmc graph``); both ways end in
:func:`with_span_defs`, so both give the same facts for the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from llmc.graph.codec import encode_facts
from llmc.graph.extract import extract_file
from llmc.graph.model import Def, FileFacts

if TYPE_CHECKING:  # pragma: no cover
    from llmc.types import Span

# (span id or None, kind, qualname, symbol, start line, end line, part): a span's shape.
SpanRow = tuple[Any, str, str, str, int, int, int]

_SPAN_DEF_KINDS_SKIP = frozenset({"module", "block", "section", "paragraph", "window", "text"})


def with_span_defs(f: FileFacts, spans: Iterable[SpanRow] | None) -> FileFacts:
    """Languages without a tags query, and files too large to parse: definitions only, from
    the spans the indexer cut (a code file whose extraction found none)."""
    rows = list(spans or ())
    if not f.defs and f.category == "code" and rows:
        f.defs = span_defs(rows)
        # The last span's *start* line, as graphs have always recorded it (a file node's
        # end_line here is not its length; changing it changes every graph built).
        f.end_line = max([f.end_line] + [r[4] for r in rows])
    return f


def span_defs(rows: list[SpanRow]) -> list[Def]:
    out: dict[str, Def] = {}
    for _, kind, qual, symbol, start, end, part in rows:
        if part or kind in _SPAN_DEF_KINDS_SKIP or not qual:
            continue
        out.setdefault(qual, Def(symbol or qual.rsplit(".", 1)[-1], qual, kind, start, end))
    return list(out.values())


def span_rows(spans: Iterable[Span]) -> list[SpanRow]:
    return [(None, s.kind, s.qualname, s.symbol, s.start_line, s.end_line, s.part) for s in spans]


def encoded_facts(
    path: str,
    text: str,
    lang: str | None,
    category: str | None,
    spans: list[Span],
    trees: Mapping[str, Any] | None = None,
) -> bytes:
    """The :class:`FileFacts` of a file the indexer just chunked into ``spans``, as JSON
    (``trees``: the chunker's parse of ``text``, by grammar name)."""
    f = with_span_defs(extract_file(path, text, lang, category, trees), span_rows(spans))
    return encode_facts(f)


__all__ = ["SpanRow", "encoded_facts", "span_defs", "span_rows", "with_span_defs"]
