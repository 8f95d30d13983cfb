"""Search: route a query, retrieve with BM25 and dense per route, fuse, return spans.

``Searcher(root, cfg).answer(query, k=None, route=None, explain=False, group="span")`` is
the one answer the CLI, the daemon, MCP and the lab share (``answer.py``): the pipeline's
``SearchResponse`` (``Searcher.search``) or, with ``group="file"``, its files; its
``to_json()`` is the `llmc search --json` object.
"""

from llmc.search.pipeline import Searcher
from llmc.search.types import (
    Candidate,
    Explain,
    RankedList,
    RouteDecision,
    SearchResponse,
    SearchResult,
)

__all__ = [
    "Candidate",
    "Explain",
    "RankedList",
    "RouteDecision",
    "SearchResponse",
    "SearchResult",
    "Searcher",
]
