"""Embeddings from an OpenAI-compatible server's ``/embeddings``: ``embedding.code_model =
"openai:<model>"`` (or ``docs_model``), at ``embedding.base_url``, with the key in the
variable ``embedding.api_key_env`` names (the [llm] server may be another one).

The vector space id is ``openai:<model>@<host:port>``: vectors of another model or another
server are another space (re-embedded), and nothing about the key is recorded. The
dimension is what the server's first answer has; an answer of another dimension later,
vectors that are not numbers, a count that does not match, or a server that is down or too
slow is a ModelError of one line (the index keeps what it has; search falls back to the
ranking without vectors for that query). Vectors are L2-normalised here, as llmc's cosine
search expects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llmc.errors import ModelError
from llmc.models.openai_http import ServerError, host_of, server

PREFIX = "openai:"
BATCH = 64  # texts per request
TIMEOUT_S = 30.0  # per request


def is_openai(name: str) -> bool:
    return name.startswith(PREFIX) and len(name) > len(PREFIX)


def _base(cfg: Any) -> tuple[str, str]:
    """(base URL, key variable) of the embedding server, from an EmbeddingConfig."""
    return getattr(cfg, "base_url", ""), getattr(cfg, "api_key_env", "")


def space_id(name: str, base_url: str) -> str:
    """``openai:<model>@<host:port>``; ModelError for a missing or malformed URL."""
    try:
        return f"{name}@{host_of(base_url)}"
    except ServerError as e:
        raise ModelError(f"{name}: {e} (set embedding.base_url)") from None


class OpenAIEmbedder:
    """The ``Embedder`` protocol over HTTP; ``dim`` is known after the first answer (asked
    for with one short text when read before any)."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key_env: str = "",
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout_s: float = TIMEOUT_S,
    ):
        self.model = name[len(PREFIX) :]
        self.model_id = space_id(name, base_url)
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.timeout_s = timeout_s
        self.load_seconds = 0.0
        self._dim: int | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model_id!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def ensure_query_runtime(self) -> bool:
        return False  # nothing to export: the server embeds

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        out = []
        for i in range(0, len(texts), BATCH):
            batch = [self.passage_prefix + t for t in texts[i : i + BATCH]]
            out.append(self._embed(batch))
            if progress is not None:
                progress(len(batch))
        if not out:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        return np.concatenate(out)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.query_prefix + t for t in texts])

    def _embed(self, texts: list[str]) -> np.ndarray:
        where = f"embeddings {self.model_id}"
        try:
            srv = server(self.base_url, self.api_key_env)
            data = srv.request(
                "POST", "/embeddings", self.timeout_s, {"model": self.model, "input": texts}
            )
        except ServerError as e:
            raise ModelError(f"{where}: {e}") from None
        try:
            rows = sorted(data["data"], key=lambda row: row.get("index", 0))
            vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ModelError(
                f"{where}: not an OpenAI-compatible embeddings answer ({type(e).__name__})"
            ) from None
        if vectors.ndim != 2 or len(vectors) != len(texts) or vectors.shape[1] == 0:
            raise ModelError(
                f"{where}: {len(texts)} texts sent, answer shaped {tuple(vectors.shape)}"
            )
        if not np.isfinite(vectors).all():
            raise ModelError(f"{where}: the answer holds values that are not finite numbers")
        with self._lock:
            if self._dim is None:
                self._dim = int(vectors.shape[1])
            elif vectors.shape[1] != self._dim:
                raise ModelError(
                    f"{where}: the server answered {vectors.shape[1]}-dimensional vectors, "
                    f"{self._dim} before (another model behind the same name?)"
                )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


_embedders: dict[tuple, OpenAIEmbedder] = {}
_embedders_lock = threading.Lock()


def openai_embedder(cfg: Any, name: str) -> OpenAIEmbedder:
    """The embedder for ``name`` (``openai:<model>``) in an EmbeddingConfig, one per
    configuration per process."""
    base_url, key_env = _base(cfg)
    key = (name, base_url, key_env, cfg.query_prefix, cfg.passage_prefix)
    with _embedders_lock:
        found = _embedders.get(key)
        if found is None:
            found = _embedders[key] = OpenAIEmbedder(name, base_url, key_env, *key[3:])
        return found


def openai_space_id(cfg: Any, name: str) -> str:
    """The vector space id of ``name`` without asking the server."""
    return space_id(name, _base(cfg)[0])


__all__ = ["OpenAIEmbedder", "is_openai", "openai_embedder", "openai_space_id"]
