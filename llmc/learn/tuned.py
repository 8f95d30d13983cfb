"""Writing and removing what `llmc tune` leaves in ``.llmc/tuned/``.

Search reads it through ``llmc.search.tuned`` (the overlay, the file format); the names
it defines are re-exported here for the training side.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmc.search.tuned import (
    FORMAT,
    IN_DIR,
    INTENT_FILE,
    TUNABLE_KEYS,
    TUNED_FILE,
    TunedOverlay,
    apply_params,
    configured_dir,
    read_tuned,
    tuned_path,
)


def write_tuned(
    directory: Path,
    data: Mapping[str, Any],
    intent: Any = None,
    attachments: Mapping[str, Path] | None = None,
) -> Path:
    """Write a tuned state into a fresh ``directory`` (replaced whole, never half-written);
    ``attachments`` (name → directory, e.g. a fine-tuned model) are copied in."""
    directory = Path(directory)
    stage = directory.with_name(f".{directory.name}.{os.getpid()}.new")
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    for name, src in (attachments or {}).items():
        shutil.copytree(src, stage / name)
    body = dict(data)
    body["format"] = FORMAT
    if intent is not None:
        (stage / INTENT_FILE).write_text(json.dumps(intent.to_json(), indent=1), encoding="utf-8")
        body["intent_model"] = INTENT_FILE
    else:
        body["intent_model"] = None
    (stage / TUNED_FILE).write_text(json.dumps(body, indent=1, default=str), encoding="utf-8")
    old = directory.with_name(f".{directory.name}.{os.getpid()}.old")
    if directory.exists():
        os.replace(directory, old)
    os.replace(stage, directory)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    return directory


def reset_tuned(root: Path, cfg: Any = None) -> bool:
    """Remove the tuned state; whether there was one."""
    directory = tuned_path(Path(root), configured_dir(cfg) if cfg is not None else "")
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True


__all__ = [
    "IN_DIR",
    "TUNABLE_KEYS",
    "TUNED_FILE",
    "TunedOverlay",
    "apply_params",
    "read_tuned",
    "reset_tuned",
    "tuned_path",
    "write_tuned",
]
