"""The repository graph: definitions, calls, imports, inheritance, tests and doc mentions.

Write side: ``update_graph`` (called by the indexer) keeps ``.llmc/rag_graph.json`` in step
with the store. Read side: ``load_graph`` gives a cached :class:`RepoGraph` with
``neighbors``, ``degree``, ``pagerank``, ``node_for_span``, ``spans_for_node``,
``where_used`` and ``deps``. Heavy imports (tree-sitter, networkx) happen inside functions.
"""

from llmc.graph.build import update_graph
from llmc.graph.model import EDGE_TYPES, GraphStats
from llmc.graph.query import RepoGraph, load_graph

__all__ = [
    "EDGE_TYPES",
    "GraphStats",
    "RepoGraph",
    "load_graph",
    "update_graph",
]
