"""The embedder trainer's data and loop: what it reads, what it changes, what it keeps."""

from __future__ import annotations

import random

import pytest

from lab.train.embedder import FROZEN, FitOptions, batches_without_duplicates, fit, parse_grid
from lab.train.embedder_data import training_header
from llmc.config import IndexConfig
from llmc.index.chunk import chunk_file

SOURCE = '''
class Store:
    def compact(self, keep: int) -> int:
        """Drop every generation older than the last ``keep`` ones.

        Returns how many were dropped.
        """
        old = self.generations[:-keep]
        for g in old:
            self.drop(g)
        return len(old)
'''

DOC = "# Storage\n\n## Compacting generations\n\nOld generations are dropped by compact.\n"


def test_training_headers_hold_no_docstring_and_no_title():
    spans = chunk_file("pkg/store.py", SOURCE, "python", "code", IndexConfig())
    method = next(s for s in spans if s.qualname == "Store.compact")
    assert "Drop every generation" in method.header  # the index header has it ...
    header = training_header(method)
    assert "Drop every generation" not in header  # ... the training pair's does not
    assert header.splitlines()[0] == "pkg/store.py"
    assert any("def compact" in line for line in header.splitlines())
    section = next(
        s
        for s in chunk_file("docs/storage.md", DOC, "markdown", "doc", IndexConfig())
        if "Compacting" in s.header
    )
    assert training_header(section) == "docs/storage.md"


def test_batches_never_hold_a_text_twice():
    pairs = [
        {"query": f"q{i}", "positive": f"p{i % 5}", "negative": f"n{i % 7}"} for i in range(40)
    ]
    batches = batches_without_duplicates(pairs, 4, random.Random(1))
    assert batches
    for batch in batches:
        texts = [t for p in batch for t in (p["query"], p["positive"], p["negative"])]
        assert len(texts) == len(set(texts))


def test_grid_spec():
    grid = parse_grid("5e-5:1, 1e-4:3", FitOptions(batch_size=8))
    assert [(g.lr, g.epochs, g.batch_size) for g in grid] == [(5e-5, 1, 8), (1e-4, 3, 8)]


def test_fit_moves_the_layers_and_keeps_the_word_table():
    torch = pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer

    from llmc.models.shipped import base_model_dir

    model = SentenceTransformer(str(base_model_dir()), device="cpu")
    before = {k: v.clone() for k, v in model[0].auto_model.state_dict().items()}
    pairs = [
        {
            "query": f"drop old generation {i}",
            "positive": f"def compact_{i}(): pass",
            "negative": f"x = {i}",
        }
        for i in range(8)
    ]
    stats = fit(model, pairs, FitOptions(lr=1e-3, epochs=1, batch_size=4, max_seq_length=24))
    assert stats["steps"] == 2
    after = model[0].auto_model.state_dict()
    for name in FROZEN:
        assert torch.equal(before[name], after[name])
    moved = [k for k in before if k not in FROZEN and not torch.equal(before[k], after[k])]
    assert any("encoder.layer.0." in k for k in moved)
