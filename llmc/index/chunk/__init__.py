"""Cut a file into spans: definitions for code, sections for docs, windows otherwise.

``chunk_file(path, text, lang, category, cfg)`` never raises; on any internal error it
falls back to line windows. What it emits (``Span.kind``):

- code with a query file (``queries/<lang>.scm``): ``function``, ``method``, ``class``
  (also structs, interfaces, enums, Rust impls), ``module`` (Ruby modules) and ``block``
  (module-level code outside any definition, symbol = file stem; and, inside a class too
  long to keep whole, the code between its members). A class of at most
  ``max_span_lines`` lines is one span covering all of it; a longer one keeps only its
  header (up to the first member). Members are always spans of their own. Definitions
  nested in functions stay inside the function's span. A span starts at its leading
  comment block, decorators and attributes (no blank line between).
- code with a grammar but no query: each top-level definition-like node with a name is a
  ``block`` named after it; the rest becomes ``block`` spans named after the file.
- code without a grammar (or a failed parse): ``window`` spans of ``window_lines`` lines,
  overlapping by ``span_overlap_lines``.
- Markdown and reStructuredText: one ``section`` per heading (a line scanner, not
  tree-sitter: ATX and setext headings outside fenced code and front matter for Markdown;
  underlined and overlined titles, levels in order of first use, for reST). The text
  before the first heading is a section named after the file; a heading with no body is
  dropped. Plain text: ``paragraph`` spans, short paragraphs merged up to 40 lines.

Every span longer than ``max_span_lines`` is split into parts (``Span.part`` 0, 1, ...)
that overlap by ``span_overlap_lines`` and keep the symbol, qualname and header.

Lines are the file split on ``\\n`` with one trailing ``\\r`` removed from each; ``Span.text``
is exactly ``"\\n".join(lines[start_line - 1 : end_line])``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from llmc.config import IndexConfig
from llmc.index.chunk.code import Also, code_spans
from llmc.index.chunk.docs import PARAGRAPH_LINES, markdown_spans, paragraph_spans, rst_spans
from llmc.index.chunk.emit import Ctx, split_lines, windows
from llmc.languages import has_grammar
from llmc.types import CODE, DOC, Span

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Tree

log = logging.getLogger(__name__)


# Bump when the chunker cuts the same text into other spans (definitions newly found, other
# boundaries): an index made by another chunker version, or with other span settings, is
# re-chunked on its next run (content hashes alone would keep its old spans forever).
# 2: JavaScript functions assigned to members and object-literal methods are definitions.
CHUNKER_VERSION = 2
CHUNK_POLICY_KEY = "index.chunk_policy"


def chunk_policy(cfg: IndexConfig) -> str:
    """What the spans of an unchanged file depend on besides its text."""
    return (
        f"v{CHUNKER_VERSION};max_span_lines={cfg.max_span_lines};"
        f"overlap={cfg.span_overlap_lines};window={cfg.window_lines}"
    )


def chunk_file(
    path: str,
    text: str,
    lang: str | None,
    category: str | None,
    cfg: IndexConfig,
    trees: dict[str, Tree] | None = None,
    parse: bool = True,
    also: Also | None = None,
) -> list[Span]:
    """Spans of one file. ``path`` is repo-relative (posix); never raises. Without
    ``parse``, no grammar runs: code is cut into line windows (a file that crashed the
    parser before, see ``llmc.index.parse_journal``).

    ``lang``/``category`` come from ``detect_language``; ``(None, None)`` (unknown type)
    gives line windows with lang ``"text"``, category CODE. With ``trees``, a tree-sitter
    parse made on the way is left there, keyed by grammar name (the graph reuses it), and
    with ``also``, that query's matches from the same walk (see ``Also``).
    """
    try:
        lines = split_lines(text if isinstance(text, str) else str(text))
    except Exception:  # pragma: no cover - str.split does not fail
        return []
    if not any(line.strip() for line in lines):
        return []
    max_lines = max(1, int(cfg.max_span_lines or 1))
    overlap = min(max(0, int(cfg.span_overlap_lines or 0)), max_lines - 1)
    ctx = Ctx(path, lines, lang or "text", category or CODE, cfg, max_lines, overlap)
    try:
        spans = _dispatch(ctx, text, lang, category, trees, parse, also)
        if not spans:
            spans = windows(ctx)
    except Exception as e:  # includes RecursionError on absurd nesting
        log.debug("%s: chunking failed (%s: %s), using line windows", path, type(e).__name__, e)
        try:
            spans = windows(ctx)
        except Exception:  # pragma: no cover - last resort
            log.exception("%s: line windows failed", path)
            return []
    return spans


def _dispatch(
    ctx: Ctx,
    text: str,
    lang: str | None,
    category: str | None,
    trees: dict | None,
    parse: bool = True,
    also: Also | None = None,
) -> list[Span]:
    if lang == "markdown":
        return markdown_spans(ctx)
    if lang == "rst":
        return rst_spans(ctx)
    if lang == "text" or category == DOC:
        return paragraph_spans(ctx)
    if parse and lang and has_grammar(lang):
        return code_spans(ctx, text, trees, also)
    return windows(ctx)


__all__ = [
    "CHUNKER_VERSION",
    "CHUNK_POLICY_KEY",
    "PARAGRAPH_LINES",
    "chunk_file",
    "chunk_policy",
    "split_lines",
]
