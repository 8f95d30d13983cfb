"""What one query leaves behind besides its results: stage timings, notes, warnings.

Every stage gets the query's ``Trace``; ``--explain`` shows its notes, ``--json`` its
timings and warnings. A warning is logged once and shown once however many stages raise it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from llmc.search.types import StageNote

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.search.hyde.diagnostics import HydeReport
    from llmc.search.types import Match, RankedList

log = logging.getLogger(__name__)


class Trace:
    """Per-query bookkeeping: stage timings, notes for --explain, warnings, the query's
    vectors (one per embedding model, computed once) and HyDE's report."""

    def __init__(self, warnings: Sequence[str] = ()):
        self.timings: dict[str, float] = {}
        self.notes: list[StageNote] = []
        self.warnings: list[str] = list(warnings)
        self.hyde: HydeReport | None = None
        self.query_vectors: dict[str, np.ndarray] = {}  # model id → the query's vector
        self.retrieved: list[RankedList] = []  # the retrievers' lists (pipeline._run)
        self.match: Match | None = None  # how well the index matches the query (match.py)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block; a stage entered twice adds up."""
        started = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - started) * 1000
            self.timings[name] = self.timings.get(name, 0.0) + ms

    def note(self, stage: str, note: str) -> None:
        self.notes.append(StageNote(stage, note))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            log.info("%s", message)
            self.warnings.append(message)


__all__ = ["Trace"]
