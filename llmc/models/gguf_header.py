"""A bounded walk over a GGUF file's header, before llama.cpp's parser sees it.

``llmc.models.vet.check_gguf`` checks the fixed header (magic, version, counts); this module
walks what follows it: every metadata entry (key, type, value; an array's element type and
length) and every tensor's info (name, dimensions, type, offset), checking that each length
fits in what is left of the file, before anything is allocated for it. A damaged or hostile
file (a key said to be 2^60 bytes long, an array of arrays, a tensor of 40 dimensions) is
refused with one line naming the entry; llama.cpp never reads it.

The file is mapped, not read: a 1 GB model costs the pages of its header only (SmolLM2's
49k-token vocabulary: ~2 MB, a few tens of ms).
"""

from __future__ import annotations

import mmap
import struct

from llmc.errors import ModelError

# Value types (ggml/include/gguf.h): fixed-size ones by their size; 8 string, 9 array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME = 64  # GGML_MAX_NAME: a tensor's name, terminator included
MAX_KEY = 1 << 16  # a metadata key is a short dotted name (general.architecture)
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class _Reader:
    """Reads little-endian fields from ``buf`` at ``pos``; ModelError past its end."""

    def __init__(self, buf: mmap.mmap, pos: int, what: str):
        self.buf, self.pos, self.what = buf, pos, what

    def take(self, n: int, field: str) -> int:
        """Skip ``n`` bytes (``field`` names them in the error); the position before."""
        start = self.pos
        if n < 0 or n > len(self.buf) - start:
            raise ModelError(f"{self.what}: {field} runs past the end of the file")
        self.pos += n
        return start

    def u32(self, field: str) -> int:
        return _U32.unpack_from(self.buf, self.take(4, field))[0]

    def u64(self, field: str) -> int:
        return _U64.unpack_from(self.buf, self.take(8, field))[0]

    def string(self, field: str, limit: int | None = None) -> None:
        n = self.u64(field)
        if limit is not None and n >= limit:
            raise ModelError(f"{self.what}: {field} is {n:,} bytes long (at most {limit - 1})")
        self.take(n, field)


def _value(r: _Reader, kind: int, field: str) -> None:
    if kind in FIXED:
        r.take(FIXED[kind], field)
    elif kind == STRING:
        r.string(field)
    elif kind == ARRAY:
        inner, n = r.u32(field), r.u64(field)
        if inner in FIXED:
            if n > (len(r.buf) - r.pos) // FIXED[inner]:
                raise ModelError(f"{r.what}: {field} ({n:,} values) runs past the end")
            r.take(n * FIXED[inner], field)
        elif inner == STRING:
            if n > (len(r.buf) - r.pos) // 8:  # each string takes its length at least
                raise ModelError(f"{r.what}: {field} ({n:,} strings) runs past the end")
            for _ in range(n):
                r.string(field)
        else:
            raise ModelError(f"{r.what}: {field} is an array of type {inner} (not one llmc reads)")
    else:
        raise ModelError(f"{r.what}: {field} has unknown type {kind}")


def walk(buf: mmap.mmap, start: int, tensors: int, kvs: int, what: str) -> None:
    """Walk ``kvs`` metadata entries then ``tensors`` tensor infos from ``start``."""
    r = _Reader(buf, start, what)
    for i in range(kvs):
        r.string(f"metadata entry {i}'s key", MAX_KEY)
        _value(r, r.u32(f"metadata entry {i}"), f"metadata entry {i}")
    for i in range(tensors):
        r.string(f"tensor {i}'s name", MAX_NAME)
        dims = r.u32(f"tensor {i}")
        if not 0 < dims <= MAX_DIMS:
            raise ModelError(f"{what}: tensor {i} has {dims} dimensions (at most {MAX_DIMS})")
        r.take(8 * dims + 4 + 8, f"tensor {i}'s shape, type and offset")


__all__ = ["walk"]
