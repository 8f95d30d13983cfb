"""The spans a chunker emits, built from line ranges of one file.

``Ctx`` is the file being chunked (path, lines, language, limits); ``emit`` appends the span
of a 1-based inclusive line range, split into overlapping parts when longer than
``max_span_lines``; ``windows`` cuts a file without structure into line windows;
``remainder_blocks`` emits the code between definitions. Used by ``chunk.code`` and
``chunk.docs``; ``chunk.chunk_file`` picks between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath

from llmc.config import IndexConfig
from llmc.types import Span

_TRIVIAL_LINE = re.compile(r"^[\s{}\[\]();,]*(?:end)?[\s{}\[\]();,]*$")


@dataclass(frozen=True)
class Ctx:
    """The file being chunked: its lines and language, and the span size limits."""

    path: str
    lines: list[str]
    lang: str
    category: str
    cfg: IndexConfig
    max_lines: int
    overlap: int

    @cached_property  # asked for each span: a PurePosixPath each time was ~3% of chunking
    def stem(self) -> str:
        p = PurePosixPath(self.path)
        return p.stem or p.name or self.path

    @cached_property
    def filename(self) -> str:
        return PurePosixPath(self.path).name or self.path


def split_lines(text: str) -> list[str]:
    """The file's lines as chunk_file numbers them (terminators ``\\n``/``\\r\\n`` removed)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def join_header(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def emit(
    out: list[Span],
    ctx: Ctx,
    kind: str,
    symbol: str,
    qualname: str,
    start: int,
    end: int,
    header: str,
    signature: str = "",
    docstring: str = "",
) -> None:
    """Append the span for 1-based inclusive lines start..end, split when too long."""
    n = len(ctx.lines)
    start, end = max(1, start), min(n, end)
    if end < start:
        return
    size, step = ctx.max_lines, ctx.max_lines - ctx.overlap
    bounds = []
    s = start
    while s + size - 1 < end:
        bounds.append((s, s + size - 1))
        s += step
    bounds.append((s, end))
    for part, (s, e) in enumerate(bounds):
        out.append(
            Span(
                path=ctx.path,
                lang=ctx.lang,
                category=ctx.category,
                kind=kind,
                symbol=symbol,
                qualname=qualname,
                start_line=s,
                end_line=e,
                text="\n".join(ctx.lines[s - 1 : e]),
                header=header,
                part=part if len(bounds) > 1 else 0,
                signature=signature,
                docstring=docstring,
            )
        )


def trim_blank(ctx: Ctx, s: int, e: int) -> tuple[int, int]:
    """Shrink 0-based rows s..e to exclude blank lines at both ends (e < s when blank)."""
    lines = ctx.lines
    while s <= e and not lines[s].strip():
        s += 1
    while e >= s and not lines[e].strip():
        e -= 1
    return s, e


def windows(ctx: Ctx) -> list[Span]:
    out: list[Span] = []
    lines = ctx.lines
    n = len(lines)
    size = max(1, int(ctx.cfg.window_lines or 1))
    step = size - min(ctx.overlap, size - 1)
    start, part = 0, 0
    while start < n:
        end = min(start + size, n)
        if any(line.strip() for line in lines[start:end]):
            out.append(
                Span(
                    path=ctx.path,
                    lang=ctx.lang,
                    category=ctx.category,
                    kind="window",
                    symbol=ctx.stem,
                    qualname=ctx.stem,
                    start_line=start + 1,
                    end_line=end,
                    text="\n".join(lines[start:end]),
                    header=ctx.path,
                    part=part,
                )
            )
            part += 1
        if end >= n:
            break
        start += step
    return out


def remainder_blocks(
    out: list[Span],
    ctx: Ctx,
    lo: int,
    hi: int,
    covered: list[tuple[int, int]],
    symbol: str,
    qualname: str,
    header: str,
) -> None:
    """Emit ``block`` spans for the non-trivial runs of rows lo..hi not in ``covered``."""
    runs = []
    row = lo
    for s, e in sorted(covered):
        if e < row:
            continue
        if s > row:
            runs.append((row, min(s - 1, hi)))
        row = max(row, e + 1)
        if row > hi:
            break
    if row <= hi:
        runs.append((row, hi))
    for s, e in runs:
        s, e = trim_blank(ctx, s, e)
        if e < s or all(_TRIVIAL_LINE.match(line) for line in ctx.lines[s : e + 1]):
            continue
        emit(out, ctx, "block", symbol, qualname, s + 1, e + 1, header)


__all__ = ["Ctx", "emit", "join_header", "remainder_blocks", "split_lines", "trim_blank", "windows"]
