"""The ONNX Runtime int8 embedder, with the real packaged model (offline): it matches torch,
is exported once and reused, and every failure falls back to torch with one warning line."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from llmc.config import EmbeddingConfig
from llmc.models import embedder as embedder_mod
from llmc.models import onnx_export, onnx_runtime
from llmc.models.embedder import SentenceTransformerEmbedder, embedder_from_config
from llmc.models.onnx_runtime import (
    QuantPlan,
    cache_dir,
    detect_isa,
    load_onnx_encoder,
    pool,
    quant_plan,
)

TEXTS = [
    "def chunk_file(path, text, lang, category, cfg):\n    lines = split_lines(text)\n"
    "    return _dispatch(ctx, text, lang, category) or _windows(ctx)",
    "class Store:\n    def __init__(self, path):\n        self.db = sqlite3.connect(path)",
    "## Daemon\n\nThe daemon listens on a Unix socket with mode 0600 and answers JSON.",
    "how does the indexer skip unchanged files",
    "tokenizer",
    'impl Display for Span { fn fmt(&self, f: &mut Formatter) -> fmt::Result { write!(f, "{}", self.path) } }',
]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One XDG cache for the module: the first test exports, the others reuse it."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def cache_home(shared_cache, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache))
    return shared_cache


@pytest.fixture(scope="module")
def torch_fp32() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(runtime="torch", device="cpu", precision="fp32")


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _export_dirs(root: Path) -> list[Path]:
    base = root / "llmc" / "onnx"
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def test_onnx_runtime_matches_torch(torch_fp32, caplog):
    onnx = SentenceTransformerEmbedder(runtime="onnx")
    assert onnx.runtime == "onnx-int8"
    assert onnx._model is None and onnx._onnx is not None
    assert onnx.choice.precision == "int8" and onnx.dim == torch_fp32.dim == 384
    assert not _warnings(caplog)
    for got, ref in (
        (onnx.embed_passages(TEXTS), torch_fp32.embed_passages(TEXTS)),
        (onnx.embed_queries(TEXTS[3:5]), torch_fp32.embed_queries(TEXTS[3:5])),
    ):
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert ((got * ref).sum(axis=1) >= 0.99).all()


def test_export_is_cached_with_its_check(cache_home):
    (directory,) = _export_dirs(cache_home)
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["check"]["passed"] is True
    assert meta["check"]["min_cosine"] >= 0.99
    assert meta["plan"]["isa"] == detect_isa()
    assert meta["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert {"torch", "onnxruntime", "export"} <= set(meta["versions"])
    assert (directory / "model.onnx").stat().st_size > 1_000_000
    assert not [p for p in directory.parent.iterdir() if p.name.startswith(".")]  # no temp left


def test_second_embedder_reuses_the_cache(cache_home, monkeypatch):
    def no_export(*a, **k):
        raise AssertionError("exported twice")

    monkeypatch.setattr(onnx_runtime, "export", no_export)
    (directory,) = _export_dirs(cache_home)
    before = (directory / "meta.json").stat().st_mtime_ns
    again = SentenceTransformerEmbedder(runtime="onnx")
    assert again.runtime == "onnx-int8"
    assert again._onnx.directory == directory
    assert (directory / "meta.json").stat().st_mtime_ns == before


def test_torch_runtime_is_honored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    e = SentenceTransformerEmbedder(runtime="torch", device="cpu")
    assert e.runtime == "torch" and e._onnx is None and e._model is not None
    assert not _export_dirs(tmp_path)


def test_batch_size_auto_is_per_device_and_a_set_one_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert EmbeddingConfig().batch_size == 0  # auto
    auto = SentenceTransformerEmbedder(runtime="torch", device="cpu", batch_size=0)
    assert auto.batch_size == embedder_mod.CPU_BATCH
    assert auto.embed_passages(["def f(): pass"] * 3).shape == (3, auto.dim)
    assert SentenceTransformerEmbedder(runtime="torch", device="cpu", batch_size=7).batch_size == 7


def test_runtime_from_config_and_auto(monkeypatch):
    monkeypatch.setattr("llmc.models.device.cpu_has_fast_bf16", lambda: False)
    auto = embedder_from_config(EmbeddingConfig(device="cpu", runtime="auto"), "code")
    assert auto.runtime == "onnx-int8"
    torch_cfg = EmbeddingConfig(device="cpu", runtime="torch")
    assert embedder_from_config(torch_cfg, "doc").runtime == "torch"
    # a configured precision keeps torch under auto; a CPU with native bf16 splits the work
    assert embedder_mod._auto_runtime("cpu", "fp32") == "torch"
    assert embedder_mod._auto_runtime("cpu", "auto") == "onnx"
    monkeypatch.setattr("llmc.models.device.cpu_has_fast_bf16", lambda: True)
    assert embedder_mod._auto_runtime("cpu", "auto") == "split"
    with pytest.raises(Exception, match="unknown embedding runtime"):
        SentenceTransformerEmbedder(runtime="tensorrt")


def test_failed_check_falls_back_to_torch_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(onnx_runtime, "MIN_COSINE", 1.01)  # no int8 vector can pass
    e = SentenceTransformerEmbedder(runtime="onnx")
    assert e.runtime == "torch" and e._model is not None
    (line,) = _warnings(caplog)
    assert "refused" in line and "torch" in line
    (directory,) = _export_dirs(tmp_path)
    assert json.loads((directory / "meta.json").read_text())["check"]["passed"] is False

    # the recorded result is reused: no second export, the same one line
    caplog.clear()
    monkeypatch.setattr(onnx_runtime, "export", lambda *a, **k: pytest.fail("re-exported"))
    assert SentenceTransformerEmbedder(runtime="onnx").runtime == "torch"
    assert len(_warnings(caplog)) == 1


def test_failed_export_falls_back_to_torch(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(*a, **k):
        raise RuntimeError("exporter exploded\nwith a traceback")

    monkeypatch.setattr(onnx_export, "_export_fp32", broken)
    e = SentenceTransformerEmbedder(runtime="onnx")
    assert e.runtime == "torch"
    (line,) = _warnings(caplog)
    assert "exporter exploded" in line and "traceback" not in line
    base = tmp_path / "llmc" / "onnx"
    assert not list(base.iterdir())  # nothing half-written is left behind


def test_corrupt_cache_is_rebuilt(cache_home, tmp_path, monkeypatch, caplog, torch_fp32):
    (good,) = _export_dirs(cache_home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    copy = tmp_path / "llmc" / "onnx" / good.name
    shutil.copytree(good, copy)
    (copy / "model.onnx").write_bytes(b"not an onnx model")
    e = SentenceTransformerEmbedder(runtime="onnx")
    assert e.runtime == "onnx-int8"
    (line,) = _warnings(caplog)
    assert "unreadable" in line and "rebuilding" in line
    assert (copy / "model.onnx").stat().st_size > 1_000_000
    got, ref = e.embed_passages(TEXTS[:2]), torch_fp32.embed_passages(TEXTS[:2])
    assert ((got * ref).sum(axis=1) >= 0.99).all()


def test_incomplete_cache_is_rebuilt_quietly(cache_home, tmp_path, monkeypatch, caplog):
    (good,) = _export_dirs(cache_home)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    copy = tmp_path / "llmc" / "onnx" / good.name
    shutil.copytree(good, copy)
    (copy / "meta.json").write_text("{truncated")
    assert SentenceTransformerEmbedder(runtime="onnx").runtime == "onnx-int8"
    assert not _warnings(caplog)
    assert json.loads((copy / "meta.json").read_text())["check"]["passed"] is True


def test_unimportable_onnxruntime_means_torch(monkeypatch, caplog):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name == "onnxruntime":
            raise ImportError("no onnxruntime here")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert load_onnx_encoder("m", "/nonexistent", 256, lambda: None) is None
    (line,) = _warnings(caplog)
    assert "onnxruntime is not importable" in line


@pytest.mark.parametrize(
    ("flags", "machine", "isa"),
    [
        ({"avx2", "avx512f", "avx512bw", "avx512_vnni"}, "x86_64", "avx512_vnni"),
        ({"avx2", "avx_vnni"}, "x86_64", "avx_vnni"),
        ({"avx2", "avx512f", "avx512bw"}, "x86_64", "avx512"),
        ({"avx2", "fma"}, "x86_64", "avx2"),
        ({"sse4_2"}, "x86_64", "generic"),
        ({"asimd", "asimddp"}, "aarch64", "arm64"),
    ],
)
def test_detect_isa(flags, machine, isa):
    assert detect_isa(frozenset(flags), machine) == isa


def test_quant_plan_follows_the_isa():
    assert quant_plan("avx512_vnni").weight_type == "qint8"
    assert quant_plan("arm64").weight_type == "qint8"
    assert quant_plan("avx2").weight_type == "quint8"  # no VNNI: U8S8 can saturate
    assert all(quant_plan(i).per_channel for i in ("avx2", "avx512_vnni", "arm64"))
    a, b = QuantPlan("avx2", "quint8"), QuantPlan("avx512_vnni", "qint8")
    assert cache_dir("m", "/x", a) != cache_dir("m", "/x", b)


def test_pool_by_hand():
    hidden = np.array([[[1.0, 0.0], [3.0, 2.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    np.testing.assert_allclose(pool(hidden, mask, "mean"), [[2.0, 1.0]])
    np.testing.assert_allclose(pool(hidden, mask, "cls"), [[1.0, 0.0]])
    np.testing.assert_allclose(pool(hidden, mask, "max"), [[3.0, 2.0]])
    np.testing.assert_allclose(pool(hidden, mask, "mean_sqrt_len"), [[4 / 2**0.5, 2 / 2**0.5]])


def test_auto_on_a_bf16_cpu_runs_queries_on_the_cached_export(monkeypatch, torch_fp32):
    """Passages on torch bf16, queries on the int8 export (cached by the first test): a query
    loads no torch model, which is what keeps a cold `llmc search` short."""
    monkeypatch.setattr("llmc.models.device.cpu_has_fast_bf16", lambda: True)
    e = SentenceTransformerEmbedder(runtime="auto", device="cpu")
    assert e.runtime == "torch, onnx-int8 for queries" and not e.query_runtime_missing
    queries = e.embed_queries(TEXTS[3:5])
    assert e._model is None
    assert ((queries * torch_fp32.embed_queries(TEXTS[3:5])).sum(axis=1) >= 0.99).all()
    passages = e.embed_passages(TEXTS)
    assert e._model is not None and e.choice.precision == "bf16"
    assert ((passages * torch_fp32.embed_passages(TEXTS)).sum(axis=1) >= 0.99).all()


def test_index_prepares_the_query_runtime_once(tmp_path, monkeypatch, sample_repo):
    """Without a cached export, queries run on torch; `llmc index` builds the export after
    its backfill, and the next process's queries run on it. Nothing to build: no phase."""
    from click.testing import CliRunner

    from llmc.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("llmc.models.device.cpu_has_fast_bf16", lambda: True)
    embedder_mod.get_embedder.cache_clear()
    before = SentenceTransformerEmbedder(runtime="auto", device="cpu")
    assert before.runtime == "torch" and before.query_runtime_missing
    assert not _export_dirs(tmp_path / "cache")
    try:
        result = CliRunner().invoke(main, ["index", str(sample_repo), "-q"])
        assert result.exit_code == 0, result.output
        (directory,) = _export_dirs(tmp_path / "cache")
        assert json.loads((directory / "meta.json").read_text())["check"]["passed"] is True
        after = SentenceTransformerEmbedder(runtime="auto", device="cpu")
        assert after.runtime == "torch, onnx-int8 for queries"
        (sample_repo / "extra.py").write_text("def added_later():\n    return 42\n")
        monkeypatch.setattr(onnx_runtime, "export", lambda *a, **k: pytest.fail("re-exported"))
        result = CliRunner().invoke(main, ["index", str(sample_repo), "-q"])
        assert result.exit_code == 0, result.output
    finally:
        embedder_mod.get_embedder.cache_clear()


