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

import json
import logging
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmc.models.onnx_export import export, quiet
from llmc.models.onnx_plan import (
    META_FILE,
    MODEL_FILE,
    POOLING_MODES,
    TOKENIZER_FILE,
    ExportRefused,
    QuantPlan,
    cache_dir,
    cache_root,
    cpu_count,
    cpu_flags,
    detect_isa,
    quant_plan,
)

log = logging.getLogger(__name__)

MIN_COSINE = 0.99  # each sample text's int8 vector against torch fp32
SMALL_BATCH = 16  # at most this many texts run with ``query_threads``
QUERY_THREADS = 1  # measured on a busy 2-core CPU: see benchmarks/README.md
MAX_META_BYTES = 1024 * 1024  # meta.json is ~1 KB: what llmc wrote, read bounded all the same

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
        from llmc.models.vet import read_json_bounded

        meta = read_json_bounded(directory / META_FILE, MAX_META_BYTES, "ONNX export record")
        if not isinstance(meta, dict):
            raise ExportRefused(f"{directory / META_FILE} is not an export record")
        self.meta: dict[str, Any] = meta
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

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
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
    from llmc.errors import ModelError
    from llmc.models.vet import read_json_bounded

    try:
        meta = read_json_bounded(directory / META_FILE, MAX_META_BYTES, "ONNX export record")
    except ModelError:
        return None
    return meta if isinstance(meta, dict) else None


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
        with quiet():
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
    plan: QuantPlan | None = None,
) -> OnnxEncoder | None:
    """The cached, checked int8 export of ``source``, built on first use; None (after one
    warning line) when it cannot be used, so the caller runs torch. A refusal recorded by
    an earlier process is only logged (not warned) unless the runtime was ``requested``:
    under ``auto`` it was said once, when the check ran. ``plan`` overrides the one the
    CPU's ISA picks (benchmarks measure other plans through it)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        log.warning("onnxruntime is not importable (%s); embedding with torch", e)
        return None
    plan = plan or quant_plan(isa or detect_isa())
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


def cached_onnx_encoder(
    model_id: str, source: str, max_seq_length: int, isa: str | None = None
) -> OnnxEncoder | None:
    """The int8 export of ``source`` if one is cached and passed its check, else None;
    never exports (that needs torch, which is what a caller of this avoids importing)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    final = cache_dir(model_id, source, quant_plan(isa or detect_isa()))
    meta = _read_meta(final)
    if not meta or not meta.get("check", {}).get("passed"):
        return None
    try:
        return OnnxEncoder(final, max_seq_length)
    except Exception as e:  # noqa: BLE001 - unreadable: torch now, rebuilt by the next index
        log.info("onnx cache %s unreadable (%s): queries run on torch", final, _first_line(e))
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
    "cached_onnx_encoder",
    "check",
    "cpu_count",
    "cpu_flags",
    "detect_isa",
    "export",
    "load_onnx_encoder",
    "pool",
    "quant_plan",
]
