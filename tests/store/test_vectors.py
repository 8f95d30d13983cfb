"""The warm vector matrix (llmc/store/vectors.py) against sqlite-vec's own KNN, on a real
store with small hand-made vectors, written by one connection and read by another."""

from __future__ import annotations

import numpy as np
import pytest

from llmc.store import vectors as vectors_module
from llmc.store.db import Store, VectorSpace
from llmc.store.vectors import VectorMatrix
from llmc.types import CODE, Span

DIM = 8
SPACE = VectorSpace("test-model", DIM)


def span(path: str, i: int) -> Span:
    return Span(path, "python", CODE, "function", f"f{i}", f"f{i}", i, i, f"def f{i}(): ...", "")


def write(store: Store, path: str, vecs: list[np.ndarray]) -> list[int]:
    spans = [span(path, i + 1) for i in range(len(vecs))]
    return store.replace_file(path, "python", CODE, 1, 1, path, spans, vecs, 1)


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def stores(tmp_path):
    writer = Store(tmp_path / "index.db")
    writer.ensure_vector_space(CODE, SPACE)
    reader = Store(tmp_path / "index.db", readonly=True)
    yield writer, reader
    reader.close()
    writer.close()


def test_same_neighbours_and_scores_as_sqlite_vec(stores) -> None:
    writer, reader = stores
    rng = np.random.default_rng(7)
    for f in range(5):
        write(writer, f"m{f}.py", [unit(rng) for _ in range(40)])
    matrix = VectorMatrix(CODE)
    matrix.sync(reader)
    assert len(matrix) == 200
    for _ in range(20):
        q = unit(rng)
        for k in (1, 10, 200, 500):
            want = reader.knn(CODE, q, k)
            got = matrix.knn(q, k)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)


def test_equal_scores_keep_span_id_order(stores) -> None:
    writer, reader = stores
    v = unit(np.random.default_rng(1))
    ids = write(writer, "same.py", [v, -v, v, v, -v])
    matrix = VectorMatrix(CODE)
    matrix.sync(reader)
    assert [i for i, _ in matrix.knn(v, 2)] == [ids[0], ids[2]]
    assert [i for i, _ in matrix.knn(v, 5)] == [ids[0], ids[2], ids[3], ids[1], ids[4]]


def test_follows_commits_of_another_connection(stores) -> None:
    writer, reader = stores
    rng = np.random.default_rng(3)
    write(writer, "a.py", [unit(rng) for _ in range(10)])
    old = write(writer, "b.py", [unit(rng) for _ in range(10)])
    matrix = VectorMatrix(CODE)
    matrix.sync(reader)
    assert len(matrix) == 20

    target = unit(rng)
    new = write(writer, "b.py", [target, unit(rng)])  # b.py edited: new span ids
    writer.remove_files(["a.py"])
    matrix.sync(reader)
    assert len(matrix) == 2
    assert set(matrix.ids.tolist()) == set(new)
    assert not set(old) & set(matrix.ids.tolist())
    assert matrix.knn(target, 1)[0][0] == new[0]
    assert [i for i, _ in matrix.knn(target, 5)] == [i for i, _ in reader.knn(CODE, target, 5)]


def test_another_model_reloads_everything(stores) -> None:
    writer, reader = stores
    rng = np.random.default_rng(5)
    write(writer, "a.py", [unit(rng) for _ in range(4)])
    matrix = VectorMatrix(CODE)
    matrix.sync(reader)
    writer.ensure_vector_space(CODE, VectorSpace("other-model", 4))  # drops the vectors
    matrix.sync(reader)
    assert len(matrix) == 0
    assert matrix.knn(unit(rng)[:4], 3) == []
    ids = write(writer, "a.py", [np.array([1, 0, 0, 0], dtype=np.float32)])
    matrix.sync(reader)
    assert matrix.knn(np.array([1, 0, 0, 0], dtype=np.float32), 3) == [(ids[0], 1.0)]


def test_unknown_layout_reads_through_the_virtual_table(stores, monkeypatch) -> None:
    writer, reader = stores
    rng = np.random.default_rng(9)
    write(writer, "a.py", [unit(rng) for _ in range(30)])
    fast = VectorMatrix(CODE)
    fast.sync(reader)
    monkeypatch.setattr(vectors_module, "_KNOWN_LAYOUT", (99, 0))
    slow = VectorMatrix(CODE)
    slow.sync(reader)
    assert slow.places is None
    assert np.array_equal(slow.ids, fast.ids)
    assert np.array_equal(slow.matrix, fast.matrix)
    write(writer, "b.py", [unit(rng) for _ in range(2)])  # a few new: looked up by id
    slow.sync(reader)
    monkeypatch.undo()
    fast.sync(reader)
    assert len(slow) == 32
    assert np.array_equal(slow.ids, fast.ids)
    assert np.array_equal(slow.matrix, fast.matrix)


def test_no_vector_table_finds_nothing(tmp_path) -> None:
    Store(tmp_path / "index.db").close()
    reader = Store(tmp_path / "index.db", readonly=True)
    matrix = VectorMatrix(CODE)
    matrix.sync(reader)
    assert matrix.knn(np.ones(DIM, dtype=np.float32), 5) == []
    reader.close()
