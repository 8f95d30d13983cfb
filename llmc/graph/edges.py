"""Edges as the resolver makes them: recorded per file, then merged into one table.

Resolving one file yields an :class:`EdgeSink` per phase: the edges it found, in order,
plus the ``?name`` placeholders it needs and its resolution counts. The incremental build
keeps these per file and replays them in file order, which merges exactly as one pass over
every file would (confidence: the highest; line: the first; count: the sum).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from llmc.graph.model import BY_NAME, CALLS, EXACT, IMPORTS, TESTS, UNRESOLVED

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


class EdgeTable:
    """Nodes and merged edges of the graph being built."""

    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes = nodes
        self.edges: dict[tuple[str, str, str], dict[str, Any]] = {}

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
            e = {"confidence": confidence, "count": 0}
            if line:
                e["line"] = line
            if via:
                e["via"] = via
            self.edges[key] = e
        else:
            if confidence > e["confidence"]:
                e["confidence"] = confidence
                if via:
                    e["via"] = via
            if line and (not e.get("line") or line < e["line"]):
                e["line"] = line
        e["count"] += 1

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
            if etype not in (CALLS, IMPORTS) or e["confidence"] < BY_NAME:
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
                self.add(test, dst, TESTS, e["confidence"], e.get("line", 0), etype)


__all__ = ["EdgeSink", "EdgeTable", "Event"]