def _gelu_chain(layers: int):
    """A toy graph: ``layers`` times Gelu -> MatMul(weight), as a BERT's FFN outputs are fed."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        nodes.append(
            helper.make_node("Gelu", [prev], [f"g{i}"], name=f"gelu{i}", domain="com.microsoft")
        )
        inits.append(numpy_helper.from_array(np.eye(4, dtype=np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [f"g{i}", f"w{i}"], [f"m{i}"], name=f"ffn_out{i}"))
        prev = f"m{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])],
        inits,
    )
    return helper.make_model(graph)


def test_fp32_matmuls_follow_the_plan():
    from dataclasses import replace

    model = _gelu_chain(6)
    plan = quant_plan("avx512_vnni")
    assert onnx_export._fp32_matmuls(model, plan) == [f"ffn_out{i}" for i in range(6)]
    first3 = replace(plan, keep_gelu_fed_fp32=False, gelu_fed_fp32_layers=3)
    assert onnx_export._fp32_matmuls(model, first3) == ["ffn_out0", "ffn_out1", "ffn_out2"]
    assert onnx_export._fp32_matmuls(model, replace(first3, gelu_fed_fp32_layers=0)) == []


def test_cache_key_of_the_default_plan_is_unchanged():
    """Plan fields added later leave the default plan's key (and its cached export) alone."""
    from dataclasses import asdict, replace

    from llmc.models.onnx_plan import plan_key

    plan = quant_plan("avx512_vnni")
    old = {
        k: v for k, v in asdict(plan).items() if k not in ("gelu_fed_fp32_layers", "activations")
    }
    assert plan_key(plan) == old
    static = replace(plan, activations="static")
    assert plan_key(static)["activations"] == "static"
    assert cache_dir("m", "/x", static) != cache_dir("m", "/x", plan)


