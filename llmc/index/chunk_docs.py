"""Doc spans: Markdown and reStructuredText sections by heading, plain-text paragraphs.

Headings come from a line scanner, not tree-sitter: ATX and setext headings outside fenced
code and front matter for Markdown; underlined and overlined titles, levels in order of
first use, for reST. The text before the first heading is a section named after the file;
a heading with no body is dropped. Plain text: ``paragraph`` spans, short paragraphs
merged up to ``PARAGRAPH_LINES`` lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmc.index.chunk_emit import Ctx, emit, join_header, trim_blank
from llmc.types import Span

PARAGRAPH_LINES = 40


def markdown_spans(ctx: Ctx) -> list[Span]:
    return _sections(ctx, _markdown_headings(ctx.lines))


def rst_spans(ctx: Ctx) -> list[Span]:
    return _sections(ctx, _rst_headings(ctx.lines))


@dataclass(frozen=True)
class _Heading:
    start: int  # 0-based first row of the heading (overline or text)
    end: int  # 0-based last row of the heading (underline or text)
    level: int
    title: str


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^(?: {4,}|\t)|^\s*(?:[-*+]\s|\d+[.)]\s|>|\||<)")


def _markdown_headings(lines: list[str]) -> list[_Heading]:
    heads: list[_Heading] = []
    n = len(lines)
    row = 0
    if n and lines[0].strip() in ("---", "+++"):  # front matter
        mark = lines[0].strip()
        for j in range(1, n):
            if lines[j].strip() in (mark, "..."):
                row = j + 1
                break
    fence: tuple[str, int] | None = None
    para = False  # previous line can be the text of a setext heading
    for r in range(row, n):
        line = lines[r]
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1]:
                if not m.group(2).strip():
                    fence = None
            para = False
            continue
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1)[0], len(m.group(1)))
            para = False
            continue
        m = _ATX.match(line)
        if m:
            title = re.sub(r"(?:^|[ \t]+)#+[ \t]*$", "", m.group(2) or "").strip()
            heads.append(_Heading(r, r, len(m.group(1)), title or "(untitled)"))
            para = False
            continue
        m = _SETEXT.match(line)
        if m and para:
            level = 1 if m.group(1)[0] == "=" else 2
            heads.append(_Heading(r - 1, r, level, lines[r - 1].strip()))
            para = False
            continue
        para = bool(line.strip()) and not _NOT_PARAGRAPH.match(line)
    return heads


_ADORNMENT = re.compile(r"""^([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1+[ \t]*$""")


def _rst_headings(lines: list[str]) -> list[_Heading]:
    heads: list[_Heading] = []
    styles: list[tuple[str, bool]] = []
    n = len(lines)

    def level(style: tuple[str, bool]) -> int:
        if style not in styles:
            styles.append(style)
        return styles.index(style) + 1

    def after_break(r: int) -> bool:
        return r == 0 or not lines[r - 1].strip() or bool(heads and heads[-1].end == r - 1)

    r = 0
    while r < n:
        line = lines[r]
        over = _ADORNMENT.match(line)
        if over and r + 2 < n and after_break(r):
            title, under = lines[r + 1].strip(), lines[r + 2].rstrip()
            if title and not _ADORNMENT.match(lines[r + 1]) and under == line.rstrip():
                heads.append(_Heading(r, r + 2, level((over.group(1), True)), title))
                r += 3
                continue
        if line.strip() and not line[0].isspace() and not over and r + 1 < n and after_break(r):
            under_m = _ADORNMENT.match(lines[r + 1])
            title = line.strip()
            if under_m:
                width = len(lines[r + 1].rstrip())
                if width >= len(title) or width >= 4:
                    heads.append(_Heading(r, r + 1, level((under_m.group(1), False)), title))
                    r += 2
                    continue
        r += 1
    return heads


def _sections(ctx: Ctx, heads: list[_Heading]) -> list[Span]:
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
