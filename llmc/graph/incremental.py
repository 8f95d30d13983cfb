"""What the incremental build keeps between runs, and which files it must resolve again.

Each file's resolution is kept as a :class:`FileResult`: the edges it produced (in order,
per phase), its resolution counts, and the keys of every table entry its lookups read.
The next run rebuilds the tables, compares their snapshot with the kept one, and resolves
again only the files that changed, the new ones, and those that read an entry whose value
changed (a name defined or no longer defined, a class's members or bases, a module's
imports or definitions, ...). A changed file list or package layout (the module
signature), other settings or an unreadable state mean resolving every file.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from llmc.graph.edges import Event

log = logging.getLogger(__name__)

# Bump when what is kept, or what resolution produces from the same facts, changes.
STATE_VERSION = 1
PHASES = ("imports", "inherits", "calls", "mentions")


@dataclass(frozen=True)
class FileResult:
    """One file's share of the graph: edge events per phase, counts, what it read."""

    phases: tuple[tuple[Event, ...], ...]  # one tuple per PHASES entry
    counts: tuple[tuple[tuple[str, str], int], ...]  # ((edge type, status), n)
    reads: frozenset[Hashable]


@dataclass(frozen=True)
class ResolutionState:
    """Everything the next run needs to reuse this run's per-file results."""

    version: int
    name_fallback: bool
    signature: tuple
    snapshot: dict[tuple, Any]
    files: dict[str, FileResult]


def changed_keys(old: dict[tuple, Any], new: dict[tuple, Any]) -> set[tuple]:
    out = {k for k, v in new.items() if old.get(k, _MISSING) != v}
    out.update(k for k in old if k not in new)
    return out


def files_to_resolve(
    previous: ResolutionState | None,
    name_fallback: bool,
    signature: tuple,
    snapshot: dict[tuple, Any],
    paths: Iterable[str],
    changed: set[str],
) -> set[str] | None:
    """The files to resolve again, or None for all of them."""
    if (
        not isinstance(previous, ResolutionState)
        or previous.version != STATE_VERSION
        or previous.name_fallback != name_fallback
        or previous.signature != signature
    ):
        return None
    keys = changed_keys(previous.snapshot, snapshot)
    out = set()
    for path in paths:
        kept = previous.files.get(path)
        if path in changed or kept is None or not kept.reads.isdisjoint(keys):
            out.add(path)
    log.debug("graph: %d table entries changed; resolving %d files", len(keys), len(out))
    return out


_MISSING = object()

__all__ = ["PHASES", "STATE_VERSION", "FileResult", "ResolutionState", "files_to_resolve"]
