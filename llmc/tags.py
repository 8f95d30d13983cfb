"""The record the chunker and the graph share to walk a file's tree once.

Each tree-sitter query walks the whole tree, which costs more than matching a few more
patterns on the way. So the graph's tags query (``llmc.graph.extract.tags_walk``) rides in
the chunker's walk (``llmc.index.chunk.code``) as an :class:`Also`. It lives here, below
both: the graph is a lower layer than the indexer and never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Also:
    """Another query to run in the chunker's walk of a file's tree: each query walks the
    whole tree, which costs more than matching a few more patterns on the way, so the
    graph's tags query (``llmc.graph.extract``) runs in the same walk as the definitions
    and comments. Its matches are left in the chunker's ``trees`` under ``key``, in the
    order its own cursor yields them (its patterns come first in the combined query)."""

    grammar: str
    source: str
    key: Any


__all__ = ["Also"]
