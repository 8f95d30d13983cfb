"""The graph tests run as a new `llmc index` process would: no graph state kept in memory.

An in-process daemon (tests/daemon's Engine) turns ``warm`` on for the whole process;
without this, every graph test after it would run the daemon's kept-state path instead of
the one it means to test (and which ones did would depend on the order the suite ran in).
Tests of the kept path turn it on themselves."""

from __future__ import annotations

import pytest

from llmc.graph import warm


@pytest.fixture(autouse=True)
def _no_kept_graph_state():
    was = warm.enabled()
    warm.enable(False)
    yield
    warm.enable(was)
