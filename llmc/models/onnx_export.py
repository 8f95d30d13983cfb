"""Export a sentence-transformers model to ONNX int8: torch export, fusion, quantization
(dynamic, or static QDQ calibrated on a fixed sample).

``export`` writes ``model.onnx``, ``tokenizer.json`` and ``meta.json`` into a directory;
``llmc.models.onnx_runtime`` checks the result against torch and caches it (its docstring
says why each choice was made).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llmc.models.onnx_plan import (
    META_FILE,
    MODEL_FILE,
    POOLING_MODES,
    TOKENIZER_FILE,
    ExportRefused,
    QuantPlan,
    content_hash,
    runtime_versions,
)

log = logging.getLogger(__name__)

GELU_OPS = frozenset({"Gelu", "BiasGelu", "FastGelu", "QuickGelu"})


def _describe(st_model: Any) -> dict[str, Any]:
    """What the runtime needs to know about a SentenceTransformer, or ExportRefused."""
    kinds = [type(m).__name__ for m in st_model]
    if (
        not kinds
        or kinds[0] != "Transformer"
        or any(k not in ("Pooling", "Normalize") for k in kinds[1:])
    ):
        raise ExportRefused(f"modules {kinds} (only Transformer, Pooling, Normalize export)")
    pooling = "mean"
    if len(kinds) > 1 and kinds[1] == "Pooling":
        cfg = st_model[1].get_config_dict()
        mode = cfg.get("pooling_mode")  # sentence-transformers >= 6; older: one flag per mode
        modes = [mode] if isinstance(mode, str) else []
        modes += [
            m
            for m in POOLING_MODES
            if cfg.get(f"pooling_mode_{m}_tokens", cfg.get(f"pooling_mode_{m}_token"))
        ]
        if len(modes) != 1 or modes[0] not in POOLING_MODES:
            raise ExportRefused(f"pooling {cfg} is not one of {POOLING_MODES}")
        pooling = modes[0]
    first = st_model[0]
    tokenizer = st_model.tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or tokenizer.pad_token is None:
        raise ExportRefused("the model has no fast tokenizer with a pad token")
    auto = getattr(first, "auto_model", None)
    if auto is None:
        raise ExportRefused("the Transformer module has no auto_model")
    config = first.get_config_dict() if hasattr(first, "get_config_dict") else {}
    return {
        "auto_model": auto,
        "backend": backend,
        "pooling": pooling,
        "lowercase": bool(getattr(first, "do_lower_case", config.get("do_lower_case", False))),
        "pad_id": int(tokenizer.pad_token_id),
        "pad_token": str(tokenizer.pad_token),
        "dim": int(auto.config.hidden_size),
        "max_position_embeddings": int(getattr(auto.config, "max_position_embeddings", 512)),
        "input_names": [
            n
            for n in ("input_ids", "attention_mask", "token_type_ids")
            if n in (tokenizer.model_input_names or [])
        ],
    }


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the exporter's and quantizer's chatter (warnings, root-logger lines) so an
    export costs the user no more than llmc's own log lines."""
    root = logging.getLogger()
    guard = None
    if not root.handlers:  # onnxruntime.quantization logs via logging.warning(), which would
        guard = logging.NullHandler()  # otherwise configure the root logger for us
        root.addHandler(guard)
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)
        if guard is not None:
            root.removeHandler(guard)


def _export_fp32(info: dict[str, Any], path: Path) -> None:
    import torch

    auto = info["auto_model"]
    names: list[str] = info["input_names"]

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: Any) -> Any:
            return self.inner(**dict(zip(names, tensors, strict=True))).last_hidden_state

    tok = info["backend"]
    enc = tok.encode_batch(["def f(x): return x", "a"])
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    width = max(len(e.ids) for e in enc)
    args = tuple(
        torch.tensor([(getattr(e, fields[n]) + [0] * width)[:width] for e in enc]) for n in names
    )
    before = auto.config._attn_implementation
    setter = getattr(auto, "set_attn_implementation", None)
    if setter is not None and before != "eager":
        setter("eager")  # the eager graph is the one onnxruntime's optimizer fuses
    try:
        axes = {n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]}
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                _Hidden(auto).eval(),
                args,
                str(path),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
    finally:
        if setter is not None and before != "eager":
            setter(before)


def _fuse(src: Path, dst: Path, info: dict[str, Any]) -> bool:
    """onnxruntime's transformer fusions; False (and ``dst`` untouched) when they fail."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        auto = info["auto_model"]
        heads = int(getattr(auto.config, "num_attention_heads", 0) or 0)
        model = optimize_model(
            str(src), model_type="bert", num_heads=heads, hidden_size=info["dim"]
        )
        model.save_model_to_file(str(dst))
        return True
    except Exception as e:  # noqa: BLE001 - unfused still runs, just slower
        log.debug("onnx fusion skipped: %s", e)
        return False


def _fp32_matmuls(model: Any, plan: QuantPlan) -> list[str]:
    """The matmuls ``plan`` keeps in fp32: GELU-fed ones (all, or the first
    ``gelu_fed_fp32_layers`` in graph order, which is layer order)."""
    producers = {out: node.op_type for node in model.graph.node for out in node.output}
    gelu_fed = [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and producers.get(node.input[0]) in GELU_OPS
    ]
    return gelu_fed if plan.keep_gelu_fed_fp32 else gelu_fed[: plan.gelu_fed_fp32_layers]


def _quantize(
    src: Path, dst: Path, plan: QuantPlan, calibration: list[dict[str, Any]] | None = None
) -> list[str]:
    """int8 quantization per ``plan`` (dynamic, or static on ``calibration`` feeds);
    returns the matmuls kept in fp32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(src))
    keep = _fp32_matmuls(model, plan)
    weight_type = QuantType.QInt8 if plan.weight_type == "qint8" else QuantType.QUInt8
    if plan.activations == "static":
        _quantize_static(model, dst, plan, keep, weight_type, calibration or [])
        return keep
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=weight_type,
        per_channel=plan.per_channel,
        reduce_range=plan.reduce_range,
        op_types_to_quantize=["MatMul", "Attention"] if plan.quantize_attention else ["MatMul"],
        nodes_to_exclude=keep,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return keep


