"""Turn fused candidates into results: hydrate spans from SQLite, drop what no longer
exists, keep files diverse, cut snippets around the query's words.

The SQLite store is the truth: a candidate whose span id is gone (a stale lexical index)
or whose file was deleted since indexing is dropped, so no result points at nothing.
Paths are relative to the repo root; lines are 1-based and inclusive.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.languages import is_code_lang
from llmc.search.fusion import diversify
from llmc.search.query import word_groups
from llmc.search.trace import Trace
from llmc.search.types import Candidate, SearchResult
from llmc.types import StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources


CODE_LOOKAHEAD = 10  # how deep code_within looks for a code span when k is smaller


@dataclass(frozen=True)
class Selection:
    """The candidates kept for the answer, each with its span, and what was dropped."""

    chosen: tuple[tuple[Candidate, StoredSpan], ...]
    missing_ids: tuple[int, ...] = ()  # span ids no longer in the store
    deleted_paths: tuple[str, ...] = ()  # files gone from disk since indexing
    merged: int = 0  # parts of a split definition or overloads of a function already kept
    held_back: int = 0  # pushed below k by the per-file cap


def _duplicate(span: StoredSpan, kept: Sequence[StoredSpan]) -> bool:
    """Another part of a split definition already kept, or the very same lines.

    A method inside a kept class is not a duplicate: it is the more precise answer."""
    s = span.span
    for other in kept:
        o = other.span
        if o.path != s.path:
            continue
        if o.qualname == s.qualname and o.kind == s.kind and o.part != s.part:
            return True
        if o.start_line == s.start_line and o.end_line == s.end_line:
            return True
    return False


_OVERLOAD = re.compile(r"\s*@(?:[A-Za-z_]\w*\.)*overload\b")


def is_overload_stub(stored: StoredSpan) -> bool:
    """A Python ``@overload`` (``@typing.overload``) signature: a declaration of the
    function defined after it, not an answer of its own."""
    return stored.span.lang == "python" and bool(_OVERLOAD.match(stored.span.text))


def _overload_twin(stored: StoredSpan, chosen: Sequence[tuple[Candidate, StoredSpan]]) -> int:
    """The index in ``chosen`` of another signature or the implementation of the same
    overloaded function (same file, qualname and kind), -1 when none. Two overloads and
    the implementation took 3 of anyio's top 3 for "open a file asynchronously"."""
    s = stored.span
    for i, (_, other) in enumerate(chosen):
        o = other.span
        if (o.path, o.qualname, o.kind) == (s.path, s.qualname, s.kind) and (
            is_overload_stub(stored) or is_overload_stub(other)
        ):
            return i
    return -1


def _keep(chosen: list[tuple[Candidate, StoredSpan]], c: Candidate, stored: StoredSpan) -> bool:
    """Add ``(c, stored)`` to ``chosen`` unless it repeats a kept result; an overloaded
    function is one result, its implementation where it was found, at the place of the
    family's best-ranked member. False when it was merged."""
    if _duplicate(stored, [s for _, s in chosen]):
        return False
    twin = _overload_twin(stored, chosen)
    if twin < 0:
        chosen.append((c, stored))
        return True
    first, kept = chosen[twin]
    if is_overload_stub(kept) and not is_overload_stub(stored):
        chosen[twin] = (dataclasses.replace(c, score=max(c.score, first.score)), stored)
    return False


