"""The vector space's id carries the truncation: vectors of one model cut at 128 and at 256
tokens are not interchangeable, so changing ``embedding.max_seq_length`` re-embeds every span
(and the embedding cache never hands back vectors cut at the other length)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmc.cli import main
from llmc.models.embedder import vector_space_id
from llmc.paths import db_path
from llmc.store.db import Store


def _index(root: Path, max_seq_length: int | None = None) -> dict:
    env = {"LLMC_EMBEDDING__MAX_SEQ_LENGTH": str(max_seq_length)} if max_seq_length else {}
    result = CliRunner().invoke(main, ["index", str(root), "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _space(root: Path, category: str) -> str:
    store = Store(db_path(root), readonly=True)
    try:
        return store.vector_space(category).model_id
    finally:
        store.close()


def test_the_bare_id_means_256_tokens():
    model = "sentence-transformers/all-MiniLM-L6-v2"
    assert vector_space_id(model, 256) == model  # indexes written before keep their vectors
    assert vector_space_id(model, 128) == f"{model}@128tok"
    assert vector_space_id(model, 128) != vector_space_id(model, 64)


def test_changing_the_truncation_reembeds_every_span(sample_repo):
    first = _index(sample_repo)
    before = _space(sample_repo, "code")
    second = _index(sample_repo, max_seq_length=64)
    assert second["model_changed"]
    assert _space(sample_repo, "code") == vector_space_id(before, 64) != before
    assert second["embedded"] == first["embedded"] > 0 and second["embed_cached"] == 0
    # back to the first length: a new space again, nothing mixed from the 64-token vectors
    third = _index(sample_repo)
    assert third["model_changed"] and _space(sample_repo, "code") == before


def test_one_embedders_truncation_does_not_leak_into_another():
    """The loaded model is shared by every embedder of one source in a process; an embedder
    cut at 64 tokens once left it at 64 for every embedder after it."""
    import numpy as np

    from llmc.models.embedder import SentenceTransformerEmbedder

    long_text = " ".join(f"word{i} is followed by another distinct token" for i in range(80))
    full = SentenceTransformerEmbedder(runtime="torch", device="cpu", max_seq_length=256)
    before = full.embed_passages([long_text])
    short = SentenceTransformerEmbedder(runtime="torch", device="cpu", max_seq_length=64)
    cut = short.embed_passages([long_text])
    after = full.embed_passages([long_text])
    assert float(before[0] @ cut[0]) < 0.99  # the two lengths see different texts
    np.testing.assert_allclose(after, before, atol=1e-6)