def _quantize_static(
    model: Any,
    dst: Path,
    plan: QuantPlan,
    keep: list[str],
    weight_type: Any,
    calibration: list[dict[str, Any]],
) -> None:
    """QDQ int8 with activation ranges calibrated (MinMax) on ``calibration``: weights per
    channel, activations uint8 (U8S8), MatMul outputs left fp32 (MatMulIntegerToFloat at
    run time). The fused Attention op has no QDQ form, so its QKV projections stay fp32."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    if not calibration:
        raise ExportRefused("static quantization needs calibration texts")
    # The calibrator only watches tensors whose type is known; the fused contrib ops
    # (SkipLayerNormalization, BiasGelu) defeat onnx's own shape inference.
    typed = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    initializers = {i.name for i in typed.graph.initializer}
    targets = [
        n.name
        for n in typed.graph.node
        if n.op_type == "MatMul" and n.input[1] in initializers and n.name not in keep
    ]

    class _Feeds(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(calibration)

        def get_next(self) -> dict[str, Any] | None:
            return next(self.feeds, None)

    quantize_static(
        typed,
        str(dst),
        _Feeds(),
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=["MatMul"],
        nodes_to_quantize=targets,
        per_channel=plan.per_channel,
        reduce_range=plan.reduce_range,
        activation_type=QuantType.QUInt8,
        weight_type=weight_type,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options={
            "DefaultTensorType": onnx.TensorProto.FLOAT,
            "MatMulConstBOnly": True,
            "OpTypesToExcludeOutputQuantization": ["MatMul"],
        },
    )


def calibration_texts() -> list[str]:
    """A fixed sample of code and docstrings for static calibration: 40-line windows of a
    few standard-library modules (present wherever Python is, and not any repository llmc
    is benchmarked on), plus short query-like texts."""
    import sysconfig

    lib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    for rel in CALIBRATION_MODULES:
        try:
            lines = (lib / rel).read_text("utf-8").splitlines()
        except OSError:
            continue
        texts += ["\n".join(lines[i : i + 40]) for i in range(0, len(lines), 40)]
    return texts[:: max(1, len(texts) // 192)][:192] + list(CALIBRATION_QUERIES)


CALIBRATION_MODULES = (
    "textwrap.py",
    "json/__init__.py",
    "argparse.py",
    "functools.py",
    "shutil.py",
    "csv.py",
    "logging/__init__.py",
)
CALIBRATION_QUERIES = (
    "x",
    "parse",
    "how is the config file read",
    "where are temporary files removed",
    "retry with backoff",
    "TODO",
)


def _calibration_feeds(info: dict[str, Any], texts: list[str]) -> list[dict[str, Any]]:
    """One unpadded feed per text, so pad positions never enter a range."""
    import numpy as np
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(info["backend"].to_str())
    tok.no_padding()
    tok.enable_truncation(max_length=min(256, info["max_position_embeddings"]))
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    feeds = []
    for text in texts:
        enc = tok.encode(text.lower() if info["lowercase"] else text)
        feeds.append(
            {n: np.array([getattr(enc, fields[n])], dtype=np.int64) for n in info["input_names"]}
        )
    return feeds


def export(source: str, st_model: Any, directory: Path, plan: QuantPlan) -> dict[str, Any]:
    """Write model.onnx (int8), tokenizer.json and meta.json (no check yet) into ``directory``."""
    started = time.perf_counter()
    info = _describe(st_model)
    work = directory / "work"
    work.mkdir(parents=True, exist_ok=True)
    raw, fused = work / "fp32.onnx", work / "fused.onnx"
    _export_fp32(info, raw)
    src = fused if _fuse(raw, fused, info) else raw
    feeds = _calibration_feeds(info, calibration_texts()) if plan.activations == "static" else None
    kept = _quantize(src, directory / MODEL_FILE, plan, feeds)
    shutil.rmtree(work, ignore_errors=True)
    info["backend"].save(str(directory / TOKENIZER_FILE))
    meta = {k: v for k, v in info.items() if k not in ("auto_model", "backend")} | {
        "plan": asdict(plan),
        "versions": runtime_versions(),
        "weights_sha256": content_hash(source),
        "fp32_matmuls": kept,
        "export_seconds": round(time.perf_counter() - started, 2),
    }
    (directory / META_FILE).write_text(json.dumps(meta, indent=1), "utf-8")
    return meta


__all__ = ["GELU_OPS", "calibration_texts", "export", "quiet"]