def select(
    candidates: Sequence[Candidate],
    fetch: Callable[[list[int]], Mapping[int, StoredSpan]],
    root: Path | None,
    k: int,
    max_per_file: int,
    batch: int = 0,
) -> Selection:
    """The first ``k`` usable candidates, in order.

    ``fetch(ids) -> {id: StoredSpan}`` reads spans (``Store.spans_by_ids``); candidates are
    read in batches until ``k`` are kept. The per-file cap holds back a file's extra spans;
    they return, in order, only when too few others remain.
    """
    batch = batch or max(4 * k, 32)
    missing: list[int] = []
    deleted: set[str] = set()
    exists: dict[str, bool] = {}
    live: list[Candidate] = []
    spans: dict[int, StoredSpan] = {}
    chosen: list[tuple[Candidate, StoredSpan]] = []
    held_ids: set[int] = set()
    merged = 0
    pos = 0
    while pos < len(candidates) and len(chosen) < k:
        chunk = candidates[pos : pos + batch]
        pos += batch
        found = fetch([c.span_id for c in chunk])
        for c in chunk:
            stored = found.get(c.span_id)
            if stored is None:
                missing.append(c.span_id)
                continue
            path = stored.span.path
            if path not in exists:
                exists[path] = root is None or os.path.lexists(root / path)
            if not exists[path]:
                deleted.add(path)
                continue
            spans[c.span_id] = stored
            live.append(c)
        kept, held = diversify(live, {i: s.span.path for i, s in spans.items()}, max_per_file)
        held_ids = {c.span_id for c in held}
        chosen, merged = [], 0
        exhausted = pos >= len(candidates)  # only then do held-back spans fill up to k
        for c in [*kept, *held] if exhausted else kept:
            if not _keep(chosen, c, spans[c.span_id]):
                merged += 1
                continue
            if len(chosen) >= k:
                break
    return Selection(
        chosen=tuple(chosen),
        missing_ids=tuple(missing),
        deleted_paths=tuple(sorted(deleted)),
        merged=merged,
        held_back=sum(1 for c, _ in chosen if c.span_id in held_ids),
    )


def is_code_span(stored: StoredSpan) -> bool:
    """Whether a span lies in a code file: a known language other than prose (markdown,
    rst, text), as Code@3 counts it."""
    return is_code_lang(stored.span.lang)


Chosen = tuple[tuple[Candidate, StoredSpan], ...]


def code_within(chosen: Chosen, n: int) -> tuple[Chosen, int]:
    """``chosen`` with at least one code span among its first ``n``, and the old rank
    (1-based) of the code span moved up, or 0 when nothing moved.

    When the first ``n`` are all prose and a code span comes later, the best-ranked such
    span moves to rank ``n``; every result between shifts down one. Prose can still lead
    (it may be the answer), but a code question always sees code near the top when the
    results hold any (issue 13: "code intent must not surface prose first unless the
    prose is the answer"). The router's intent is too weak a gate ("why ..." reads as
    docs): on validation, applying it to every query cost docs questions no significant
    nDCG (docs/reports/2026-11-23-code-in-top-validation.md)."""
    if n <= 0 or len(chosen) <= n or any(is_code_span(s) for _, s in chosen[:n]):
        return chosen, 0
    later = next((i for i in range(n, len(chosen)) if is_code_span(chosen[i][1])), None)
    if later is None:
        return chosen, 0
    moved = (*chosen[: n - 1], chosen[later], *chosen[n - 1 : later], *chosen[later + 1 :])
    return moved, later + 1


def best_window(
    lines: Sequence[str], groups: Sequence[Sequence[str]], size: int
) -> tuple[int, int]:
    """``(first, last)`` 0-based line offsets of the ``size``-line window that covers the
    most distinct query words (then the most matching lines, then the earliest)."""
    n = len(lines)
    if size <= 0 or n <= size:
        return 0, max(n - 1, 0)
    if not groups:
        return 0, size - 1
    hits = _line_hits(lines, tuple(tuple(g) for g in groups))
    # Slide the window, counting per word how many of its lines match it.
    counts = [0] * len(groups)
    covered = matched = 0
    best, best_key = 0, (-1, -1)
    for i in range(n):
        for g in hits[i]:
            counts[g] += 1
            covered += counts[g] == 1
        matched += bool(hits[i])
        if i >= size:
            for g in hits[i - size]:
                counts[g] -= 1
                covered -= counts[g] == 0
            matched -= bool(hits[i - size])
        if i >= size - 1 and (covered, matched) > best_key:
            best, best_key = i - size + 1, (covered, matched)
    if best_key[0] <= 0:
        return 0, size - 1
    # Prefer the span's head (its signature) when it covers as many words; else start a
    # line or two before the first match, for context, if that loses no word.
    if len(frozenset().union(*hits[:size])) >= best_key[0]:
        return 0, size - 1
    first_hit = next(i for i in range(best, best + size) if hits[i])
    start = max(0, min(first_hit - 2, n - size))
    if len(frozenset().union(*hits[start : start + size])) < best_key[0]:
        start = best
    return start, start + size - 1


# A word starts after a non-alphanumeric character or at a camelCase hump.
_WORD_START = r"(?:(?<![A-Za-z0-9])|(?<=[a-z])(?=[A-Z]))"


