"""What graph queries answer: nodes, edges, references, usages and dependencies, each
with its JSON form (``llmc graph --json`` and the daemon print these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NodeInfo:
    id: str
    kind: str
    name: str
    path: str = ""
    qualname: str = ""
    lang: str = ""
    start_line: int = 0
    end_line: int = 0
    span_id: int | None = None
    test: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "path": self.path,
            "qualname": self.qualname,
            "lang": self.lang,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "span_id": self.span_id,
            "test": self.test,
        }


@dataclass(frozen=True)
class Edge:
    """One edge seen from ``node``: ``other`` is at the far end, ``direction`` is "out"
    (node → other) or "in" (other → node); ``line`` is where the reference is written."""

    node: str
    other: str
    type: str
    direction: str
    confidence: float = 1.0
    line: int = 0
    via: str = ""
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "other": self.other,
            "type": self.type,
            "direction": self.direction,
            "confidence": self.confidence,
            "line": self.line,
            "via": self.via,
            "count": self.count,
        }


@dataclass(frozen=True)
class Ref:
    """A place that uses a symbol: the using node, where, and how sure we are."""

    node: str
    kind: str
    path: str
    line: int
    confidence: float
    via: str = ""
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "path": self.path,
            "line": self.line,
            "confidence": self.confidence,
            "via": self.via,
            "name": self.name,
        }


@dataclass(frozen=True)
class Usage:
    target: NodeInfo
    callers: list[Ref] = field(default_factory=list)
    possible_callers: list[Ref] = field(default_factory=list)
    importers: list[Ref] = field(default_factory=list)
    subclasses: list[Ref] = field(default_factory=list)
    tests: list[Ref] = field(default_factory=list)
    docs: list[Ref] = field(default_factory=list)

    GROUPS = ("callers", "possible_callers", "importers", "subclasses", "tests", "docs")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target.to_json()}
        for g in self.GROUPS:
            out[g] = [r.to_json() for r in getattr(self, g)]
        return out


@dataclass(frozen=True)
class Dep:
    node: str
    depth: int
    type: str
    confidence: float
    source: str
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "depth": self.depth,
            "type": self.type,
            "confidence": self.confidence,
            "from": self.source,
            "line": self.line,
        }


__all__ = ["Dep", "Edge", "NodeInfo", "Ref", "Usage"]
