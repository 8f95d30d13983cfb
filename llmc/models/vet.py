"""Model files are checked before anything parses them.

A model file reaches llmc from the user's config (a path), from `llmc tune`'s folder, or
from the packages llmc ships; a repository can no longer name one (llmc/repo_config.py), but
a path can still point at the wrong thing, and a file can be damaged or hostile. So:

- JSON artefacts (ranker trees, the intent model, `tuned.json`) are read by
  ``read_json_bounded``: a regular file (not a FIFO, not ``/dev/zero``), at most a size fixed
  per artefact, then parsed; their structure is validated by their loader (trees: bounded
  counts and depth, children strictly after their parent, so no cycle). Files under
  ``.llmc/`` (``tuned.json``, its intent model) are opened ``O_NOFOLLOW`` and must be the
  user's; a path the user names may be a link.
- A GGUF file's header is checked (``check_gguf``) before llama.cpp's parser sees it: the
  magic, a known version, tensor and metadata counts that fit the file's size.
- A model folder loaded by sentence-transformers or transformers (``check_model_folder``;
  a hub name: its cached snapshot, when there is one): every folder with weights has them in
  safetensors (pickled ``pytorch_model.bin`` / ``*.pt`` / ``*.ckpt`` alone are refused:
  unpickling runs code), no config file (``config.json``, ``tokenizer_config.json``,
  ``sentence_bert_config.json``, a module's) with ``auto_map`` (it names remote code to
  import), ``trust_remote_code`` or an activation outside ``torch.nn``, and a
  ``modules.json`` whose module classes are sentence-transformers' own. Only the folder and
  its first level are listed (at most 1,000 entries each: ``rerank.model = "~"`` is not
  walked). The loaders also pass ``trust_remote_code=False`` and ``use_safetensors=True``.

Each refusal is a ``ModelError`` with one line naming the file and what is wrong.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import re
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
# A module class of sentence-transformers' own: dotted names under its package only.
ST_MODULE = re.compile(r"sentence_transformers(\.[A-Za-z_][A-Za-z0-9_]*)+")
# Model folders: config files read for what they ask to run (config.json,
# tokenizer_config.json, preprocessor_config.json, sentence_bert_config.json, ...): the
# largest tokenizer configs are a few MB (added tokens, chat templates); a folder holds a
# few dozen entries (a hub snapshot, sentence-transformers' module folders).
CONFIG_SUFFIX = "config.json"
MAX_CONFIG_BYTES = 16 * MIB
MAX_FOLDER_ENTRIES = 1000


def _open_regular(path: Path, what: str, follow: bool = True) -> int:
    """A read-only descriptor of ``path`` when it is a regular file; a FIFO or device never
    blocks (``O_NONBLOCK``). ``follow``: a path the user named may be a link (theirs to
    make: the Hugging Face cache is made of them); a file under ``.llmc/`` may not
    (``follow=False``: ``O_NOFOLLOW``, and it must be this user's)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise ModelError(f"{what} {path} is a symbolic link: not followed") from None
        raise ModelError(f"{what} {path} unreadable ({e.strerror or e})") from None
    st = os.fstat(fd)
    problem = ""
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif not follow and st.st_uid != os.getuid():
        problem = "belongs to another user"
    if problem:
        os.close(fd)
        raise ModelError(f"{what} {path} {problem}")
    os.set_blocking(fd, True)
    return fd


def read_json_bounded(path: Path | str, max_bytes: int, what: str, follow: bool = True) -> Any:
    """The parsed JSON at ``path``: a regular file of at most ``max_bytes`` (``follow``:
    see ``_open_regular``); ModelError (one line) when it is not a regular file, too big,
    not UTF-8 or not JSON."""
    path = Path(path)
    fd = _open_regular(path, what, follow)
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ModelError(f"{what} {path} is over {max_bytes // KIB:,} KiB: not read")
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelError(f"{what} {path} is not valid JSON ({e})") from None


def check_gguf(path: Path | str) -> None:
    """Refuse a file that cannot be a GGUF model before llama.cpp parses it: the fixed
    header here, then every metadata entry and tensor info (``gguf_header.walk``)."""
    from llmc.models.gguf_header import walk

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
                f"GGUF model {path}: {tensors:,} tensors and {kvs:,} metadata entries do not "
                f"fit in {size:,} bytes (damaged or not a model)"
            )
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            walk(buf, GGUF_HEADER.size, tensors, kvs, f"GGUF model {path}")


