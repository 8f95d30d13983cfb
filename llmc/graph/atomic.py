"""Files the graph writes, written atomically: a reader sees the old file or the new one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_atomic(path: Path, payload: bytes | Iterable[bytes]) -> None:
    """Write atomically (the bytes, or chunks in turn, made as they are written): a temp
    file in the same directory, then ``os.replace``. The file is 0600, as everything under ``.llmc/``
    (DESIGN.md; ``llmc.paths.tighten_state_dir``)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)  # mkstemp's mode; said here, so that no umask widens it
        with os.fdopen(fd, "wb") as fh:
            if isinstance(payload, bytes):
                fh.write(payload)
            else:
                fh.writelines(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


__all__ = ["write_atomic"]