@functools.lru_cache(maxsize=256)
def _pattern(groups: tuple[tuple[str, ...], ...]) -> re.Pattern[str]:
    """One regex for all query words: group ``g + 1`` matches a prefix form of word ``g``."""
    alternatives = (
        "((?i:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + "))"
        for forms in groups
    )
    return re.compile(_WORD_START + "(?:" + "|".join(alternatives) + ")")


def _line_hits(lines: Sequence[str], groups: tuple[tuple[str, ...], ...]) -> list[set[int]]:
    """For each line, which query words (by index) start a word in it; one regex pass."""
    hits: list[set[int]] = [set() for _ in lines]
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    for m in _pattern(groups).finditer("\n".join(lines)):
        hits[bisect.bisect_right(starts, m.start()) - 1].add(m.lastindex - 1)
    return hits


def snippet(stored: StoredSpan, groups: Sequence[Sequence[str]], size: int) -> tuple[str, int]:
    """``(text, first line in the file)``: the span's most query-relevant lines."""
    span = stored.span
    lines = span.text.split("\n")
    first, last = best_window(lines, [tuple(g) for g in groups], size)
    while last > first and not lines[last].strip():
        last -= 1
    return "\n".join(lines[first : last + 1]), span.start_line + first


def to_result(
    candidate: Candidate, stored: StoredSpan, groups: Sequence[Sequence[str]], size: int
) -> SearchResult:
    span = stored.span
    text, first_line = snippet(stored, groups, size)
    return SearchResult(
        path=span.path,
        start_line=span.start_line,
        end_line=span.end_line,
        symbol=span.symbol,
        kind=span.kind,
        lang=span.lang or "text",
        score=candidate.score,
        sources=candidate.sources,
        snippet=text,
        span_id=stored.id,
        qualname=span.qualname,
        category=span.category,
        snippet_start_line=first_line,
    )


def present(
    sources: Sources, text: str, fused: Sequence[Candidate], k: int, trace: Trace,
    max_per_file: int | None = None, code_top: int = 0,
) -> tuple[list[tuple[Candidate, SearchResult]], tuple[tuple[str, ...], ...]]:  # fmt: skip
    """The top ``k`` results of ``fused`` with snippets, and the query's word groups (for
    highlighting); what was dropped on the way is said in the trace. ``max_per_file``:
    the per-file cap (None: ``search.max_per_file``). ``code_top`` > 0: a code span among
    the first ``code_top`` of the first ``max(k, CODE_LOOKAHEAD)`` when they hold one
    (``code_within``), before the cut to ``k``."""
    scfg = sources.cfg.search
    cap = scfg.max_per_file if max_per_file is None else max_per_file
    wanted = max(k, CODE_LOOKAHEAD) if code_top > 0 else k
    sel = select(fused, sources.spans, sources.disk_root, wanted, cap)
    # the move is decided on the top max(k, CODE_LOOKAHEAD), then cut to k, so a smaller k
    # shows a prefix of the same order (k = 1 keeps prose first when prose leads)
    chosen, moved_from = code_within(sel.chosen, code_top)
    if moved_from:
        trace.note(
            "results",
            f"no code in the top {code_top}: the first code result moved up from rank "
            f"{moved_from} to {code_top}",
        )
    chosen = chosen[:k]
    if sel.missing_ids:
        trace.warn(
            f"{len(sel.missing_ids)} hits pointed at spans no longer in the index and were "
            "dropped (run `llmc index` to repair the lexical index)"
        )
    if sel.deleted_paths:
        shown = ", ".join(sel.deleted_paths[:3]) + (", ..." if len(sel.deleted_paths) > 3 else "")
        trace.warn(
            f"skipped results in {len(sel.deleted_paths)} file(s) deleted since indexing: "
            f"{shown} (run `llmc index`)"
        )
    if sel.merged or sel.held_back:
        trace.note(
            "results",
            f"{sel.merged} more parts of split definitions or overloads merged; per-file cap "
            f"{cap} let {sel.held_back} crowded spans back in to fill k",
        )
    stem = sources.lexical.query_terms if sources.lexical is not None else None
    groups = word_groups(text, stem)
    found = [(c, to_result(c, s, groups, scfg.snippet_lines)) for c, s in chosen]
    return found, groups


__all__ = [
    "Selection",
    "best_window",
    "code_within",
    "is_code_span",
    "present",
    "select",
    "snippet",
    "to_result",
]
