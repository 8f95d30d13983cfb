"""An index run holds one batch of parsed files at a time: each batch is written (SQLite and
the lexical update) as the chunk workers hand it over, and the result is the same index."""

from __future__ import annotations

import shutil

import orjson
from repo_fixtures import make_repo

import llmc.index.indexer as indexer
import llmc.index.parse_files as parse_files
from llmc.config import load_config
from llmc.index.facts_spool import SPOOL_FILE
from llmc.index.indexer import Indexer
from llmc.paths import db_path, graph_path, lexical_path
from llmc.store.db import Store
from llmc.store.lexical import LexicalIndex
from llmc.types import StoredSpan

FILES = {
    f"pkg/mod{i}.py": f'"""Module {i}."""\n\n\ndef handler_{i}(x):\n    return helper_{i}(x)\n\n\n'
    f"def helper_{i}(x):\n    return x + {i}\n"
    for i in range(7)
} | {"README.md": "# Demo\n\nCall `handler_1` from `pkg/mod1.py`.\n"}


def _index(root):
    return Indexer(root, load_config(root)).run(vectors=False)


def _contents(root):
    store = Store(db_path(root), readonly=True)
    try:
        spans = sorted(
            (s.span.path, s.span.start_line, s.span.end_line, s.span.kind, s.span.symbol)
            for s in store.iter_spans()
        )
    finally:
        store.close()
    lexical = LexicalIndex(lexical_path(root), readonly=True)
    return spans, lexical.num_docs(), len(lexical.search("helper handler", 50))


def _graph(root):
    data = orjson.loads(graph_path(root).read_bytes())
    return data["nodes"], data["edges"], data["graph"]["generation"]


def test_batches_are_written_as_they_are_parsed_and_make_the_same_index(tmp_path, monkeypatch):
    whole = make_repo(tmp_path / "whole", FILES)
    _index(whole)
    small = make_repo(tmp_path / "small", FILES)
    monkeypatch.setattr(parse_files, "CHUNK_BATCH_FILES", 2)
    sizes: list[int] = []
    real = indexer.write_batch

    def spy(store, batch, *args, **kwargs):
        sizes.append(len(batch))
        return real(store, batch, *args, **kwargs)

    monkeypatch.setattr(indexer, "write_batch", spy)
    report = _index(small)
    assert len(sizes) > 1 and max(sizes) <= 2, sizes
    assert sum(sizes) == report.files_indexed == len(FILES)
    assert _contents(small) == _contents(whole)
    assert _graph(small) == _graph(whole)
    assert not (small / ".llmc" / SPOOL_FILE).exists()  # removed once the graph has it

    (small / "pkg/mod3.py").write_text("def replaced():\n    return 3\n")
    (small / "pkg/mod4.py").unlink()
    shutil.copy(small / "pkg/mod3.py", whole / "pkg/mod3.py")
    (whole / "pkg/mod4.py").unlink()
    _index(small)
    monkeypatch.undo()
    _index(whole)
    assert _contents(small) == _contents(whole)
    assert _graph(small) == _graph(whole)


def test_a_lexical_update_closed_without_commit_changes_nothing(tmp_path):
    root = make_repo(tmp_path / "repo", FILES)
    report = _index(root)
    lexical = LexicalIndex(lexical_path(root))
    before = (lexical.num_docs(), lexical.generation)
    store = Store(db_path(root), readonly=True)
    try:
        spans = list(store.iter_spans())
    finally:
        store.close()
    upd = lexical.begin_update()
    upd.remove(["pkg/mod1.py"])
    upd.add([StoredSpan(10_000 + s.id, s.span) for s in spans])
    upd.close()
    lexical.index.reload()
    assert (lexical.num_docs(), lexical.generation) == before == (len(spans), report.generation)
    lexical.update([], [], report.generation)  # the writer's lock went with the update
