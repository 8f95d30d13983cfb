"""A mapping of keys to byte strings kept in one file, each read by (offset, length) when
asked (``pread``): how the graph's facts and results are handed around at monorepo size
without holding them (the indexer's facts spool, the graph's facts cache)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping


class OffsetReads(Mapping[str, bytes]):
    """Key → bytes, from one file by (offset, length), or as given. Subclasses say which
    file (:meth:`_open`); the descriptor is kept until :meth:`close`."""

    def __init__(self, where: dict[str, tuple[int, int] | bytes] | None = None) -> None:
        self._where: dict[str, tuple[int, int] | bytes] = where if where is not None else {}
        self._fd: int | None = None

    def _open(self) -> int:
        """A descriptor of the file the offsets are in."""
        raise OSError("no file to read from")

    def __getitem__(self, key: str) -> bytes:
        where = self._where[key]
        if isinstance(where, bytes):
            return where
        if self._fd is None:
            self._fd = self._open()
        return os.pread(self._fd, where[1], where[0])

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


__all__ = ["OffsetReads"]
