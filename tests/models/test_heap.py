"""glibc's heap keeps freed mid-sized blocks after a large free raised its mmap threshold,
which is how a long backfill grew to gigabytes; bound_heap_growth returns them."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
import numpy as np
from llmc.models.heap import bound_heap_growth

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024

if sys.argv[1] == "bounded":
    assert bound_heap_growth()
big = np.ones(16 * 2**20 // 8)  # mmapped; its free raises glibc's dynamic threshold
del big
blocks, pins = [], []
for _ in range(200):  # 200 MiB of 1 MiB activations, each followed by a live object
    blocks.append(np.ones(2**20 // 8))
    pins.append(bytearray(4096))  # over pymalloc's limit: from malloc, between the blocks
before = rss_mb()
del blocks
print(before - rss_mb())
"""


def _returned_mb(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_freed_activations_go_back_to_the_os():
    assert _returned_mb("bounded") > 150
    assert _returned_mb("default") < 50  # what the bound is for: without it they stay
