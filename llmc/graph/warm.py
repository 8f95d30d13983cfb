"""The graph build's state kept in memory between updates, in a process that asks for it.

An update needs the previous run's facts and per-file resolution. Read from
``.llmc/graph_facts.jsonl`` and ``rag_graph.json`` they cost about a second on Django
(~3.5k files: decoding ~100k records, decoding a 50 MB header). The daemon reindexes on
every change, so it calls :func:`enable` and keeps them: each update leaves its header,
facts and resolver here (tables, per-file results, merged edges, memoised lookups, the
JSON in encoded pieces), and the next one patches them (:mod:`llmc.graph.patch`) instead
of reading the files and resolving from scratch.

They are trusted only while the files are the very ones this process wrote (same inode,
size and modification time): any other writer (`llmc index` in another process, a chunk
worker updating the graph beside the lexical index) makes the next update read the files
again. Off by default: a one-shot `llmc index` gains nothing from it, and holding the state
through its embedding backfill would raise its peak memory.
"""

from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmc.graph.output import NodeLink
    from llmc.graph.resolve import Resolver


_MAX_REPOSITORIES = 2  # a daemon serves one; tests and tools may alternate between two


@dataclass
class WarmGraph:
    """What the last update in this process wrote: the graph header, the facts cache
    (``{"token", "files": {path: {"hash", "facts", "raw"}}}``, facts decoded) and the
    resolver (its tables, per-file results and merged edges, patched by the next update:
    :mod:`llmc.graph.patch`), the graph JSON in encoded pieces and each file's span → node
    map, with the stamps of the files it wrote them to (the graph, the facts cache and the
    cache's journal of deltas)."""

    stamps: tuple[tuple[int, int, int] | None, ...]  # graph, facts cache, journal
    header: dict[str, Any]
    cache: dict[str, Any]
    resolver: Resolver | None
    output: NodeLink | None = None  # the graph JSON in encoded pieces (llmc.graph.output)
    span_nodes: dict[str, dict[str, str]] | None = None  # path -> span id -> node id


_enabled = False
_settles = 0
_THAW_EVERY = 64
_kept: dict[Path, WarmGraph] = {}
_lock = threading.Lock()


def enable(on: bool = True) -> None:
    """Keep each update's state in this process for the next one (the daemon does)."""
    global _enabled
    _enabled = on
    if not on:
        with _lock:
            gone = list(_kept.values())
            _kept.clear()
        for w in gone:
            if w.resolver is not None:
                w.resolver.release()
        gc.unfreeze()


_here = threading.local()  # .off: this thread's update keeps nothing (``suspend_here``)


def enabled() -> bool:
    return _enabled and not getattr(_here, "off", False)


def suspend_here(off: bool = True) -> None:
    """Keep nothing from this thread's update (a repository past ``warm_max_files``: its
    update then runs as a one-shot one, in bounded memory); ``suspend_here(False)`` ends it."""
    _here.off = off


def take(llmc_dir: Path, *files: Path) -> WarmGraph | None:
    """The state the last update here left for ``llmc_dir``, if the files on disk are still
    the ones it wrote; it is handed over (not shared), since the update mutates it."""
    with _lock:
        warm = _kept.pop(_key(llmc_dir), None)
    if warm is None:
        return None
    if warm.stamps != tuple(_stamp(f) for f in files):
        if warm.resolver is not None:
            warm.resolver.release()  # its tables go by reference counting
        return None
    return warm


def keep(
    llmc_dir: Path,
    files: tuple[Path, ...],
    header: dict[str, Any],
    cache: dict[str, Any],
    resolver: Resolver | None,
    output: NodeLink | None = None,
    span_nodes: dict[str, dict[str, str]] | None = None,
) -> bool:
    """Keep what an update just wrote to ``files`` (the graph, the facts cache, its
    journal; when enabled); False when it was not kept."""
    if not enabled():
        return False
    stamps = tuple(_stamp(f) for f in files)
    if None in stamps[:2]:
        return False
    with _lock:
        gone = [_kept.pop(_key(llmc_dir), None)]
        while len(_kept) >= _MAX_REPOSITORIES:
            gone.append(_kept.pop(next(iter(_kept))))
        _kept[_key(llmc_dir)] = WarmGraph(stamps, header, cache, resolver, output, span_nodes)  # type: ignore[arg-type]
    for w in gone:
        if w is not None and w.resolver not in (None, resolver):
            w.resolver.release()  # its reference cycle, so that it is freed even if frozen
    return True


def settle() -> None:
    """After an update that kept its state: take every object alive now out of the cyclic
    garbage collector's passes (``gc.freeze``). The kept state is millions of small,
    acyclic records; a collection that walks them costs 0.2-2 s (on Django) and frees
    nothing, and updates make enough objects to trigger one every time or two. Objects
    frozen are still freed by reference counting; only a reference cycle that dies while
    frozen waits, for the next thaw: every ``_THAW_EVERY`` settles, everything goes back
    to the collector (one full pass then)."""
    global _settles
    if not _enabled:
        return
    _settles += 1
    if _settles % _THAW_EVERY == 0:
        gc.unfreeze()
    else:
        gc.freeze()


def forget(llmc_dir: Path) -> None:
    with _lock:
        w = _kept.pop(_key(llmc_dir), None)
    if w is not None and w.resolver is not None:
        w.resolver.release()


def _key(llmc_dir: Path) -> Path:
    return Path(os.path.realpath(llmc_dir))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


__all__ = ["WarmGraph", "enable", "enabled", "forget", "keep", "settle", "take"]
