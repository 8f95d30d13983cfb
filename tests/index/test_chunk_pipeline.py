"""The chunk workers take the next batch while the indexer writes the last one
(``ChunkPool.submit``, ``parse_files.BATCHES_AHEAD``), and the graph update runs in a
process of its own once the chunk workers have ended (``ChunkPool.beside``)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from repo_fixtures import make_repo

import llmc.index.chunk_pool as chunk_pool
import llmc.index.parse_files as parse_files
from llmc.config import IndexConfig, load_config
from llmc.index.chunk_pool import ChunkPool, chunk_one
from llmc.index.indexer import Indexer
from llmc.paths import db_path
from llmc.store.db import Store


def _items(prefix: str, n: int) -> list[tuple[str, str, bool]]:
    return [
        (f"{prefix}{i}.py", f"class C{i}:\n    def f(self):\n        return g({i})\n", True)
        for i in range(n)
    ]


def test_batches_in_flight_come_back_in_order_as_this_process_chunks_them():
    cfg = IndexConfig()
    first, second = _items("a", 5), _items("b", 4)
    with ChunkPool(9) as pool:
        pool.workers, pool.parallel = 2, True  # workers even on a one-core machine
        a = pool.submit(first, cfg)
        b = pool.submit(second, cfg)  # both with the workers before either is taken
        got_a, got_b = a.results(), b.results()
        assert pool._executor is not None  # the workers did it (no fallback here)
    want = [chunk_one(rel, text, cfg, fields=True, graph=True) for rel, text, _ in first]
    assert got_a == want
    assert got_b == [chunk_one(rel, text, cfg, fields=True, graph=True) for rel, text, _ in second]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_job_beside_runs_in_its_own_process_and_the_chunk_workers_end():
    cfg = IndexConfig()
    with ChunkPool(20) as pool:
        pool.workers, pool.parallel = 2, True
        pool.warm()  # both workers up (a pool starts them as work comes)
        pool.submit(_items("m", 20), cfg).results()
        chunkers = {p.pid for p in multiprocessing.active_children()}
        assert len(chunkers) == 2
        future = pool.beside(os.getpid)
        assert future is not None
        beside = future.result(timeout=120)
        assert beside not in chunkers and beside != os.getpid()
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in chunkers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in chunkers)  # no idle chunk worker beside the job
        assert {p.pid for p in multiprocessing.active_children()} == {beside}
        # a later batch starts chunk workers again
        again = pool.submit(_items("z", 3), cfg).results()
        assert again == [
            chunk_one(r, t, cfg, fields=True, graph=True) for r, t, _ in _items("z", 3)
        ]


def test_a_worker_killed_with_batches_in_flight_costs_the_run_nothing(tmp_path, monkeypatch):
    """As ``test_a_chunk_worker_killed_mid_file_costs_the_run_nothing``, with batches of two
    files, so other batches are with the workers when one dies: every file is indexed,
    big.py with its grammar, in file order, and no journal entry stays."""
    big = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(24000))
    files = {"big.py": big, **{f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(9)}}
    root = make_repo(tmp_path / "r", files)
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(parse_files, "CHUNK_BATCH_FILES", 2)
    real_init = ChunkPool.__init__

    def two_workers(self, files_expected, *args, **kwargs):
        real_init(self, files_expected, *args, **kwargs)
        self.workers, self.parallel = 2, files_expected > 1

    monkeypatch.setattr(ChunkPool, "__init__", two_workers)
    journal = root / ".llmc" / "chunking"
    outcome: dict = {}

    def index() -> None:
        try:
            outcome["report"] = Indexer(root, load_config(root)).run(vectors=False)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = e

    runner = threading.Thread(target=index)
    runner.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        for entry in journal.glob("*") if journal.is_dir() else ():
            try:
                if entry.read_text() == "big.py" and int(entry.name) != os.getpid():
                    killed = int(entry.name)
                    os.kill(killed, signal.SIGKILL)
                    break
            except (OSError, ValueError):
                continue
        time.sleep(0.002)
    runner.join(300)
    assert killed is not None, "no worker was seen parsing big.py"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["report"].files_indexed == len(files)
    store = Store(db_path(root), readonly=True)
    try:
        spans = list(store.iter_spans())
        ids = [r.path for r in sorted(store.files().values(), key=lambda r: r.id)]
    finally:
        store.close()
    assert sum(1 for s in spans if s.span.path == "big.py" and s.span.kind == "function") > 100
    assert {s.span.path for s in spans} == set(files)
    assert ids == sorted(files)  # written in the walk's order, batch after batch
    assert not [e for e in journal.iterdir() if e.read_text()]
