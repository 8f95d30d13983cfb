"""The graph update started before the index run's spans are committed (llmc.graph.early)."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from graph_helpers import copy_project, filler_factory

from llmc.graph import update_graph
from llmc.graph.early import CommitGate, update_graph_early, wait_for_commit
from llmc.graph.model import FACTS_FILE, GRAPH_FILE

filler = pytest.fixture(name="filler")(filler_factory)


def _body(root):
    data = json.loads((root / ".llmc" / GRAPH_FILE).read_text())
    return data["nodes"], data["edges"], data["graph"]["span_nodes"]


def _stored(tmp_path, filler):
    """pyshop in a store, committed; no graph yet."""
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    changed = f.put()
    return root, f, changed, f.bump()


def _early(root, records, changed, generation, committed: bool):
    """``update_graph_early`` in a thread behind a gate this test opens once the update
    had time to reach it; its result or error, and whether it waited."""
    gate = CommitGate(root / ".llmc" / "graph.gate")
    out: dict = {}

    def run() -> None:
        try:
            out["stats"] = update_graph_early(
                root, records, changed, [], generation, None, {}, (gate.path, gate.token)
            )
        except Exception as e:  # noqa: BLE001 - asserted by the caller
            out["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(0.3)
    out["waited"] = worker.is_alive()  # held at the gate, having written nothing
    out["graph_before_open"] = (root / ".llmc" / GRAPH_FILE).exists()
    gate.open(committed)
    worker.join(60)
    assert not worker.is_alive()
    from llmc.graph.early import _join_background

    _join_background()  # the facts cache, written after the graph
    return out


def test_a_waiter_passes_the_gate_when_it_opens_and_learns_whether_the_run_committed(tmp_path):
    gate = CommitGate(tmp_path / "graph.gate")
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(wait_for_commit(gate.path, gate.token)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and got == []
    gate.open(True)
    waiter.join(10)
    assert got == [True]
    failed = CommitGate(tmp_path / "graph.gate")
    failed.open(False)
    failed.open(True)  # only the first call counts
    assert wait_for_commit(failed.path, failed.token) is False
    assert wait_for_commit(gate.path, gate.token) is False  # an earlier run's token


def test_an_early_update_waits_for_the_commit_and_equals_one_after_it(tmp_path, filler):
    root, f, changed, gen = _stored(tmp_path, filler)
    out = _early(root, f.store.files(), changed, gen, committed=True)
    assert out["waited"] and not out["graph_before_open"]
    assert out["stats"].files == len(changed) and out["stats"].rebuilt
    early = _body(root)
    assert (root / ".llmc" / FACTS_FILE).exists()
    for name in (GRAPH_FILE, FACTS_FILE):
        (root / ".llmc" / name).unlink()
    update_graph(root, f.store, changed, [], gen)
    assert early == _body(root)


def test_a_run_that_did_not_commit_gets_no_graph(tmp_path, filler):
    root, f, changed, gen = _stored(tmp_path, filler)
    out = _early(root, f.store.files(), changed, gen, committed=False)
    assert out == {"stats": None, "waited": True, "graph_before_open": False}
    assert not (root / ".llmc" / GRAPH_FILE).exists()
    assert not (root / ".llmc" / FACTS_FILE).exists()


def test_records_that_differ_from_the_committed_store_mean_updating_from_the_store(
    tmp_path, filler
):
    root, f, changed, gen = _stored(tmp_path, filler)
    records = dict(f.store.files())
    first = changed[0]
    records[first] = dataclasses.replace(records[first], content_hash="not what was written")
    del records[changed[1]]
    out = _early(root, records, changed, gen, committed=True)
    assert out["stats"].files == len(changed)
    early = _body(root)
    for name in (GRAPH_FILE, FACTS_FILE):
        (root / ".llmc" / name).unlink()
    update_graph(root, f.store, changed, [], gen)
    assert early == _body(root)


def test_an_index_run_whose_writes_fail_leaves_no_graph_and_no_waiting_worker(
    tmp_path, monkeypatch
):
    """With worker processes the graph update starts before the writes; a write that
    fails opens its gate without committing, so the worker writes nothing and the run
    ends with the write's error (it does not wait on the worker forever)."""
    import llmc.index.chunk.pool as chunk_pool
    import llmc.index.indexer as indexer_module
    from llmc.config import load_config
    from llmc.index.indexer import Indexer
    from llmc.store.db import Store

    root = copy_project(tmp_path, "pyshop")
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(indexer_module, "GRAPH_BESIDE_MIN_FILES", 1)  # a small project
    real_init = chunk_pool.ChunkPool.__init__

    def two_workers(self, files_expected, *args, **kwargs):
        real_init(self, files_expected, *args, **kwargs)
        self.workers, self.parallel = 2, files_expected > 1

    monkeypatch.setattr(chunk_pool.ChunkPool, "__init__", two_workers)
    started: list[bool] = []
    import llmc.graph.early as early

    real_start = early.start

    def spy(*args):
        got = real_start(*args)
        started.append(got is not None)
        return got

    monkeypatch.setattr(early, "start", spy)

    def broken(self, paths):
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(Store, "remove_files", broken)
    out: dict = {}

    def index() -> None:
        try:
            Indexer(root, load_config(root)).run(vectors=False)
        except Exception as e:  # noqa: BLE001 - asserted below
            out["error"] = e

    runner = threading.Thread(target=index)
    runner.start()
    runner.join(120)
    assert not runner.is_alive()
    assert started == [True]  # a worker was updating the graph
    assert "the disk went away" in str(out.get("error"))
    assert not (root / ".llmc" / GRAPH_FILE).exists()
    assert not (root / ".llmc" / FACTS_FILE).exists()


def test_the_pending_store_reads_the_committed_store_only_when_its_files_match(tmp_path, filler):
    """Past the gate, the committed store's files (path, language, category, content
    hash, in any order) must be the records the update started from, else it updates
    from the store (``RecordsDiffer``)."""
    from llmc.graph.early import PendingStore, RecordsDiffer

    root, f, changed, _ = _stored(tmp_path, filler)
    f.store.make_durable()
    records = f.store.files()
    gate = CommitGate(root / ".llmc" / "graph.gate")
    gate.open(True)
    same = PendingStore(root, dict(reversed(list(records.items()))), gate.path, gate.token)
    assert same.files() == records  # kept encoded, read back whole
    assert same.conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0] > 0
    same.close()
    for change in ({"lang": "cobol"}, {"category": "neither"}, {"content_hash": "0" * 64}):
        other = dict(records)
        other[changed[0]] = dataclasses.replace(records[changed[0]], **change)
        pending = PendingStore(root, other, gate.path, gate.token)
        with pytest.raises(RecordsDiffer):
            pending.conn  # noqa: B018 - reading it is the check
        pending.close()
    fewer = dict(records)
    del fewer[changed[1]]
    with pytest.raises(RecordsDiffer):
        PendingStore(root, fewer, gate.path, gate.token).conn  # noqa: B018
