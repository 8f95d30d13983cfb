"""Thread limits for query work: on few cores, BLAS and torch thread pools fight.

A query embeds one short text and multiplies a few small matrices; extra threads only
add wake-up and contention costs. ``query_threads`` caps BLAS (via threadpoolctl) and,
when asked, torch, for the duration of a query, and restores them afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

log = logging.getLogger(__name__)


class ThreadLimiter:
    """Created once per Searcher: threadpoolctl's library scan is paid once, not per query."""

    def __init__(self, blas_threads: int = 1, torch_threads: int = 0):
        self.blas_threads = blas_threads
        self.torch_threads = torch_threads
        self._controller = None
        self._scanned = False

    def _blas(self):
        if not self._scanned:
            self._scanned = True
            try:
                from threadpoolctl import ThreadpoolController

                self._controller = ThreadpoolController()
            except Exception as e:  # noqa: BLE001 - a missing limiter only costs speed
                log.debug("threadpoolctl unavailable: %s", e)
        return self._controller

    def rescan(self) -> None:
        """Look for thread pools again (after torch or numpy loaded a new BLAS)."""
        self._scanned = False

    @contextlib.contextmanager
    def blas(self) -> Iterator[None]:
        """Cap BLAS threads (numpy, and torch's BLAS) for the duration of a query."""
        controller = self._blas() if self.blas_threads > 0 else None
        if controller is None:
            yield
            return
        with controller.limit(limits=self.blas_threads, user_api="blas"):
            yield

    @contextlib.contextmanager
    def torch(self) -> Iterator[None]:
        """Cap torch's intra-op threads while a query is embedded (torch must be loaded)."""
        if self.torch_threads <= 0 or "torch" not in sys.modules:
            yield
            return
        import torch

        before = torch.get_num_threads()
        if before == self.torch_threads:
            yield
            return
        torch.set_num_threads(self.torch_threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)


__all__ = ["ThreadLimiter"]
