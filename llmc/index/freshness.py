"""Has the working tree moved on since the last index? A stat pass over the indexed files.

A search without a daemon answers from the index as the last `llmc index` left it; a
function added since is simply not there. The CLI says so: every indexed file is stat'ed
(no read, no walk) and those whose size or mtime changed, or that are gone, are counted.
New files are not looked for (that needs the walk, ~10x the cost); past ``MAX_FILES``
indexed files the pass is skipped (a large tree wants the daemon, which reindexes on change).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from llmc.store.db import FileRecord

MAX_FILES = 50_000  # ~50 ms of stat calls on a warm cache; beyond, the daemon's job
SHOWN = 3


@dataclass(frozen=True)
class Staleness:
    changed: tuple[str, ...]
    deleted: tuple[str, ...]

    def warning(self) -> str | None:
        """One line for a search's warnings, or None when the index is current."""
        paths = self.changed + self.deleted
        if not paths:
            return None
        shown = ", ".join(paths[:SHOWN]) + (
            f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
        )
        return (
            f"the index is older than the working tree: {len(self.changed)} file(s) changed"
            f" and {len(self.deleted)} deleted since it was built ({shown}); run `llmc index`"
        )


def staleness(root: Path, files: dict[str, FileRecord]) -> Staleness | None:
    """Indexed files whose stat no longer fits; None when there are too many to check."""
    if len(files) > MAX_FILES:
        return None
    changed, deleted = [], []
    for path, rec in files.items():
        try:
            st = os.stat(os.path.join(root, path))  # a link's target, as the walk
        except OSError:
            deleted.append(path)
            continue
        if (st.st_size, st.st_mtime_ns) != (rec.size, rec.mtime_ns):
            changed.append(path)
    return Staleness(tuple(sorted(changed)), tuple(sorted(deleted)))


__all__ = ["MAX_FILES", "Staleness", "staleness"]
