"""Models that run each input once, for the many searches of one `llmc tune` run.

Tuning searches the same queries under dozens of candidate weightings: a query's embedding
(and HyDE's hypotheses') and the reranker's score of a (query, passage) pair are the same
under every one. ``MemoModels`` hands search (``Searcher(..., models=...)``, or
``Sources.models``) wrappers around the real models that remember those answers; nothing
outside the searchers it is given to changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llmc.config import EmbeddingConfig, RerankConfig
from llmc.search.sources import Models

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.models.embedder import Embedder
    from llmc.models.reranker import Reranker


class MemoEmbedder:
    """An ``Embedder`` that embeds each list of texts once (a copy is returned each time)."""

    def __init__(self, model: Embedder, cache: dict[tuple, Any]):
        self.model = model
        self.model_id = model.model_id
        self.dim = model.dim
        self._cache = cache

    def __getattr__(self, name: str) -> Any:  # load_seconds, choice, ... of the real model
        return getattr(self.model, name)

    def _memo(self, kind: str, texts: Sequence[str], run: Callable[[], np.ndarray]) -> np.ndarray:
        key = (kind, self.model_id, tuple(texts))
        if key not in self._cache:
            self._cache[key] = run()
        return self._cache[key].copy()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._memo("queries", texts, lambda: self.model.embed_queries(texts))

    def embed_passages(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        if progress is not None:  # indexing, not a query: nothing to remember
            return self.model.embed_passages(texts, progress)
        return self._memo("passages", texts, lambda: self.model.embed_passages(texts))


class MemoReranker:
    """A ``Reranker`` that scores each (query, passage) pair once."""

    def __init__(self, model: Reranker, cache: dict[tuple, Any]):
        self.model = model
        self.model_id = model.model_id
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def score(self, query: str, texts: list[str]) -> list[float]:
        key = ("rerank", self.model_id, query)
        missing = list(dict.fromkeys(t for t in texts if (*key, t) not in self._cache))
        if missing:
            for t, v in zip(missing, self.model.score(query, missing), strict=True):
                self._cache[(*key, t)] = v
        return [self._cache[(*key, t)] for t in texts]


class MemoModels(Models):
    """Search's models (``base``, default the process-wide ones), each behind a memo; one
    cache for all, so every searcher built with this object shares what was computed."""

    def __init__(self, base: Models | None = None):
        self.base = base or Models()
        self.cache: dict[tuple, Any] = {}

    def embedder(self, cfg: EmbeddingConfig, category: str) -> Embedder:
        return MemoEmbedder(self.base.embedder(cfg, category), self.cache)

    def reranker(self, cfg: RerankConfig) -> Reranker:
        return MemoReranker(self.base.reranker(cfg), self.cache)


__all__ = ["MemoEmbedder", "MemoModels", "MemoReranker"]
