"""Keep a long embedding run's memory flat without paying a page fault per activation.

glibc raises its mmap threshold each time a large mmapped block is freed (up to 32 MiB), so
after the first batches torch's activation tensors come from the brk heap instead. A
backfill embeds batches of ever-changing sequence length (the work list is sorted by
length), every batch's tensors are a new size, and the freed holes were neither reused nor
returned: on Django's sdist one `llmc index` process grew to 3.9 GB.

The first fix made every block over 64 KiB an mmap of its own, returned on free. That kept
memory flat, but every activation was then a fresh mapping, faulted in page by page: on
the 2-core AMD EPYC (torch bf16, batch 64) a quarter of the embedding time went to the
kernel (9.8 M page faults and 22 s of system time for 2,000 spans, 34 spans/s).

Now the threshold is fixed at glibc's own ceiling (32 MiB, so batches of the default size
live on the heap and reuse its memory while a call runs), and ``release_free_heap`` hands
the heap's free pages back to the kernel after each ``embed_passages`` call (glibc's
``malloc_trim``: whole free pages anywhere in every arena, not only at the top). Same
2,000 spans, batch 32: 50.6 spans/s, 0.24 M page faults, 1.1 s of system time; the
process's peak stayed within the old bound (benchmarks/README.md, "Embedding memory").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
# Free memory kept at the heap's top between explicit trims: glibc's own dynamic rule (twice
# the mmap threshold). At the default 128 KiB each batch's activations went back on free and
# were faulted in again by the next batch.
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


@functools.cache
def _libc():
    """glibc with ``mallopt`` and ``malloc_trim``, or None (not Linux, musl, no libc)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):  # musl has neither
        return None
    return libc


@functools.cache
def bound_heap_growth() -> bool:
    """Fix glibc's mmap and trim thresholds once per process (before the first tensor);
    False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    ok = bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)) and ok
    log.debug(
        "malloc mmap threshold %d, trim threshold %d: %s",
        MMAP_THRESHOLD_BYTES,
        TRIM_THRESHOLD_BYTES,
        ok,
    )
    return ok


def release_free_heap() -> bool:
    """Return the heap's free pages to the kernel (a few ms); True when any went back."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


__all__ = ["bound_heap_growth", "release_free_heap"]
