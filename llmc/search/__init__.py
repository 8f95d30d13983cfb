"""Search: route a query, retrieve with BM25 and dense per route, fuse, return spans.

``Searcher(root, cfg).search(query, k=None, route=None, explain=False)`` is the one entry
point the CLI, the daemon and the eval runner share; it returns a ``SearchResponse``
whose ``to_json()`` is the `llmc search --json` object.
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
