"""Waiting for conditions without asserting how fast anything is.

No test in this suite asserts a wall-clock time, a throughput or a latency (those live in
``benchmarks/``): CPUs differ between machines and CI boxes are busy. What a test may do is
wait for a condition with a generous deadline, or check that a call *returns at all*
(a liveness check against a hang), with a deadline far above any honest run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Long enough that only a hang reaches it, on any machine this suite runs on.
HANG_S = 120.0


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``cond`` until it is truthy; fail after ``timeout`` seconds, naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


def returns(fn: Callable[[], T], what: str, deadline_s: float = HANG_S) -> T:
    """``fn()``'s value, or its exception; an AssertionError if it has not returned by
    ``deadline_s`` (it hangs). A liveness check, not a speed check: pair it with an input
    that makes a hang last far longer than the deadline."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box["error"] = e

    worker = threading.Thread(target=run, name=f"returns:{what}", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        raise AssertionError(f"{what} did not return within {deadline_s:g}s (it hangs)")
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["HANG_S", "returns", "wait_for"]
