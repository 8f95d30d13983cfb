"""ONNX Runtime int8 for sentence-transformers embedders on CPU: export once, check, cache.

What was chosen and why:

* Export with ``torch.onnx.export`` (TorchScript exporter, eager attention), fuse with
  onnxruntime's own BERT optimizer (Attention, SkipLayerNorm, BiasGelu), quantize with
  ``onnxruntime.quantization.quantize_dynamic``, run with onnxruntime directly. The library
  path (sentence-transformers' ``backend="onnx"``) needs optimum-onnx, which pins
  ``transformers<4.58`` while the installed sentence-transformers needs ``transformers>=5``:
  it does not install without breaking the torch path. The dynamo exporter works too but
  its graph defeats the fusions (measured: slower at the same accuracy).
* Weights int8 per output channel; activations uint8, quantized per batch at run time.
  Quantized: the attention output and FFN input projections. Kept fp32, by measurement on
  all-MiniLM-L6-v2 (min cosine to torch over this repository's spans, the check sample and
  one-word queries): the FFN output projections, whose GELU-fed inputs are long-tailed and
  clipped by per-tensor uint8 (0.987 with them quantized), and the fused Attention op's QKV
  projections (0.984 on one-word texts with them quantized, 0.991 without).
* The weight type follows the CPU, detected from its flags, never assumed: signed int8
  (U8S8) where VNNI or ARM64 dot products take it; unsigned (U8U8) on x86 without VNNI, where
  the AVX2 U8S8 kernel can saturate its 16-bit sums.
* Tokenizer: the model's own fast tokenizer (``tokenizer.json``) through ``tokenizers``;
  pooling as the model's Pooling module says (mean, cls, max, mean_sqrt_len); always
  L2-normalized, as llmc asks of every embedder. Models with other modules (Dense, ...)
  are not exported: they run on torch.
* The export lives in ``$XDG_CACHE_HOME/llmc/onnx/<model>-<key>/`` where the key hashes the
  weight files' identity, the ISA, the plan and the versions of torch, transformers, onnx and
  onnxruntime. It is built in a temp dir and renamed into place, so a second process reuses it
  or loses the race harmlessly. Before the rename it is checked against the torch model on a
  fixed sample of code and doc texts (cosine >= 0.99 each); the result is recorded in
  ``meta.json`` so the check runs once. A failed check, a failed export or an unreadable
  cache that cannot be rebuilt means torch, with one warning line.
* The runtime is not part of the model id recorded in the index: int8 and fp32 vectors of the
  same text agree to cosine >= 0.99 (checked), which is well inside what ranking tolerates, so
  int8 queries search fp32 passages (and the reverse) without re-embedding the index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EXPORT_VERSION = 1  # bump when the export, quantization or pooling code changes
MIN_COSINE = 0.99  # each sample text's int8 vector against torch fp32
SMALL_BATCH = 16  # at most this many texts run with ``query_threads``
QUERY_THREADS = 1  # measured on a busy 2-core CPU: see benchmarks/README.md
MODEL_FILE = "model.onnx"
META_FILE = "meta.json"
TOKENIZER_FILE = "tokenizer.json"
GELU_OPS = frozenset({"Gelu", "BiasGelu", "FastGelu", "QuickGelu"})
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len")

# Fixed sample for the check: code and docs like llmc indexes, short to past 256 tokens.
SAMPLE_TEXTS: tuple[str, ...] = (
    "def resolve_model(name: str) -> tuple[str, str]:\n"
    '    """(model id recorded in the index, what to pass to SentenceTransformer)."""\n'
    "    path = Path(name).expanduser()\n    if path.exists():\n"
    '        return f"path:{path.resolve()}", str(path.resolve())\n    return name, name',
    "class LockedEmbedder:\n    def __init__(self, inner, lock):\n        self.inner = inner\n"
    "        self.lock = lock\n\n    def embed_queries(self, texts):\n        with self.lock:\n"
    "            return self.inner.embed_queries(texts)",
    "## Configuration\n\nSettings are read from `~/.config/llmc/config.toml`, then "
    "`<repo>/llmc.toml`, then `LLMC_<SECTION>__<KEY>` environment variables.",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let args: Vec<String> = env::args().collect();"
    "\n    let cfg = Config::parse(&args)?;\n    run(cfg)\n}",
    "export function debounce<T extends (...a: any[]) => void>(fn: T, ms = 200) {\n"
    "  let t: ReturnType<typeof setTimeout> | undefined;\n"
    "  return (...a: Parameters<T>) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };\n}",
    "SELECT s.path, s.start_line FROM spans s JOIN files f ON f.id = s.file_id "
    "WHERE f.lang = 'python' ORDER BY s.start_line;",
    "how are embeddings cached between index runs",
    "where is the lexical index rebuilt after a crash",
    "Incremental by content hash: an unchanged file costs a stat; a changed file re-parses "
    "only itself; embeddings are cached by (model, text hash) so moved code is not re-embedded.",
    "x",
    "README: llmc turns a repository into a searchable, connected index on the developer's "
    "own machine and answers where, how and why questions with ranked code and doc spans.",
    "\n".join(
        f"    def method_{i}(self, value: int) -> int:\n"
        f"        # step {i}: scale, clamp and log the value before returning it\n"
        f"        return min(max(value * {i}, 0), 1000)"
        for i in range(40)
    ),
)


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


def cache_dir(model_id: str, source: str, plan: QuantPlan) -> Path:
    key = json.dumps(
        [model_id, weights_fingerprint(source), asdict(plan), runtime_versions()], sort_keys=True
    )
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in model_id)[-60:].strip("-")
    return cache_root() / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _content_hash(source: str) -> str:
    path = Path(source)
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".pt", ".pth"):
                with f.open("rb") as fh:
                    for block in iter(lambda: fh.read(1 << 20), b""):
                        h.update(block)
    return h.hexdigest()


# -- running ---------------------------------------------------------------------------------
class OnnxEncoder:
    """An exported model: tokenize, run, pool, normalize. Two sessions share the file: one
    with all cores for batches, one with ``query_threads`` for a handful of texts."""

    def __init__(
        self,
        directory: Path,
        max_seq_length: int = 256,
        batch_threads: int | None = None,
        query_threads: int = QUERY_THREADS,
    ):
        from tokenizers import Tokenizer

        self.directory = directory
        self.meta: dict[str, Any] = json.loads((directory / META_FILE).read_text("utf-8"))
        self.dim = int(self.meta["dim"])
        self.pooling = str(self.meta["pooling"])
        if self.pooling not in POOLING_MODES:
            raise ExportRefused(f"unknown pooling {self.pooling!r}")
        self.lowercase = bool(self.meta.get("lowercase", False))
        self.batch_threads = batch_threads or cpu_count()
        self.query_threads = max(1, min(query_threads, self.batch_threads))
        limit = int(self.meta.get("max_position_embeddings") or 512)
        self.max_seq_length = min(max_seq_length or limit, limit)
        tok = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        tok.no_truncation()
        tok.enable_truncation(max_length=self.max_seq_length)
        tok.enable_padding(pad_id=int(self.meta["pad_id"]), pad_token=str(self.meta["pad_token"]))
        self._tokenizer = tok
        self._sessions: dict[int, Any] = {}
        self._session(self.batch_threads)  # fail now, not on the first query, if unreadable
        self.inputs = {i.name for i in self._sessions[self.batch_threads].get_inputs()}

    def _session(self, threads: int):
        if threads not in self._sessions:
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.log_severity_level = 3
            self._sessions[threads] = ort.InferenceSession(
                str(self.directory / MODEL_FILE), so, providers=["CPUExecutionProvider"]
            )
        return self._sessions[threads]

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """L2-normalized float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        small = len(texts) <= SMALL_BATCH
        session = self._session(self.query_threads if small else self.batch_threads)
        items = [t.lower() for t in texts] if self.lowercase else list(texts)
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for start in range(0, len(order), max(batch_size, 1)):
            idx = order[start : start + batch_size]
            enc = self._tokenizer.encode_batch([items[i] for i in idx])
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": mask,
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            hidden = session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            out[idx] = pool(hidden, mask, self.pooling)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)


def pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Token vectors (batch, seq, dim) → one vector per text, as sentence-transformers pools."""
    m = mask[..., None].astype(hidden.dtype)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return np.where(m > 0, hidden, -1e9).max(axis=1)
    summed = (hidden * m).sum(axis=1)
    count = np.clip(m.sum(axis=1), 1e-9, None)
    return summed / (np.sqrt(count) if mode == "mean_sqrt_len" else count)


# -- exporting -------------------------------------------------------------------------------
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
def _quiet() -> Iterator[None]:
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


def _quantize(src: Path, dst: Path, plan: QuantPlan) -> list[str]:
    """Dynamic int8 quantization per ``plan``; returns the matmuls kept in fp32."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(src))
    producers = {out: node.op_type for node in model.graph.node for out in node.output}
    keep = [
        node.name
        for node in model.graph.node
        if plan.keep_gelu_fed_fp32
        and node.op_type == "MatMul"
        and producers.get(node.input[0]) in GELU_OPS
    ]
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8 if plan.weight_type == "qint8" else QuantType.QUInt8,
        per_channel=plan.per_channel,
        reduce_range=plan.reduce_range,
        op_types_to_quantize=["MatMul", "Attention"] if plan.quantize_attention else ["MatMul"],
        nodes_to_exclude=keep,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return keep


