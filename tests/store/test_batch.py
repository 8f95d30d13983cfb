"""``Store.batch``: several files' swaps in one transaction, all or none."""

from __future__ import annotations

import pytest

from llmc.store.db import Store
from llmc.types import Span


def _spans(path: str, n: int = 2) -> list[Span]:
    return [
        Span(path, "python", "code", "function", f"f{j}", f"f{j}", j * 3 + 1, j * 3 + 2,
             f"def f{j}():\n    return {j}\n", "")
        for j in range(n)
    ]  # fmt: skip


def _store(tmp_path) -> Store:
    state = tmp_path / ".llmc"
    state.mkdir(mode=0o700)
    return Store(state / "index.db")


def _replace(store: Store, path: str) -> list[int]:
    spans = _spans(path)
    return store.replace_file(path, "python", "code", 10, 1, "h", spans, [None] * len(spans), 1)


def test_a_batch_commits_its_files_together(tmp_path):
    store = _store(tmp_path)
    with store.batch():
        with store.batch():  # nested: the outer one commits
            _replace(store, "a.py")
        _replace(store, "b.py")
    reader = Store(tmp_path / ".llmc" / "index.db", readonly=True)
    assert set(reader.files()) == {"a.py", "b.py"}
    assert [s.span.symbol for s in reader.spans_for_path("b.py")] == ["f0", "f1"]


def test_a_batch_that_fails_leaves_every_file_as_it_was(tmp_path):
    store = _store(tmp_path)
    _replace(store, "a.py")
    with pytest.raises(RuntimeError), store.batch():
        _replace(store, "a.py")  # would swap a.py's spans ...
        _replace(store, "b.py")
        raise RuntimeError("disk full")  # ... but the batch never commits
    assert set(store.files()) == {"a.py"}
    assert len(store.spans_for_path("a.py")) == 2
    _replace(store, "c.py")  # outside a batch, a swap commits on its own again
    assert set(Store(tmp_path / ".llmc" / "index.db", readonly=True).files()) == {"a.py", "c.py"}
