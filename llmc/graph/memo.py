"""Memoised lookups that terminate on cycles and give the same answer in any order.

Chained lookups (re-exports, inherited members, variable types) recurse through
:meth:`Memo.guard`: a key already being evaluated answers None (a cycle is cut there), and
so does a call past ``MAX_DEPTH``. An answer is memoised only when it does not depend on
where the query started: a frame whose evaluation hit a cut below it on the stack (an
ancestor in a cycle, or the depth limit) is recomputed when asked again, so every cached
answer is the one a fresh resolver would give to that query first. That is what lets the
incremental build resolve a few files against a fresh memo and keep the rest.

Each answer also carries the keys of the data it read (see :meth:`Memo.read`), so the
resolver knows which facts of which files one file's edges depend on.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

MAX_DEPTH = 16
_MISS = object()
_TOP = 1 << 30


class Memo:
    """Cycle- and depth-safe memoisation with read tracking and an "inferred" flag."""

    def __init__(self) -> None:
        self.memo: dict[Hashable, tuple[Any, bool, set]] = {}
        self.busy: dict[Hashable, int] = {}  # key being evaluated -> its stack level
        self.depth = 0
        self.low = _TOP  # lowest stack level a cut in the current frame reached
        self.inferred = False  # the current answer went through an inferred type
        self.reads: set[Hashable] = set()

    def read(self, key: Hashable) -> None:
        """Note that the current answer depends on the data named by ``key``."""
        self.reads.add(key)

    def clear(self) -> None:
        self.memo.clear()

    def guard(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> Any:
        hit = self.memo.get(key, _MISS)
        if hit is not _MISS:
            result, inferred, reads = hit
            self.inferred = self.inferred or inferred
            if reads:
                self.reads |= reads
            return result
        level = self.busy.get(key)
        if level is not None or self.depth > MAX_DEPTH:
            # A cycle cut at ``level`` or the depth limit (which depends on every level).
            self.low = min(self.low, 0 if level is None else level)
            return None
        level = self.depth
        outer_inferred, outer_low, outer_reads = self.inferred, self.low, self.reads
        self.inferred, self.low, self.reads = False, _TOP, set()
        self.busy[key] = level
        self.depth += 1
        try:
            result = fn(*args)
        finally:
            self.depth -= 1
            del self.busy[key]
            inferred, low, reads = self.inferred, self.low, self.reads
            outer_reads |= reads
            self.inferred, self.low, self.reads = outer_inferred, min(outer_low, low), outer_reads
        if low >= level:
            self.memo[key] = (result, inferred, reads)  # never changed once the frame ends
        self.inferred = outer_inferred or inferred
        return result


__all__ = ["MAX_DEPTH", "Memo"]
