"""Edges as the resolver makes them: recorded per file, then merged into one table.

Resolving one file yields an :class:`EdgeSink` per phase: the edges it found, in order,
plus the ``?name`` placeholders it needs and its resolution counts. The incremental build
keeps these per file and replays them in file order, which merges exactly as one pass over
every file would (confidence: the highest; line: the first; count: the sum).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from llmc.graph.model import (
    BY_NAME,
    CALLS,
    EXACT,
    IMPORTS,
    INFERRED,
    NAME_ONLY,
    TESTS,
    UNRESOLVED,
)

Event = tuple  # (src, dst, type, confidence, line, via) | (uid, name, candidates)


class EdgeSink:
    """What one phase of resolving one file produced, in order."""

    __slots__ = ("counts", "events")

    def __init__(self, counts: Counter) -> None:
        self.events: list[Event] = []
        self.counts = counts  # (edge type, status) -> n, shared by a file's phases

    def edge(
        self,
        src: str,
        dst: str,
        etype: str,
        confidence: float = EXACT,
        line: int = 0,
        via: str = "",
    ) -> None:
        self.events.append((src, dst, etype, confidence, line, via))

    def count(self, etype: str, status: str) -> None:
        self.counts[(etype, status)] += 1

    def unresolved(self, uid: str, name: str, candidates: int) -> None:
        self.events.append((uid, name, candidates))


class Edge(Mapping):
    """A merged edge's attributes, read as the dict the graph file writes: ``confidence``,
    ``count``, then ``line`` and ``via`` when set, in the order they were first set (a
    merge sets them as ``EdgeTable.add`` says). Slots, not a dict: ~1M of them on nine
    large projects, at ~70 bytes each instead of ~185."""

    __slots__ = ("confidence", "count", "line", "via", "via_first")

    def __init__(self, confidence: float, count: int = 0, line: int = 0, via: str = "") -> None:
        self.confidence = _shared(confidence)
        self.count = count
        self.line = line
        self.via = via
        self.via_first = bool(via) and not line  # ``via`` set before ``line``

    @classmethod
    def restore(cls, confidence: float, count: int, line: int, via: str, via_first: bool) -> Edge:
        """An edge as it was (its fields as read from another)."""
        e = cls(confidence, count, line, via)
        e.via_first = via_first
        return e

    def set_via(self, via: str) -> None:
        if not self.via and not self.line:
            self.via_first = True
        self.via = via

    def keys(self) -> list[str]:  # type: ignore[override]
        if not self.line:
            return ["confidence", "count", "via"] if self.via else ["confidence", "count"]
        if not self.via:
            return ["confidence", "count", "line"]
        if self.via_first:
            return ["confidence", "count", "via", "line"]
        return ["confidence", "count", "line", "via"]

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.keys()}

    def __getitem__(self, key: str) -> Any:
        if key in _FIELDS and (key not in _OPTIONAL or getattr(self, key)):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Edge):
            other = other.as_dict()
        return isinstance(other, Mapping) and self.as_dict() == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Edge({self.as_dict()!r})"


_FIELDS = frozenset(("confidence", "count", "line", "via"))
_OPTIONAL = frozenset(("line", "via"))
_FLOATS = {c: c for c in (EXACT, BY_NAME, INFERRED, NAME_ONLY)}


def _shared(confidence: float) -> float:
    """The one float of each confidence level (decoded events carry a float each)."""
    return _FLOATS.get(confidence, confidence) if type(confidence) is float else confidence


class EdgeTable:
    """Nodes and merged edges of the graph being built."""

    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes = nodes
        self.edges: dict[tuple[str, str, str], Edge] = {}

    def add(
        self,
        src: str,
        dst: str,
        etype: str,
        confidence: float = EXACT,
        line: int = 0,
        via: str = "",
    ) -> None:
        if src == dst and etype != CALLS:
            return
        key = (src, dst, etype)
        e = self.edges.get(key)
        if e is None:
            e = self.edges[key] = Edge(confidence, 1, line, via)
            return
        if confidence > e.confidence:
            e.confidence = _shared(confidence)
            if via:
                e.set_via(via)
        if line and (not e.line or line < e.line):
            e.line = line
        e.count += 1

    def replay(self, events: tuple[Event, ...] | list[Event]) -> None:
        for ev in events:
            if len(ev) == 3:
                uid, name, candidates = ev
                if uid not in self.nodes:
                    self.nodes[uid] = {"kind": UNRESOLVED, "name": name, "candidates": candidates}
            else:
                self.add(*ev)

    def add_tests(self, test_source, test_paths: set[str]) -> None:
        """A ``tests`` edge for each confident call or import from a test to code outside
        test files; ``test_source(node id)`` names the test a reference belongs to, and
        only references from ``test_paths`` (files with tests) can belong to one."""
        sources: dict[str, str | None] = {}
        for (src, dst, etype), e in list(self.edges.items()):
            if etype not in (CALLS, IMPORTS) or e.confidence < BY_NAME:
                continue
            if src.partition("::")[0] not in test_paths:
                continue
            tgt = self.nodes.get(dst)
            if tgt is None or tgt["kind"] == UNRESOLVED:
                continue
            if self.nodes.get(tgt["path"], {}).get("test"):
                continue
            test = sources.get(src, "")
            if test == "":
                test = sources[src] = test_source(src)
            if test is not None:
                self.add(test, dst, TESTS, e.confidence, e.line, etype)


__all__ = ["Edge", "EdgeSink", "EdgeTable", "Event"]
