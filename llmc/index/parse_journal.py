"""Which file a process is chunking, written down before it starts, so that a parser crash
names its culprit.

A tree-sitter grammar's C code can crash the whole process (SIGSEGV, an abort) on input it
was never tested with: no exception reaches Python. llmc guards the crashes it knows
(``chunk.grammar.too_deep_for_grammar``); this covers the ones it does not. Every process that
chunks (the indexer, each chunk worker) keeps ``.llmc/chunking/<pid>`` holding the path it
is chunking now, rewritten before each file and removed when it is done. A file left
behind by a process that no longer runs names the file it died on. The indexer reads them:
a dead worker's file is known at once (the pool broke) and the run goes on without parsing
it; a dead indexer's file is read by the next run. Either way that file is cut into line
windows instead of parsed, with one line saying so, and nothing else is lost.

The writes are plain (no fsync): a crashed process's page-cache writes survive it, and a
power loss takes the crash's evidence with everything else unsynced, which costs at most
one more crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import IO

from llmc.index.live import pid_alive  # a zombie (ended, not yet waited for) is not alive

log = logging.getLogger(__name__)

JOURNAL_DIR = "chunking"


class ParseJournal:
    """This process's entry in a journal directory (see the module doc)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._fh: IO[str] | None = None
        self._unavailable = False  # a read-only or full disk: chunk without the journal

    def mark(self, rel: str | None) -> None:
        """Record that this process now chunks ``rel`` (None: nothing)."""
        if self._fh is None:
            if rel is None or self._unavailable:
                return
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                # surrogateescape: a name that is not UTF-8 is written as its own bytes
                self._fh = open(  # noqa: SIM115
                    self.directory / str(os.getpid()),
                    "w",
                    encoding="utf-8",
                    errors="surrogateescape",
                )
            except OSError as e:
                log.debug("parse journal unavailable (%s)", e)
                self._unavailable = True
                return
        fh = self._fh
        fh.seek(0)
        fh.write(rel or "")
        fh.truncate()
        fh.flush()

    def close(self) -> None:
        """Done chunking: remove this process's entry."""
        if self._fh is None:
            return
        with contextlib.suppress(OSError):
            self._fh.close()
            os.unlink(self.directory / str(os.getpid()))
        self._fh = None


def culprits(directory: Path) -> dict[str, int]:
    """Files that a process no longer running was chunking when it died: path → its pid.
    Their entries are removed (the caller now knows); live processes' are left alone."""
    out: dict[str, int] = {}
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return out
    for entry in entries:
        try:
            pid = int(entry.name)
        except ValueError:
            continue
        if pid != os.getpid() and pid_alive(pid):
            continue
        try:
            rel = entry.read_text(encoding="utf-8", errors="surrogateescape").strip()
            entry.unlink()
        except OSError:
            continue
        if rel and pid != os.getpid():
            out[rel] = pid
    return out


__all__ = ["JOURNAL_DIR", "ParseJournal", "culprits"]
