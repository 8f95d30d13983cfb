"""Headings of Markdown and reStructuredText: the one parser behind doc spans
(``index/chunk/docs.py``, one span a section) and the graph's doc sections
(``graph/docs.py``, nested sections and the mentions in them), so the two always agree
on where a section starts and what it is called.

A line scanner, not tree-sitter: ATX and setext headings outside fenced code and front
matter for Markdown; underlined and overlined titles, levels in order of first use, for
reST.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Heading:
    """One heading: its rows (0-based; an overline or a setext underline included), its
    level (1 = top) and its title."""

    start: int  # 0-based first row of the heading (overline or text)
    end: int  # 0-based last row of the heading (underline or text)
    level: int
    title: str


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^(?: {4,}|\t)|^\s*(?:[-*+]\s|\d+[.)]\s|>|\||<)")


def markdown_headings(lines: list[str]) -> list[Heading]:
    """ATX and setext headings outside fenced code and front matter."""
    return scan_markdown(lines)[0]


def scan_markdown(lines: list[str]) -> tuple[list[Heading], set[int]]:
    """Headings (``markdown_headings``) and the 0-based rows inside fenced code, the
    fences' own rows included."""
    heads: list[Heading] = []
    fenced: set[int] = set()
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
            fenced.add(r)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1]:
                if not m.group(2).strip():
                    fence = None
            para = False
            continue
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1)[0], len(m.group(1)))
            fenced.add(r)
            para = False
            continue
        m = _ATX.match(line)
        if m:
            title = re.sub(r"(?:^|[ \t]+)#+[ \t]*$", "", m.group(2) or "").strip()
            heads.append(Heading(r, r, len(m.group(1)), title or "(untitled)"))
            para = False
            continue
        m = _SETEXT.match(line)
        if m and para:
            level = 1 if m.group(1)[0] == "=" else 2
            heads.append(Heading(r - 1, r, level, lines[r - 1].strip()))
            para = False
            continue
        para = bool(line.strip()) and not _NOT_PARAGRAPH.match(line)
    return heads, fenced


_ADORNMENT = re.compile(r"""^([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1+[ \t]*$""")


def rst_headings(lines: list[str]) -> list[Heading]:
    """Underlined and overlined titles; levels in order of first use of each style."""
    heads: list[Heading] = []
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
                heads.append(Heading(r, r + 2, level((over.group(1), True)), title))
                r += 3
                continue
        if line.strip() and not line[0].isspace() and not over and r + 1 < n and after_break(r):
            under_m = _ADORNMENT.match(lines[r + 1])
            title = line.strip()
            if under_m:
                width = len(lines[r + 1].rstrip())
                if width >= len(title) or width >= 4:
                    heads.append(Heading(r, r + 1, level((under_m.group(1), False)), title))
                    r += 2
                    continue
        r += 1
    return heads


__all__ = ["Heading", "markdown_headings", "rst_headings", "scan_markdown"]
