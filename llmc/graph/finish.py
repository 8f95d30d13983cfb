"""The graph update's last steps: spans mapped to nodes, and the state left for next time.

After resolution (``build._update``) the graph's nodes get their span ids and counts,
either for a kept resolver's patched pieces (only the changed files' spans are read) or
for a whole graph; once the graph file is written, the facts cache follows (a delta
appended when the previous cache is the one the kept resolver read, else written whole)
and the daemon's warm state is kept. The order of the releases (what is let go of when)
is the build's memory bound at 100k files; each step keeps it.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.graph import cache as facts_cache
from llmc.graph import spanmap, warm
from llmc.graph.output import EncodedEdges, NodeLink, Tracked, pieces_usable

if TYPE_CHECKING:
    from llmc.graph.gather import Gathered
    from llmc.graph.resolve import Resolver
    from llmc.store.db import Store

log = logging.getLogger(__name__)

Counts = tuple[int, int, dict[str, int], dict[str, int]]  # nodes, edges, by kind, by type


def map_patched(
    store: Store, nodes: Any, resolver: Resolver, output: NodeLink, changed: set[str],
    span_nodes_of: dict[str, dict[str, str]],
) -> tuple[dict[int, str], Counts]:  # fmt: skip
    """A patched resolver's graph: only the changed files' spans mapped, only the
    changed pieces re-encoded; the span map and the counts."""
    dirty = changed | resolver.facts_changed
    touched = spanmap.map_spans(
        nodes, resolver, spanmap.read_span_rows(store, dirty), dirty, span_nodes_of
    )
    output.update(nodes, resolver.table.edges, nodes.take() | touched, resolver.table.edges.take())
    span_nodes = {sid: nid for per in span_nodes_of.values() for sid, nid in per.items()}
    return span_nodes, output.counts()


def map_whole(
    store: Store, nodes: Any, edges: Any, resolver: Resolver | None, spans_by_path: Any,
    types_first_seen: tuple[str, ...],
) -> tuple[dict[int, str], Counts, Any]:  # fmt: skip
    """A whole graph's spans mapped to its nodes (file by file when no state is kept),
    its counts, and the span rows a kept state maps its files' spans with (else None)."""
    for n in nodes.values():
        n.pop("span_id", None)
    mapped = None
    if spans_by_path is None and resolver is not None and not warm.enabled():
        # no state kept: each file's spans are read, mapped and let go in turn
        mapped = spanmap.map_all_spans(store, nodes, resolver.defs)
    if mapped is not None:
        span_nodes, mapped = mapped, None  # (let go of with the graph, once written)
        resolver.defs = {}  # type: ignore[union-attr]  # (read by the merge and span map only)
    else:
        if spans_by_path is None:
            spans_by_path = spanmap.read_span_rows(store)
        spanmap.attach_spans(nodes, spans_by_path)
        span_nodes = spanmap.span_nodes(nodes, spans_by_path)
    if not warm.enabled():
        spans_by_path = None  # (a kept state maps each file's spans: below)
    log.debug("graph: %d spans mapped to nodes; writing", len(span_nodes))
    by_kind = dict(Counter(n["kind"] for n in nodes.values()).most_common())
    if isinstance(edges, EncodedEdges):  # merged part by part (llmc.graph.parts)
        by_type = edges.by_type(types_first_seen)
    else:
        by_type = dict(Counter(t for _, _, t in edges).most_common())
    return span_nodes, (len(nodes), len(edges), by_kind, by_type), spans_by_path


def keep_state(
    llmc_dir: Path, files: tuple[Path, Path, Path], *, header: dict[str, Any],
    cache: dict[str, Any], prev_token: str | None, keep_edges: bool, got: Gathered,
    resolver: Resolver, spill: facts_cache.ResultSpill | None, records: Any,
    graph: tuple[Any, NodeLink | None, dict[int, str] | None, Any, Any],
) -> None:  # fmt: skip
    """After the graph file: the facts cache (a delta when the kept resolver read the
    previous one, else whole; either order with the graph is crash-safe: the two tokens
    differ until both are written, and a mismatch rebuilds), then the warm state, or the
    resolver let go of. ``graph``: (nodes, output, span_nodes, span_nodes_of,
    spans_by_path) as the write left them."""
    facts_file = files[1]
    if not (
        keep_edges
        and prev_token
        and facts_cache.append_delta(
            facts_file,
            prev_token,
            cache,
            got.reextracted,
            resolver.encoded_results(resolver.last_resolved),
        )
    ):
        # A kept resolver (the daemon's) keeps the encodings for its next write; a cold
        # run's is released next, so its results are encoded as they are written
        facts_cache.write(
            facts_file,
            cache,
            resolver.state_header(),
            resolver.encoded_results(resolver.results, prune=True)
            if warm.enabled()
            else resolver.iter_encoded(resolver.results),
            spill.lines() if spill is not None else (),
        )
        if spill is not None:
            spill.remove()
    nodes, output, span_nodes, span_nodes_of, spans_by_path = graph
    if warm.enabled() and output is None and pieces_usable(records):
        output = NodeLink(nodes, resolver.table.edges)
        span_nodes_of = spanmap.span_nodes_by_path(span_nodes, spans_by_path)
        for tracked in (nodes, resolver.table.edges):  # the pieces start from here
            if isinstance(tracked, Tracked):
                tracked.take()
    if not warm.keep(llmc_dir, files, header, cache, resolver, output, span_nodes_of):
        resolver.release()


__all__ = ["map_patched", "map_whole", "keep_state"]
