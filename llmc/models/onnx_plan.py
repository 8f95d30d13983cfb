"""Where an ONNX export is built for and kept: the CPU's ISA, the quantization plan that
suits it, and the cache directory whose key names both (``llmc.models.onnx_runtime`` says
why each choice was made).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

EXPORT_VERSION = 1  # bump when the export, quantization or pooling code changes
MODEL_FILE = "model.onnx"
META_FILE = "meta.json"
TOKENIZER_FILE = "tokenizer.json"
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len")


class ExportRefused(Exception):
    """The model cannot run on ONNX Runtime here (unsupported modules, failed check, ...)."""


# -- the machine -----------------------------------------------------------------------------
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def detect_isa(flags: frozenset[str] | None = None, machine: str | None = None) -> str:
    """avx512_vnni | avx_vnni | avx512 | avx2 | arm64 | generic, from what the CPU says."""
    machine = (machine or platform.machine()).lower()
    if machine in ("arm64", "aarch64"):
        return "arm64"
    flags = cpu_flags() if flags is None else flags
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    if "avx_vnni" in flags:
        return "avx_vnni"
    if "avx512f" in flags and "avx512bw" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "generic"


@dataclass(frozen=True)
class QuantPlan:
    isa: str
    weight_type: str  # qint8 (U8S8 kernels) | quint8 (U8U8)
    per_channel: bool = True
    reduce_range: bool = False
    keep_gelu_fed_fp32: bool = True
    quantize_attention: bool = False  # the fused Attention op's QKV projections
    # With keep_gelu_fed_fp32 off, the GELU-fed matmuls of the first N layers stay fp32
    # anyway: on all-MiniLM-L6-v2 they are the projections int8 moves most (measured per
    # matmul, benchmarks/README.md).
    gelu_fed_fp32_layers: int = 0
    # dynamic: activations quantized per batch at run time (quantize_dynamic). static:
    # ranges calibrated once on a fixed sample (quantize_static, QDQ); measured, not chosen.
    activations: str = "dynamic"


def quant_plan(isa: str) -> QuantPlan:
    """The dynamic quantization that suits ``isa`` (see the module docstring)."""
    if isa in ("avx512_vnni", "avx_vnni", "arm64"):
        return QuantPlan(isa, "qint8")
    if isa in ("avx512", "avx2"):
        return QuantPlan(isa, "quint8")
    return QuantPlan(isa, "qint8")


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# -- the cache -------------------------------------------------------------------------------
def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmc" / "onnx"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def runtime_versions() -> dict[str, str]:
    names = ("torch", "transformers", "sentence-transformers", "onnx", "onnxruntime")
    return {n: _version(n) for n in names} | {"export": str(EXPORT_VERSION)}


def weights_fingerprint(source: str) -> str:
    """Identity of a model directory's files (name, size, mtime), cheap enough for every
    start; the content hash of the weights is computed once at export and kept in meta.json."""
    path = Path(source)
    h = hashlib.sha256(source.encode())
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            st = f.stat()
            h.update(f"{f.relative_to(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def plan_key(plan: QuantPlan) -> dict[str, object]:
    """The plan as the cache key names it: fields added later are left out at their
    defaults, so an export cached before they existed keeps its key."""
    later = {"gelu_fed_fp32_layers": 0, "activations": "dynamic"}
    return {k: v for k, v in asdict(plan).items() if k not in later or later[k] != v}


def cache_dir(model_id: str, source: str, plan: QuantPlan) -> Path:
    key = json.dumps(
        [model_id, weights_fingerprint(source), plan_key(plan), runtime_versions()],
        sort_keys=True,
    )
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in model_id)[-60:].strip("-")
    return cache_root() / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def content_hash(source: str) -> str:
    path = Path(source)
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".pt", ".pth"):
                with f.open("rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
    return h.hexdigest()


__all__ = [
    "META_FILE",
    "MODEL_FILE",
    "POOLING_MODES",
    "TOKENIZER_FILE",
    "ExportRefused",
    "QuantPlan",
    "cache_dir",
    "cache_root",
    "content_hash",
    "cpu_count",
    "cpu_flags",
    "detect_isa",
    "plan_key",
    "quant_plan",
    "runtime_versions",
]
