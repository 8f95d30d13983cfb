"""Model files are checked before anything parses them.

A model file reaches llmc from the user's config (a path), from `llmc tune`'s folder, or
from the packages llmc ships; a repository can no longer name one (llmc/repo_config.py), but
a path can still point at the wrong thing, and a file can be damaged or hostile. So:

- JSON artefacts (ranker trees, the intent model, `tuned.json`) are read by
  ``read_json_bounded``: a regular file (not a FIFO, not ``/dev/zero``), at most a size fixed
  per artefact, then parsed; their structure is validated by their loader (trees: bounded
  counts and depth, children strictly after their parent, so no cycle).
- A GGUF file's header is checked (``check_gguf``) before llama.cpp's parser sees it: the
  magic, a known version, tensor and metadata counts that fit the file's size.
- A model folder loaded by sentence-transformers or transformers (``check_model_folder``):
  weights in safetensors only (pickled ``pytorch_model.bin`` / ``*.pt`` / ``*.ckpt`` alone are
  refused: unpickling runs code), no ``auto_map`` in ``config.json`` (it names remote code to
  import), and a ``modules.json`` whose module classes are sentence-transformers' own. The
  loaders also pass ``trust_remote_code=False``.

Each refusal is a ``ModelError`` with one line naming the file and what is wrong.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

from llmc.errors import ModelError

KIB = 1024
MIB = 1024 * KIB

# GGUF: magic, version (uint32), tensor count (uint64), metadata key-value count (uint64).
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
GGUF_HEADER = struct.Struct("<4sIQQ")
GGUF_MIN_TENSOR_BYTES = 32  # a tensor's info in the header takes at least this many bytes
GGUF_MIN_KV_BYTES = 12  # a metadata entry: key length (8), type (4), then key and value

PICKLED = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
ST_MODULE_PREFIX = "sentence_transformers."


def _open_regular(path: Path, what: str) -> int:
    """A read-only descriptor of ``path`` when it is a regular file (links are the user's
    to make, so they are followed; a FIFO or device never blocks: ``O_NONBLOCK``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ModelError(f"{what} {path} unreadable ({e.strerror or e})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise ModelError(f"{what} {path} is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_json_bounded(path: Path | str, max_bytes: int, what: str) -> Any:
    """The parsed JSON at ``path``: a regular file of at most ``max_bytes``; ModelError
    (one line) when it is not a regular file, too big, not UTF-8 or not JSON."""
    path = Path(path)
    fd = _open_regular(path, what)
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ModelError(f"{what} {path} is over {max_bytes // KIB:,} KiB: not read")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelError(f"{what} {path} is not valid JSON ({e})") from None


def check_gguf(path: Path | str) -> None:
    """Refuse a file that cannot be a GGUF model before llama.cpp parses it."""
    path = Path(path)
    fd = _open_regular(path, "GGUF model")
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(GGUF_HEADER.size)
    if len(head) < GGUF_HEADER.size:
        raise ModelError(f"GGUF model {path} is too short to be one ({size} bytes)")
    magic, version, tensors, kvs = GGUF_HEADER.unpack(head)
    if magic != GGUF_MAGIC:
        raise ModelError(f"GGUF model {path} does not start with GGUF (not a GGUF file)")
    if version not in GGUF_VERSIONS:
        raise ModelError(f"GGUF model {path}: version {version} is not one llmc knows")
    room = size - GGUF_HEADER.size
    if tensors == 0 or tensors * GGUF_MIN_TENSOR_BYTES + kvs * GGUF_MIN_KV_BYTES > room:
        raise ModelError(
            f"GGUF model {path}: {tensors:,} tensors and {kvs:,} metadata entries do not fit "
            f"in {size:,} bytes (damaged or not a model)"
        )


def check_model_folder(folder: Path | str) -> None:
    """Refuse a local model folder that would run code on load (see the module doc)."""
    folder = Path(folder)
    if not folder.is_dir():
        return  # a hub name or a single file: the loader says what it is
    names = {p.name for p in folder.rglob("*") if p.is_file()}
    has_safetensors = any(n.endswith(".safetensors") for n in names)
    pickled = sorted(n for n in names if n.endswith(PICKLED))
    if pickled and not has_safetensors:
        raise ModelError(
            f"model folder {folder} has only pickled weights ({', '.join(pickled[:3])}); "
            "llmc loads safetensors only (unpickling runs code)"
        )
    config = folder / "config.json"
    if config.is_file():
        data = read_json_bounded(config, 4 * MIB, "model config")
        if isinstance(data, dict) and data.get("auto_map"):
            raise ModelError(
                f"model folder {folder}: config.json names remote code (auto_map); llmc "
                "does not run a model's own code"
            )
    modules = folder / "modules.json"
    if modules.is_file():
        _check_modules(folder, read_json_bounded(modules, 1 * MIB, "model modules.json"))


def _check_modules(folder: Path, data: Any) -> None:
    if not isinstance(data, list):
        raise ModelError(f"model folder {folder}: modules.json is not a list of modules")
    for entry in data:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or not kind.startswith(ST_MODULE_PREFIX):
            raise ModelError(
                f"model folder {folder}: modules.json names {kind!r}, not a "
                "sentence-transformers module; llmc imports no other class"
            )
        path = entry.get("path", "")
        if not isinstance(path, str) or Path(path).is_absolute() or ".." in Path(path).parts:
            raise ModelError(f"model folder {folder}: modules.json path {path!r} leaves it")


__all__ = ["check_gguf", "check_model_folder", "read_json_bounded"]
