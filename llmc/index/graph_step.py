"""The graph step of an index run (``llmc.graph.build.update_graph``).

When the run chunked its files in worker processes, the graph is updated in one of them
while this process writes the lexical index: the store is committed and durable by then,
the graph reads only the store, the files' facts the workers extracted and its own cache,
and the lexical index reads nothing the graph writes. Otherwise (a small run, one core, a
broken pool) it is updated here, after the lexical index. Either way the writer lock is
held until it is done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from llmc.config import GraphConfig
    from llmc.graph.model import GraphStats
    from llmc.index.chunk_pool import ChunkPool
    from llmc.store.db import Store

log = logging.getLogger(__name__)


def start_beside(
    pool: ChunkPool | None,
    root: Path,
    cfg: GraphConfig,
    changed: list[str],
    removed: list[str],
    generation: int,
    facts: Mapping[str, bytes],
) -> Future[GraphStats] | None:
    """Start the update in a chunk worker; None when there is none to run it."""
    if pool is None or not cfg.enabled:
        return None
    from llmc.graph.build import update_graph_in

    return pool.beside(update_graph_in, root, changed, removed, generation, cfg, dict(facts))


def finish(
    root: Path,
    cfg: GraphConfig,
    store: Store,
    changed: list[str],
    removed: list[str],
    facts: Mapping[str, bytes] | None,
    beside: Future[GraphStats] | None,
) -> None:
    """Wait for the update started beside, or run it here. Raises what the update raised."""
    if beside is not None:
        from concurrent.futures.process import BrokenProcessPool

        try:
            beside.result()
            return
        except BrokenProcessPool as e:  # a worker died: the update itself may be fine
            log.info("graph update in a worker process failed (%s); updating it here", e)
    from llmc.graph.build import update_graph

    update_graph(root, store, changed, removed, store.generation, cfg, facts=facts)


__all__ = ["finish", "start_beside"]
