"""What the incremental build keeps between runs, and which files it must resolve again.

Each file's resolution is kept as a :class:`FileResult`: the edges it produced (in order,
per phase), its resolution counts, and the keys of every table entry its lookups read.
The next run patches the previous run's tables with the changed files' facts
(:mod:`llmc.graph.patch`), which names the entries whose value changed, and resolves again
only the files that changed and those that read a changed entry (a name defined or no
longer defined, a class's members or bases, a module's imports or definitions, ...). A
changed file list or package layout (the module signature), other settings or an
unreadable state mean resolving every file.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from llmc.graph.edges import Event

# Bump when what is kept, or what resolution produces from the same facts, changes.
STATE_VERSION = 3  # 3: name-only calls keep their receiver (graph/guesses.py)
PHASES = ("imports", "inherits", "calls", "mentions")


@dataclass(frozen=True)
class FileResult:
    """One file's share of the graph: edge events per phase, counts, what it read."""

    phases: tuple[tuple[Event, ...], ...]  # one tuple per PHASES entry
    counts: tuple[tuple[tuple[str, str], int], ...]  # ((edge type, status), n)
    reads: frozenset[Hashable]


@dataclass(frozen=True)
class ResolutionState:
    """Everything the next run needs to reuse this run's per-file results: the files'
    results, and what they were resolved under."""

    version: int
    name_fallback: bool
    signature: tuple
    files: dict[str, FileResult]


__all__ = ["PHASES", "STATE_VERSION", "FileResult", "ResolutionState"]
