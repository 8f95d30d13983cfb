"""Doc spans: Markdown and reStructuredText sections by heading, plain-text paragraphs.

Headings come from ``llmc/headings.py``, the parser the graph's doc sections share. The
text before the first heading is a section named after the file; a heading with no body is
dropped. Plain text: ``paragraph`` spans, short paragraphs
merged up to ``PARAGRAPH_LINES`` lines.
"""

from __future__ import annotations

from llmc.headings import Heading, markdown_headings, rst_headings
from llmc.index.chunk.emit import Ctx, emit, join_header, trim_blank
from llmc.types import Span

PARAGRAPH_LINES = 40


def markdown_spans(ctx: Ctx) -> list[Span]:
    return _sections(ctx, markdown_headings(ctx.lines))


def rst_spans(ctx: Ctx) -> list[Span]:
    return _sections(ctx, rst_headings(ctx.lines))


def _sections(ctx: Ctx, heads: list[Heading]) -> list[Span]:
    out: list[Span] = []
    n = len(ctx.lines)
    first = heads[0].start if heads else n
    s, e = trim_blank(ctx, 0, first - 1)
    if e >= s:
        name = ctx.filename
        emit(out, ctx, "section", name, name, s + 1, e + 1, join_header(ctx.path, name))
    stack: list[tuple[int, str]] = []
    for i, h in enumerate(heads):
        while stack and stack[-1][0] >= h.level:
            stack.pop()
        stack.append((h.level, h.title))
        stop = heads[i + 1].start - 1 if i + 1 < len(heads) else n - 1
        body_start, e = trim_blank(ctx, h.end + 1, stop)
        if e < body_start:
            continue  # a heading with no body
        path = " > ".join(t for _, t in stack)
        emit(out, ctx, "section", h.title, path, h.start + 1, e + 1, join_header(ctx.path, path))
    if not out:  # only headings: keep them as one section rather than line windows
        s, e = trim_blank(ctx, 0, n - 1)
        name = heads[0].title if heads else ctx.filename
        emit(out, ctx, "section", name, name, s + 1, e + 1, join_header(ctx.path, name))
    return out


def paragraph_spans(ctx: Ctx) -> list[Span]:
    paras = []
    start = None
    for r, line in enumerate(ctx.lines):
        if line.strip():
            if start is None:
                start = r
        elif start is not None:
            paras.append((start, r - 1))
            start = None
    if start is not None:
        paras.append((start, len(ctx.lines) - 1))
    limit = min(PARAGRAPH_LINES, ctx.max_lines)
    groups: list[list[int]] = []
    for s, e in paras:
        if groups and e - groups[-1][0] + 1 <= limit:
            groups[-1][1] = e
        else:
            groups.append([s, e])
    out: list[Span] = []
    name = ctx.filename
    for s, e in groups:
        emit(out, ctx, "paragraph", name, name, s + 1, e + 1, ctx.path)
    return out


__all__ = ["PARAGRAPH_LINES", "markdown_spans", "paragraph_spans", "rst_spans"]
