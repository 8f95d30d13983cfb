"""The derived indexes after an index run: the graph beside the lexical update in a chunk
worker, else here."""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest

from llmc.config import GraphConfig, IndexConfig
from llmc.graph import load_graph
from llmc.index import derived
from llmc.index.chunk import chunk_file
from llmc.paths import db_path
from llmc.store.db import Store
from llmc.types import text_hash

FILES = {
    "shop/util.py": "def note(x):\n    return x\n",
    "shop/service.py": "from shop.util import note\n\ndef place():\n    return note(1)\n",
}


@pytest.fixture
def pyshop_store(tmp_path):
    """A store holding two Python files, spans from the real chunker, no graph yet."""
    root = tmp_path / "repo"
    store = Store(db_path(root))
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        spans = chunk_file(rel, text, "python", "code", IndexConfig())
        st = (root / rel).stat()
        store.replace_file(
            rel, "python", "code", st.st_size, st.st_mtime_ns, text_hash(text), spans,
            [None] * len(spans), 1,
        )  # fmt: skip
    store.bump_generation()
    yield root, store, sorted(FILES)
    store.close()


def test_no_workers_means_no_update_beside():
    from llmc.graph import early

    assert early.start(None, None, GraphConfig(), {}, [], [], 1, {}) is None


def test_a_worker_that_died_leaves_the_update_to_this_process(pyshop_store):
    root, store, changed = pyshop_store
    died: Future = Future()
    died.set_exception(BrokenProcessPool("a worker died"))
    derived.finish_graph(root, GraphConfig(), store, changed, [], None, died)
    assert "shop/util.py::note" in load_graph(root)


def test_an_update_that_failed_beside_raises_here(pyshop_store):
    root, store, changed = pyshop_store
    failed: Future = Future()
    failed.set_exception(ValueError("bad facts"))
    with pytest.raises(ValueError, match="bad facts"):
        derived.finish_graph(root, GraphConfig(), store, changed, [], None, failed)
