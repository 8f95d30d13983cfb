"""The learned file ranker at query time: file-level answers (``llmc search --files``, the
daemon's and the MCP tool's ``group: "file"``) reorder the first ``CANDIDATES`` files of
the plain fused order by the shipped model's score (``search.file_ranker = "learned"``).

The model is LightGBM lambdarank trees over ``file_features.FILE_FEATURES``, trained by
``lab.train.file_ranker`` on the train projects' histories only (commit subjects and
long reports → the files their change touched) and shipped as ``learned.FORMAT`` JSON; the
trees are walked with numpy (``learned.RankerModel``), nothing here imports lightgbm or
training code. Chosen on validation projects: docs/reports/2026-11-27-file-ranker-validation.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from llmc.errors import ConfigError, ModelError
from llmc.search.file_features import CANDIDATES, FILE_FEATURES, feature_rows
from llmc.search.learned import RankerModel, load_trees

MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / "file_ranker"
DEFAULT_MODEL = MODEL_DIR / "model.json"
FILE_RANKERS = ("learned", "fusion")

log = logging.getLogger(__name__)
_WARNED: set[str] = set()


def load_file_model(path: Path | None = None) -> RankerModel:
    """The file ranker's model (default: the shipped one), loaded once per file version;
    ModelError when it is missing, unreadable or over features this llmc lacks."""
    return load_trees(path or DEFAULT_MODEL, FILE_FEATURES, "file ranker model",
                      "python -m lab train file-ranker")  # fmt: skip


def configured_model(choice: str) -> RankerModel | None:
    """The model ``search.file_ranker`` asks for: None for ``fusion``, and for ``learned``
    when the shipped model is missing or unreadable (the fused order answers, after one
    warning a process, as the span ranker does)."""
    if choice not in FILE_RANKERS:
        raise ConfigError(
            f"search.file_ranker must be one of {', '.join(FILE_RANKERS)}, got {choice!r}"
        )
    if choice != "learned":
        return None
    try:
        return load_file_model()
    except ModelError as e:
        if str(e) not in _WARNED:
            _WARNED.add(str(e))
            log.warning("%s: file-level answers keep the fused order", e)
        return None


def learned_order(
    model: RankerModel, query: str, span_paths: Sequence[str], whole: Sequence[str],
    order: Sequence[str], plain: Sequence[str] = (),
) -> tuple[list[str], dict[str, float]]:  # fmt: skip
    """``order`` (the plain fused file order) with its first ``CANDIDATES`` files sorted by
    the model's score (ties keep their plain order), the rest after them as they were;
    and the scores."""
    import numpy as np

    head = list(order[:CANDIDATES])
    if len(head) < 2:
        return list(order), {}
    rows = np.asarray(feature_rows(query, span_paths, whole, head, plain), dtype=np.float64)
    scores = model.predict(rows)
    ranked = [head[i] for i in np.argsort(-scores, kind="stable")]
    return ranked + list(order[CANDIDATES:]), {
        p: float(s) for p, s in zip(head, scores, strict=True)
    }


__all__ = [
    "DEFAULT_MODEL",
    "FILE_RANKERS",
    "configured_model",
    "learned_order",
    "load_file_model",
]
