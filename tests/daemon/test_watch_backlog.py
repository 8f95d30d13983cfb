"""A daemon run on an index whose vectors are far from complete updates its graph before
the backfill (which embeds every missing span, not only the edit's), so the graph is not
held back by minutes of embedding; both end up current."""

from __future__ import annotations

from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.config import load_config
from llmc.daemon import engine as engine_mod
from llmc.daemon.engine import Engine
from llmc.index.indexer import Indexer
from llmc.index.status import graph_generation
from llmc.paths import db_path
from llmc.store.db import Store


def test_with_a_backlog_the_graph_comes_first_and_the_vectors_after(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    cfg = load_config(root)
    assert Indexer(root, cfg).run(vectors=False).vectors.missing > 0  # never embedded
    monkeypatch.setattr(engine_mod, "GRAPH_FIRST_BACKLOG", 0)
    assert engine_mod.backlog(root) > 0
    with (root / "app/store.py").open("a") as f:
        f.write("\n\ndef purge_expired_sessions(store):\n    return store\n")
    engine = Engine(root, cfg)
    try:
        out = engine.reindex("test", ["app/store.py"], wait=600)
    finally:
        engine.close()
    assert out["done"] and out["error"] is None, out
    summary = out["summary"]
    assert summary["files_indexed"] == 1 and summary["backfill"] == "done"
    assert summary["vectors"]["complete"] and summary["timings"]["graph"] >= 0
    store = Store(db_path(root), readonly=True)
    try:
        assert graph_generation(root) == store.generation
    finally:
        store.close()
    assert engine_mod.backlog(root) == 0
    assert "purge_expired_sessions" in (root / ".llmc" / "rag_graph.json").read_text()
