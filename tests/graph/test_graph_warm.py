"""The daemon's warm graph state (``llmc.graph.warm``): updates that reuse the previous
update's facts and resolution from memory build the same graph as a full build, read
neither cache file, and fall back to the files as soon as another writer replaced them."""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest
from graph_helpers import filler_factory
from test_graph_build import _Project

import llmc.graph.build as build
from llmc.graph import update_graph, warm
from llmc.graph.model import FACTS_FILE, GRAPH_FILE

filler = pytest.fixture(name="filler")(filler_factory)


@pytest.fixture
def warm_on():
    warm.enable()
    try:
        yield
    finally:
        warm.enable(False)


@pytest.fixture
def disk_reads(monkeypatch):
    """How many times an update read the facts cache from disk."""
    reads = []
    real = build.facts_cache.load

    def counting(path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(build.facts_cache, "load", counting)
    return reads


def _body(root):
    data = json.loads((root / ".llmc" / GRAPH_FILE).read_text())
    return data["nodes"], data["edges"], data["graph"]["span_nodes"]


def _full_build_elsewhere(root, f, tmp_path):
    """A full build from the same store into a copy of the sources: the warm state and the
    files it stamped stay untouched."""
    other = tmp_path / "scratch"
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(root, other, ignore=shutil.ignore_patterns(".llmc"))
    stats = update_graph(other, f.store, sorted(f.store.files()), [], f.store.generation)
    assert stats.rebuilt
    return _body(other)


def _start(tmp_path, filler, seed):
    rng = random.Random(seed)
    root = tmp_path / f"rand{seed}"
    root.mkdir()
    project = _Project(root, rng)
    project.write()
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    return root, project, f


def _edit(root, project, f):
    what = project.edit()
    changed, removed = project.write()
    f.remove(removed)
    put = f.put([p for p in changed if (root / p).read_text(encoding="utf-8").strip()])
    return what, update_graph(root, f.store, put, removed, f.bump())


@pytest.mark.parametrize("seed", [1, 2])
def test_warm_updates_equal_a_full_build_and_read_no_cache(
    tmp_path, filler, warm_on, disk_reads, seed
):
    root, project, f = _start(tmp_path, filler, seed)
    assert len(disk_reads) == 1  # the first update finds no state in memory
    partial = 0
    for step in range(10):
        what, stats = _edit(root, project, f)
        assert _body(root) == _full_build_elsewhere(root, f, tmp_path), f"step {step}: {what}"
        partial += 0 < stats.files_resolved < stats.files
    own = [p for p in disk_reads if p.parent.parent == root]
    assert len(own) == 1  # every later update took the state this process kept
    assert partial


def test_another_writer_makes_the_next_update_read_the_files(tmp_path, filler, warm_on, disk_reads):
    root, project, f = _start(tmp_path, filler, 3)
    llmc = root / ".llmc"
    _edit(root, project, f)
    older = {name: (llmc / name).read_bytes() for name in (GRAPH_FILE, FACTS_FILE)}
    _edit(root, project, f)
    own_reads = len([p for p in disk_reads if p.parent.parent == root])
    # Another process writes both files (here: puts back an older, consistent pair).
    for name, data in older.items():
        tmp = llmc / f"{name}.other"
        tmp.write_bytes(data)
        os.replace(tmp, llmc / name)
    what, _ = _edit(root, project, f)
    assert len([p for p in disk_reads if p.parent.parent == root]) == own_reads + 1
    assert _body(root) == _full_build_elsewhere(root, f, tmp_path), what
    what, _ = _edit(root, project, f)  # and warm again after that
    assert len([p for p in disk_reads if p.parent.parent == root]) == own_reads + 1
    assert _body(root) == _full_build_elsewhere(root, f, tmp_path), what


def test_off_by_default_nothing_is_kept(tmp_path, filler, disk_reads):
    assert not warm.enabled()
    root, project, f = _start(tmp_path, filler, 4)
    _edit(root, project, f)
    _edit(root, project, f)
    assert len([p for p in disk_reads if p.parent.parent == root]) == 3


def test_past_warm_max_files_nothing_is_kept_and_the_graph_is_the_same(
    tmp_path, filler, warm_on, disk_reads
):
    """A repository with more files than ``graph.warm_max_files``: each update runs as a
    one-shot one (its state is not kept, the next one reads the cache again), in bounded
    memory, and builds the same graph; the suspension ends with the update."""
    from llmc.config import GraphConfig

    few = GraphConfig(warm_max_files=3)
    root = tmp_path / "big"
    root.mkdir()
    project = _Project(root, random.Random(5))
    project.write()
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump(), few)
    here = warm._key(root / ".llmc")
    assert len(f.store.files()) > 3 and here not in warm._kept
    for step in range(3):
        what = project.edit()
        changed, removed = project.write()
        f.remove(removed)
        put = f.put([p for p in changed if (root / p).read_text(encoding="utf-8").strip()])
        update_graph(root, f.store, put, removed, f.bump(), few)
        assert _body(root) == _full_build_elsewhere(root, f, tmp_path), f"step {step}: {what}"
        assert here not in warm._kept and warm.enabled()
    assert len([p for p in disk_reads if p.parent.parent == root]) == 4
    _edit(root, project, f)  # under the default limit: kept again
    assert here in warm._kept
