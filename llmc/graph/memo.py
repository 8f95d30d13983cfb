"""Memoised lookups that terminate on cycles and give the same answer in any order.

Chained lookups (re-exports, inherited members, variable types) recurse through
:meth:`Memo.guard`: a key already being evaluated answers None (the cycle is cut there),
and so does a call past ``MAX_DEPTH``. What a cut answers depends on where the evaluation
started (``a → b → (a: cut) → c`` but ``b → a → (b: cut) → d``), so an answer is cached only
when nothing under it was cut: such an answer is the same from any stack. An answer that
went through a cut is computed again each time it is asked for, in its own place. So every
file resolves the same whether it is resolved first, last or alone, which is what lets the
incremental build resolve a few files with a fresh memo and keep the others' edges.

Each answer also carries the keys of the data it read (see :meth:`Memo.read`), so the
resolver knows which table entries one file's edges depend on. The same keys let a kept
resolver keep its answers across updates: :meth:`Memo.invalidate` names the entries a
patch changed, and an answer that read one of them is computed again when next asked for
(checked lazily, by the epoch an answer was last known good in).

Memory is bounded, not by the repository's size: answers are kept in two generations of at
most ``MAX_ANSWERS`` each; when the young one is full it becomes the old one (the previous
old one is dropped), and an answer found in the old one moves back to the young one. A
dropped answer is computed again when next asked for, the same as before.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

MAX_DEPTH = 16
# Answers kept per generation. Most are asked for by one file or its neighbours: on
# three large Python projects (6,143 files, 417k answers computed), 20k per generation
# computed 3% more than keeping all of them, in the same time; all kept, nine projects'
# 774k answers held ~500 MB.
MAX_ANSWERS = 25_000
_MAX_EPOCHS = 64  # more patches than this since an answer was checked: start afresh
_MISS = object()
_NONE: frozenset = frozenset()


class Memo:
    """Cycle- and depth-safe memoisation with read tracking and an "inferred" flag."""

    def __init__(self, max_answers: int = MAX_ANSWERS) -> None:
        self.memo: dict[Hashable, tuple[Any, bool, frozenset, int]] = {}  # the young generation
        self.old: dict[Hashable, tuple[Any, bool, frozenset, int]] = {}
        self.max_answers = max_answers
        self.shared: dict[frozenset, frozenset] = {}  # the young answers' read sets
        self.epoch = 0
        self.changes: list[set] = []  # changes[i]: keys changed when epoch i + 1 began
        self._stale: dict[int, set] = {}  # epoch -> keys changed since
        self.busy: set[Hashable] = set()  # keys being evaluated
        self.depth = 0
        self.cut = False  # the current evaluation went through a cut
        self.inferred = False  # the current answer went through an inferred type
        self.reads: set[Hashable] = set()

    def read(self, key: Hashable) -> None:
        """Note that the current answer depends on the data named by ``key``."""
        self.reads.add(key)

    def forget_answers(self) -> None:
        """Drop every memoised answer (the epochs stay)."""
        self.memo.clear()
        self.old.clear()
        self.shared.clear()

    def stash(self) -> tuple[dict, dict]:
        """Set the answers aside (``restore`` brings them back): lookups in between start
        from none."""
        kept = self.memo, self.old
        self.memo, self.old = {}, {}
        return kept

    def restore(self, kept: tuple[dict, dict]) -> None:
        self.memo, self.old = kept

    def clear(self) -> None:
        self.memo.clear()
        self.old.clear()
        self.shared.clear()
        self.changes.clear()
        self._stale.clear()
        self.epoch = 0

    def invalidate(self, keys: set) -> None:
        """The data named by ``keys`` changed: answers that read any of it are stale."""
        if not keys:
            return
        if len(self.changes) >= _MAX_EPOCHS:
            self.clear()
            return
        self.changes.append(set(keys))
        self.epoch += 1
        self._stale.clear()

    def _changed_since(self, epoch: int) -> set:
        stale = self._stale.get(epoch)
        if stale is None:
            stale = self._stale[epoch] = set().union(*self.changes[epoch:])
        return stale

    def guard(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> Any:
        hit = self.memo.get(key, _MISS)
        if hit is _MISS and self.old:
            hit = self.old.pop(key, _MISS)
            if hit is not _MISS:
                self._keep(key, hit)
        if hit is not _MISS and hit[3] != self.epoch:  # from before a patch: still good?
            if hit[2].isdisjoint(self._changed_since(hit[3])):
                hit = self.memo[key] = (*hit[:3], self.epoch)
            else:
                hit = _MISS
        if hit is not _MISS:
            result, inferred, reads, _ = hit
            self.inferred = self.inferred or inferred
            if reads:
                self.reads |= reads
            return result
        if key in self.busy or self.depth > MAX_DEPTH:
            self.cut = True
            return None
        outer_inferred, outer_cut, outer_reads = self.inferred, self.cut, self.reads
        self.inferred, self.cut, self.reads = False, False, set()
        self.busy.add(key)
        self.depth += 1
        try:
            result = fn(*args)
        finally:
            self.depth -= 1
            self.busy.discard(key)
            inferred, cut, reads = self.inferred, self.cut, self.reads
            outer_reads |= reads
            self.cut, self.reads = outer_cut or cut, outer_reads
            self.inferred = outer_inferred
        if not cut:
            self._keep(key, (result, inferred, self._shared(reads), self.epoch))
        self.inferred = outer_inferred or inferred
        return result

    def _keep(self, key: Hashable, answer: tuple[Any, bool, Any, int]) -> None:
        if len(self.memo) >= self.max_answers:
            self.old, self.memo = self.memo, {}
            self.shared.clear()
        self.memo[key] = answer

    def _shared(self, reads: set) -> frozenset:
        """``reads`` as a frozenset shared by every answer that read the same keys (most
        read one or two, and many the same: a set each was most of the memo's memory)."""
        if not reads:
            return _NONE
        f = frozenset(reads)
        return self.shared.setdefault(f, f)


__all__ = ["MAX_ANSWERS", "MAX_DEPTH", "Memo"]
