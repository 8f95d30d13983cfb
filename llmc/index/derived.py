"""The derived indexes after an index run's writes: the lexical index and the graph.

When the run chunked its files in worker processes, the graph update was started in one
of them at the end of the parse (``llmc.graph.early``, behind a commit gate) and this module
only waits for it. Otherwise (a small run, one core, a broken pool, no gate) it is updated
here, after the lexical index. Either way the writer lock is held until both are done. A
lexical index ahead of the store (lost commits) is caught before the run writes anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from llmc.config import GraphConfig
    from llmc.graph.model import GraphStats
    from llmc.index.progress import Progress
    from llmc.store.db import Store
    from llmc.store.lexical import LexicalIndex
    from llmc.types import IndexSummary

log = logging.getLogger(__name__)


def repair_lost_tail(
    store: Store, lexical: LexicalIndex, summary: IndexSummary, note: Callable[[str], None]
) -> bool:
    """True when the lexical index is ahead of the store: SQLite lost its last commits.

    The store's generation then jumps past the lexical one, so that the generation
    recorded next names this content only; the caller's checks make it durable, rebuild
    the derived indexes from SQLite and re-index whatever the lost commits held.
    """
    ahead = lexical.generation
    if ahead <= store.generation:
        return False
    note(
        f"the index database is at generation {store.generation}, behind its lexical "
        f"index ({ahead}): commits were lost (power loss) or index.db was replaced; "
        "repairing from SQLite and the files"
    )
    store.bump_generation(past=ahead)
    summary.repaired.append("lost-tail")
    return True


def sync_files(root: Path, store: Store) -> None:
    """Bring the whole-file index (``llmc.store.file_lexical``) to the store's files. A
    failure is one warning: file-level answers then go without it until the next run."""
    from llmc.errors import StoreError
    from llmc.paths import file_index_path
    from llmc.store.file_lexical import FileIndex

    if not file_index_path(root).parent.is_dir():
        return  # .llmc/ deleted mid-run: the run's own check says so
    try:
        report = FileIndex(file_index_path(root)).sync(store)
    except StoreError as e:
        log.warning("whole-file index not updated: %s", e)
        return
    if report.written or report.removed:
        log.info("whole-file index: %d file(s) written, %d removed", report.written, report.removed)


def finish(
    root: Path,
    cfg: GraphConfig,
    store: Store,
    lexical: LexicalIndex,
    changed: list[str],
    removed: list[str],
    progress: Progress,
    facts: Mapping[str, bytes] | None = None,
    beside: Future[GraphStats] | None = None,
) -> None:
    """Bring the lexical index (if stale) and the graph up to date with the store. A failed
    graph update is one warning: the graph is derived, the index stays usable."""
    if lexical.generation != store.generation:
        store.make_durable()
        lexical.rebuild(store.iter_spans(), store.generation)
    finish_graph_logged(root, cfg, store, changed, removed, progress, facts, beside)


def finish_graph_logged(
    root: Path,
    cfg: GraphConfig,
    store: Store,
    changed: list[str],
    removed: list[str],
    progress: Progress,
    facts: Mapping[str, bytes] | None = None,
    beside: Future[GraphStats] | None = None,
) -> None:
    """``finish_graph`` as a phase of the run; a failure is one warning (the graph is
    derived: the index stays usable and the next run rebuilds it)."""
    if not cfg.enabled:
        return
    progress.phase("graph", None)
    try:
        finish_graph(root, cfg, store, changed, removed, facts, beside)
    except Exception as e:  # noqa: BLE001 - the graph is derived; the index stays usable
        log.warning("graph update failed (%s); `llmc index` will rebuild it next run", e)


def finish_graph(
    root: Path,
    cfg: GraphConfig,
    store: Store,
    changed: list[str],
    removed: list[str],
    facts: Mapping[str, bytes] | None,
    beside: Future[GraphStats] | None,
) -> None:
    """Wait for the graph update started beside, or run it here. Raises what it raised."""
    if beside is not None:
        from concurrent.futures.process import BrokenProcessPool

        from llmc.models.heap import release_free_heap

        # While the graph's worker resolves (the run's largest process), this one waits:
        # the C heap's pages freed by the writes go back first (nine large projects:
        # 372 -> 242 MB; Python keeps them for reuse otherwise)
        release_free_heap()
        try:
            beside.result()
            return
        except BrokenProcessPool as e:  # a worker died: the update itself may be fine
            log.info("graph update in a worker process failed (%s); updating it here", e)
    from llmc.graph.build import update_graph

    update_graph(root, store, changed, removed, store.generation, cfg, facts=facts)


__all__ = [
    "finish",
    "finish_graph",
    "finish_graph_logged",
    "repair_lost_tail",
]
