"""The stripped corpus of a project: a copy with the documentation the queries come from
removed, so no span holds a query word for word.

- Python: the docstring of every def and class (``llmc.docstrings.strip_docstrings``, by
  ``ast``, any quoting). Whole docstring lines are removed, so lines shift: judgments name
  symbols and the runner anchors them in the index;
- JavaScript/TypeScript (``.js .mjs .cjs .jsx .ts .tsx``): every ``/** ... */`` block that
  starts a line becomes blank lines (``strip_jsdoc``; line numbers stay);
- build output is left out: ``*.min.js``, source maps, and a top-level ``dist/`` when the
  package also ships ``src/`` or ``lib/`` (bundles of the same code a checkout would not
  hold). Tests and everything else stay: they compete in the ranking as in a real repo.

The copy lives under ``<eval cache>/protocol/<name>-<version>/corpus`` with a marker naming
the archive's sha256 and ``CORPUS_VERSION``; it is rebuilt when either changes.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from llmc.corpora import git_init
from llmc.docstrings import strip_docstrings as strip_python_docstrings
from llmc.eval.projects import MARKER

log = logging.getLogger(__name__)

CORPUS_VERSION = "2"
CORPUS_MARKER = ".llmc-protocol-corpus"
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx")
_JSDOC = re.compile(r"(?m)^[ \t]*/\*\*(?!/)[\s\S]*?\*/")
_SKIP_DIRS = {".git", ".llmc", "node_modules", "__pycache__"}


def strip_jsdoc(text: str) -> str:
    """``text`` with every ``/** ... */`` block that starts a line replaced by as many
    blank lines (other comments, and ``/**`` inside strings, stay)."""
    return _JSDOC.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def is_build_output(path: str, top_dirs: frozenset[str]) -> bool:
    """Minified files, source maps, and ``dist/`` when ``src/`` or ``lib/`` exists."""
    pure = PurePosixPath(path)
    name = pure.name.lower()
    if name.endswith((".min.js", ".min.mjs", ".min.cjs", ".map")):
        return True
    return len(pure.parts) > 1 and pure.parts[0] == "dist" and bool({"src", "lib"} & top_dirs)


def strip_text(path: str, text: str) -> str:
    """The corpus text of one file."""
    if path.endswith((".py", ".pyi")):
        return strip_python_docstrings(text)
    if path.endswith(JS_SUFFIXES):
        return strip_jsdoc(text)
    return text


def source_files(root: Path) -> list[str]:
    """Every regular file of ``root`` (repo-relative, posix, sorted), build output left out."""
    top_dirs = frozenset(p.name for p in root.iterdir() if p.is_dir())
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file() or name in (MARKER, CORPUS_MARKER):
                continue
            rel = full.relative_to(root).as_posix()
            if not is_build_output(rel, top_dirs):
                out.append(rel)
    return sorted(out)


def build_corpus(source: Path, dest: Path, stamp: str) -> Path:
    """The stripped copy of ``source`` at ``dest`` (reused when its marker says ``stamp``
    and ``CORPUS_VERSION``); built in a temporary directory, then renamed into place."""
    marker = dest / CORPUS_MARKER
    want = f"{CORPUS_VERSION} {stamp}"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == want:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".corpus-", dir=dest.parent) as tmp:
        out = Path(tmp) / "corpus"
        files = source_files(source)
        for rel in files:
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            data = (source / rel).read_bytes()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                target.write_bytes(data)
                continue
            target.write_text(strip_text(rel, text), encoding="utf-8", newline="")
        replace_corpus(out, dest, CORPUS_MARKER, want)
    log.info("built the stripped corpus of %s at %s (%d files)", source.name, dest, len(files))
    return dest


def replace_corpus(out: Path, dest: Path, marker: str, stamp: str) -> None:
    """Make the freshly built ``out`` a git work tree stamped ``stamp`` in ``marker`` (both
    markers git-ignored), then put it in ``dest``'s place, keeping ``dest``'s index:
    re-indexing a rebuilt corpus is incremental."""
    git_init(out, MARKER, marker)
    (out / marker).write_text(stamp + "\n", encoding="utf-8")
    if (dest / ".llmc").is_dir():
        (dest / ".llmc").rename(out / ".llmc")
    if dest.exists():
        shutil.rmtree(dest)
    out.rename(dest)


__all__ = [
    "CORPUS_MARKER",
    "replace_corpus",
    "CORPUS_VERSION",
    "build_corpus",
    "is_build_output",
    "source_files",
    "strip_jsdoc",
    "strip_python_docstrings",
    "strip_text",
]
