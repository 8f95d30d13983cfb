"""The daemon's backfill gives way to a waiting edit between embedding batches
(``StopEmbedding``), not after a backfill chunk of hundreds of spans, and loses nothing."""

from __future__ import annotations

import threading

from index_checks import assert_index_consistent
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.config import load_config
from llmc.daemon.reindex import LockedEmbedder
from llmc.index.indexer import Indexer
from llmc.models.embedder import embedder_from_config
from llmc.paths import db_path
from llmc.store.db import Store


def _missing(root) -> int:
    store = Store(db_path(root), readonly=True)
    try:
        return len(store.missing_vectors("code")) + len(store.missing_vectors("doc"))
    finally:
        store.close()


def test_a_stop_between_batches_drops_the_chunk_in_flight_and_the_next_run_resumes(tmp_path):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    cfg = load_config(root)
    assert Indexer(root, cfg).run(vectors=False).vectors.missing > 2
    lock, asked = threading.Lock(), []

    def stop() -> bool:  # a new edit arrives after the first batch
        asked.append(1)
        return len(asked) > 1

    def locked(category: str) -> LockedEmbedder:
        inner = embedder_from_config(cfg.embedding, category)
        return LockedEmbedder(inner, lock, chunk=1, stop=stop)

    missing = _missing(root)
    stopped = Indexer(root, cfg, embedder_factory=locked).backfill()
    assert stopped.backfill == "stopped"
    assert len(asked) == 2  # asked before each batch of one text: gave way at the second
    assert _missing(root) == missing  # the chunk in flight was not written
    assert not lock.locked()

    done = Indexer(root, cfg).backfill()
    assert done.backfill == "done" and done.vectors.complete and _missing(root) == 0
    assert_index_consistent(root)
