"""The chunk workers take the next batch while the indexer writes the last one
(``ChunkPool.submit``, ``parse_files.BATCHES_AHEAD``), and the graph update runs in a
process of its own once the chunk workers have ended (``ChunkPool.beside``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

from index_checks import index_killing_the_worker_on
from repo_fixtures import make_repo

import llmc.index.chunk.pool as chunk_pool
import llmc.index.parse_files as parse_files
from llmc.config import IndexConfig, load_config
from llmc.index.chunk.pool import ChunkPool, chunk_one
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
        # the job's process ends after its one job (max_tasks_per_child=1) and its
        # executor may start a fresh one in its place: never a chunk worker, never two
        children = {p.pid for p in multiprocessing.active_children()}
        assert not children & chunkers and len(children) <= 1
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
    outcome, killed = index_killing_the_worker_on(root, "big.py")
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


MIXED = {
    "shop/models.py": '"""Models."""\n\n\nclass Cart:\n    def total(self, items):\n'
    "        return sum(price(i) for i in items)\n\n\ndef price(item):\n    return item.cost\n",
    "shop/views.py": "from shop.models import Cart\n\n\ndef checkout(items):\n"
    "    cart = Cart()\n    return cart.total(items)\n",
    "shop/broken.py": "def broken(:\n    return 1\n",
    "native.c": "int add(int a, int b) { return a + b; }\nint twice(int a) { return add(a, a); }\n",
    "web/app.js": "function start() { return helper(); }\nfunction helper() { return 1; }\n",
    "README.md": "# Shop\n\nCall `checkout` in `shop/views.py`; `Cart.total` sums.\n",
}


class _Phases:
    def __init__(self):
        self.phases: list[tuple[str, int | None]] = []

    def phase(self, name, total):
        self.phases.append((name, total))

    def advance(self, n=1):
        pass

    def note(self, message):
        pass


def _graph_and_spans(root):
    data = json.loads((root / ".llmc" / "rag_graph.json").read_text())
    store = Store(db_path(root), readonly=True)
    try:
        spans = sorted(
            (s.span.path, s.span.start_line, s.span.kind, s.span.text) for s in store.iter_spans()
        )
    finally:
        store.close()
    return data["nodes"], data["edges"], data["graph"]["span_nodes"], spans


def test_graph_facts_left_for_after_the_commit_make_the_same_graph(tmp_path, monkeypatch):
    """A large run's workers leave the graph facts out of the parse; once the index is
    searchable they extract them from the files read again: the same spans and the same
    graph as facts made in the parse, here in one process, after an edit too."""
    here = make_repo(tmp_path / "here", MIXED)
    Indexer(here, load_config(here)).run(vectors=False)
    later = make_repo(tmp_path / "later", MIXED)
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(parse_files, "FACTS_LATER_MIN_FILES", 2)
    real_init = ChunkPool.__init__

    def two_workers(self, files_expected, *args, **kwargs):
        real_init(self, files_expected, *args, **kwargs)
        self.workers, self.parallel = 2, files_expected > 1

    monkeypatch.setattr(ChunkPool, "__init__", two_workers)
    extracted: list[list[str]] = []  # the files the facts pass gave facts
    real_after = Indexer._facts_after

    def facts_after(self, *args):
        facts = real_after(self, *args)
        extracted.append(sorted(facts))
        return facts

    monkeypatch.setattr(Indexer, "_facts_after", facts_after)
    seen = _Phases()
    report = Indexer(later, load_config(later), progress=seen).run(vectors=False)
    assert extracted == [sorted(MIXED)]  # every file's facts, from the workers
    assert report.files_indexed == len(MIXED)
    assert ("graph", len(MIXED)) in seen.phases  # the facts came after the parse
    assert seen.phases.index(("graph", len(MIXED))) > seen.phases.index(("parsing", len(MIXED)))
    assert _graph_and_spans(later) == _graph_and_spans(here)
    assert not (later / ".llmc" / "graph_facts.spool").exists()

    edit = {"shop/views.py": MIXED["shop/views.py"] + "\n\ndef refund(items):\n    return price(items[0])\n",
            "web/app.js": "function start() { return 2; }\n"}  # fmt: skip
    for root in (here, later):
        for rel, text in edit.items():
            path = root / rel
            path.write_text(text)
            os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    monkeypatch.setattr(parse_files, "FACTS_LATER_MIN_FILES", 1)
    Indexer(later, load_config(later)).run(vectors=False)
    assert extracted[1] == sorted(edit)
    monkeypatch.undo()
    Indexer(here, load_config(here)).run(vectors=False)
    assert _graph_and_spans(later) == _graph_and_spans(here)