def export(source: str, st_model: Any, directory: Path, plan: QuantPlan) -> dict[str, Any]:
    """Write model.onnx (int8), tokenizer.json and meta.json (no check yet) into ``directory``."""
    started = time.perf_counter()
    info = _describe(st_model)
    work = directory / "work"
    work.mkdir(parents=True, exist_ok=True)
    raw, fused = work / "fp32.onnx", work / "fused.onnx"
    _export_fp32(info, raw)
    kept = _quantize(fused if _fuse(raw, fused, info) else raw, directory / MODEL_FILE, plan)
    shutil.rmtree(work, ignore_errors=True)
    info["backend"].save(str(directory / TOKENIZER_FILE))
    meta = {k: v for k, v in info.items() if k not in ("auto_model", "backend")} | {
        "plan": asdict(plan),
        "versions": runtime_versions(),
        "weights_sha256": _content_hash(source),
        "fp32_matmuls": kept,
        "export_seconds": round(time.perf_counter() - started, 2),
    }
    (directory / META_FILE).write_text(json.dumps(meta, indent=1), "utf-8")
    return meta


def check(
    encoder: OnnxEncoder, st_model: Any, texts: Sequence[str] = SAMPLE_TEXTS
) -> dict[str, Any]:
    """Cosine of each sample text's int8 vector to the torch fp32 one."""
    import torch

    with torch.inference_mode():
        ref = st_model.encode(
            list(texts), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )
    got = encoder.encode(texts)
    cos = (np.asarray(ref, dtype=np.float32) * got).sum(axis=1)
    return {
        "passed": bool(cos.min() >= MIN_COSINE),
        "min_cosine": round(float(cos.min()), 5),
        "mean_cosine": round(float(cos.mean()), 5),
        "texts": len(texts),
        "threshold": MIN_COSINE,
    }


def _read_meta(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / META_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _discard(directory: Path) -> None:
    aside = directory.with_name(f".broken-{directory.name}-{uuid.uuid4().hex[:8]}")
    try:
        directory.rename(aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def _build(
    model_id: str,
    source: str,
    final: Path,
    plan: QuantPlan,
    load_torch: Callable[[], Any],
    max_seq_length: int,
) -> dict[str, Any]:
    """Export and check in a temp dir, then rename it to ``final``; returns its meta."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        st_model = load_torch()
        with _quiet():
            export(source, st_model, tmp, plan)
        encoder = OnnxEncoder(tmp, max_seq_length)
        previous = st_model.max_seq_length
        st_model.max_seq_length = encoder.max_seq_length
        try:
            result = check(encoder, st_model)
        finally:
            st_model.max_seq_length = previous
        meta = _read_meta(tmp) or {}
        meta |= {"model_id": model_id, "check": result}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1), "utf-8")
        try:
            tmp.rename(final)
        except OSError:  # another process got there first: use its export
            shutil.rmtree(tmp, ignore_errors=True)
            return _read_meta(final) or meta
        log.info(
            "onnx int8 export of %s (%s) in %.1fs, check min cosine %.4f",
            model_id,
            plan.isa,
            meta.get("export_seconds", 0.0),
            result["min_cosine"],
        )
        return meta
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def load_onnx_encoder(
    model_id: str,
    source: str,
    max_seq_length: int,
    load_torch: Callable[[], Any],
    isa: str | None = None,
    requested: bool = True,
) -> OnnxEncoder | None:
    """The cached, checked int8 export of ``source``, built on first use; None (after one
    warning line) when it cannot be used, so the caller runs torch. A refusal recorded by
    an earlier process is only logged (not warned) unless the runtime was ``requested``:
    under ``auto`` it was said once, when the check ran."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        log.warning("onnxruntime is not importable (%s); embedding with torch", e)
        return None
    plan = quant_plan(isa or detect_isa())
    final = cache_dir(model_id, source, plan)
    try:
        meta = _read_meta(final)
        checked_now = meta is None or "check" not in meta
        if checked_now:
            if final.exists():
                log.debug("incomplete onnx cache %s: rebuilding", final)
                _discard(final)
            meta = _build(model_id, source, final, plan, load_torch, max_seq_length)
        result = meta["check"]
        if not result.get("passed"):
            say = log.warning if checked_now or requested else log.info
            say(
                "onnx int8 embedder for %s refused: min cosine %.4f < %.2f against torch on "
                "%d sample texts (recorded in %s); embedding with torch",
                model_id,
                result.get("min_cosine", 0.0),
                MIN_COSINE,
                result.get("texts", 0),
                final,
            )
            return None
        try:
            return OnnxEncoder(final, max_seq_length)
        except Exception as e:  # noqa: BLE001 - a corrupt cache is rebuilt, never fatal
            log.warning("onnx cache %s is unreadable (%s); rebuilding it", final, _first_line(e))
            _discard(final)
            meta = _build(model_id, source, final, plan, load_torch, max_seq_length)
            if not meta["check"].get("passed"):
                raise ExportRefused(f"rebuilt export failed its check ({meta['check']})") from e
            return OnnxEncoder(final, max_seq_length)
    except Exception as e:  # noqa: BLE001 - any failure means torch, said once
        log.warning(
            "onnx int8 embedder for %s unavailable (%s); embedding with torch",
            model_id,
            _first_line(e),
        )
        return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


__all__ = [
    "ExportRefused",
    "OnnxEncoder",
    "QuantPlan",
    "cache_dir",
    "cache_root",
    "check",
    "detect_isa",
    "export",
    "load_onnx_encoder",
    "pool",
    "quant_plan",
]
