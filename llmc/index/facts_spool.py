"""The graph facts the chunk workers extract, spooled to a file as an index run writes each
batch, instead of held in the indexer until the graph update takes them.

Each changed file's facts (JSON bytes, ``llmc.graph.facts``) are appended to
``.llmc/graph_facts.spool`` (0600); the indexer keeps only each file's offset and length.
``SpooledFacts`` reads them back by path as a ``Mapping[str, bytes]``, and pickles as its
file name and offsets, so the graph update's worker gets a few bytes per file, not the
facts (which it reads from the file one at a time). The graph decodes and checks what it
reads, as it did what the workers sent (``llmc.graph.codec.decode_facts``: a bad entry is a
file extracted again). The spool lives for one run: the next one truncates it, and the
indexer removes it once the graph is updated.
"""

from __future__ import annotations

import os
from pathlib import Path

from llmc.offset_reads import OffsetReads
from llmc.paths import open_state_file

SPOOL_FILE = "graph_facts.spool"  # in .llmc/


class SpooledFacts(OffsetReads):
    """Path → facts JSON, read from the spool file when asked."""

    def __init__(self, path: Path, offsets: dict[str, tuple[int, int]]):
        super().__init__(offsets)  # type: ignore[arg-type]
        self.path = Path(path)

    @property
    def offsets(self) -> dict[str, tuple[int, int]]:
        return self._where  # type: ignore[return-value]

    def _open(self) -> int:
        return os.open(self.path, os.O_RDONLY)

    def __getstate__(self) -> dict:
        return {"path": self.path, "offsets": self.offsets}

    def __setstate__(self, state: dict) -> None:
        self.path, self._where, self._fd = state["path"], state["offsets"], None


class FactsSpool:
    """Appends a run's facts to ``<state dir>/graph_facts.spool`` (truncated on open)."""

    def __init__(self, state_dir: Path):
        self.path = Path(state_dir) / SPOOL_FILE
        fd = open_state_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.fchmod(fd, 0o600)
        self._file = os.fdopen(fd, "wb")
        self._offsets: dict[str, tuple[int, int]] = {}
        self._end = 0

    def add(self, path: str, facts: bytes) -> None:
        self._file.write(facts)
        self._offsets[path] = (self._end, len(facts))
        self._end += len(facts)

    def facts(self) -> SpooledFacts:
        """What was added, readable (the writes flushed)."""
        self._file.flush()
        return SpooledFacts(self.path, self._offsets)

    def remove(self) -> None:
        self._file.close()
        try:
            self.path.unlink()
        except OSError:
            pass


__all__ = ["SPOOL_FILE", "FactsSpool", "SpooledFacts"]