def check_model_folder(folder: Path | str) -> None:
    """Refuse a model folder that would run code on load (see the module doc). ``folder``
    is a local path, or a hub name whose cached snapshot is checked (one not cached yet is
    left to the loader, which runs with ``trust_remote_code=False`` and safetensors only)."""
    folder = Path(folder)
    if not folder.exists():
        folder = _cached_snapshot(str(folder)) or folder
    if not folder.is_dir():
        return  # a hub name not cached, or a single file: the loader says what it is
    modules = folder / "modules.json"
    paths = [""]
    if modules.is_file():
        paths += _check_modules(folder, read_json_bounded(modules, 1 * MIB, "model modules.json"))
    for sub in [folder, *(p for p in _listing(folder) if p.is_dir())]:
        _check_weights(folder, sub)
    for sub in dict.fromkeys(folder / p for p in paths):
        for config in (p for p in _listing(sub) if p.name.endswith(CONFIG_SUFFIX)):
            problem = _config_problem(read_json_bounded(config, MAX_CONFIG_BYTES, "model config"))
            if problem:
                raise ModelError(f"model folder {folder}: {config.relative_to(folder)} {problem}")


def _listing(directory: Path) -> list[Path]:
    """The entries of ``directory``, at most ``MAX_FOLDER_ENTRIES`` (``rerank.model =
    "~"`` must not walk a home folder)."""
    if not directory.is_dir():
        return []
    out: list[Path] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if len(out) == MAX_FOLDER_ENTRIES:
                raise ModelError(
                    f"{directory} holds over {MAX_FOLDER_ENTRIES:,} entries: not a model folder"
                )
            out.append(Path(entry.path))
    return out


def _check_weights(folder: Path, sub: Path) -> None:
    """Each folder that holds weights holds them in safetensors (a pickled file beside a
    safetensors one is never read: transformers and sentence-transformers prefer it, and
    the loaders ask for it)."""
    names = [p.name for p in _listing(sub)]
    pickled = sorted(n for n in names if n.endswith(PICKLED))
    if pickled and not any(n.endswith(".safetensors") for n in names):
        where = "" if sub == folder else f" ({sub.name}/)"
        raise ModelError(
            f"model folder {folder}{where} has only pickled weights ({', '.join(pickled[:3])}); "
            "llmc loads safetensors only (unpickling runs code)"
        )


def _config_problem(data: Any) -> str:
    """What makes a model's config file ask for code of its own, or ''."""
    if not isinstance(data, dict):
        return ""
    if data.get("auto_map"):
        return "names remote code (auto_map); llmc does not run a model's own code"
    nested = [data, *(v for v in data.values() if isinstance(v, dict))]
    if any(d.get("trust_remote_code") for d in nested):
        return "asks for trust_remote_code; llmc does not run a model's own code"
    activation = data.get("activation_function")  # a Dense module's class ("gelu": a name)
    if isinstance(activation, str) and "." in activation and not activation.startswith("torch.nn."):
        return f"names activation {activation!r}, not a torch.nn class"
    return ""


def _cached_snapshot(name: str) -> Path | None:
    """The local snapshot of hub model ``name`` if the Hugging Face cache holds one."""
    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, not a hub name: the loader decides
        return None


def _check_modules(folder: Path, data: Any) -> list[str]:
    """The module folders (relative) ``modules.json`` names, after checking its classes."""
    if not isinstance(data, list):
        raise ModelError(f"model folder {folder}: modules.json is not a list of modules")
    paths = []
    for entry in data:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or not ST_MODULE.fullmatch(kind):
            raise ModelError(
                f"model folder {folder}: modules.json names {kind!r}, not a "
                "sentence-transformers module; llmc imports no other class"
            )
        path = entry.get("path", "")
        if not isinstance(path, str) or Path(path).is_absolute() or ".." in Path(path).parts:
            raise ModelError(f"model folder {folder}: modules.json path {path!r} leaves it")
        paths.append(path)
    return paths


__all__ = ["check_gguf", "check_model_folder", "read_json_bounded"]
