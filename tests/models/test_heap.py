"""glibc keeps freed mid-sized blocks on its heap, which is how a long backfill once grew to
gigabytes; with the thresholds fixed, batches reuse that memory while a call runs and
release_free_heap hands it back after each call (llmc/models/heap.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
import numpy as np
from llmc.models.heap import bound_heap_growth, release_free_heap

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

assert bound_heap_growth()
blocks, pins = [], []
for _ in range(200):  # 200 MiB of 1 MiB activations, each followed by a live object
    blocks.append(np.ones(2**20 // 8))
    pins.append(bytearray(4096))  # over pymalloc's limit: from malloc, between the blocks
before = rss_mb()
del blocks
if sys.argv[1] == "released":
    assert release_free_heap()
print(before - rss_mb())
"""


def _returned_mb(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_activations_go_back_to_the_os_after_a_call():
    assert _returned_mb("released") > 150
    # what the release is for: on the heap (not one mmap each) freed blocks stay mapped
    assert _returned_mb("kept") < 50