def test_calibration_sample_is_fixed_and_unpadded():
    texts = onnx_export.calibration_texts()
    assert texts == onnx_export.calibration_texts() and len(texts) > 100
    assert "x" in texts and any("def " in t for t in texts)
    info = {
        "backend": _tokenizer_backend(),
        "lowercase": False,
        "max_position_embeddings": 512,
        "input_names": ["input_ids", "attention_mask", "token_type_ids"],
    }
    feeds = onnx_export._calibration_feeds(info, ["x", "def f(a, b):\n    return a + b"])
    assert [f["input_ids"].shape[0] for f in feeds] == [1, 1]
    assert all(f["attention_mask"].all() for f in feeds)  # no pad position is calibrated
    assert feeds[0]["input_ids"].shape[1] < feeds[1]["input_ids"].shape[1]


def _tokenizer_backend():
    from tokenizers import Tokenizer

    from llmc.models.embedder import resolve_model

    _, source = resolve_model("default")
    return Tokenizer.from_file(str(Path(source) / "tokenizer.json"))


def test_static_export_is_calibrated_and_batch_independent(tmp_path, torch_fp32):
    """The static (QDQ) plan, a benchmark option: ranges fixed at export, so a text's vector
    does not depend on what it is batched with (dynamic int8's does); not what llmc runs,
    because it measured further from fp32 on short texts (benchmarks/README.md)."""
    from dataclasses import replace

    import onnx

    from llmc.models.embedder import _load

    st = _load.__wrapped__(torch_fp32._source, "cpu", "fp32")
    plan = replace(quant_plan("avx512_vnni"), activations="static")
    with onnx_export.quiet():
        meta = onnx_export.export(torch_fp32._source, st, tmp_path, plan)
    assert meta["plan"]["activations"] == "static" and meta["fp32_matmuls"]
    ops = {n.op_type for n in onnx.load(str(tmp_path / "model.onnx")).graph.node}
    assert "QuantizeLinear" in ops and "DynamicQuantizeLinear" not in ops
    encoder = onnx_runtime.OnnxEncoder(tmp_path, 256)
    batch = encoder.encode(TEXTS)
    alone = np.concatenate([encoder.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    assert ((batch * torch_fp32.embed_passages(TEXTS)).sum(axis=1) >= 0.97).all()
