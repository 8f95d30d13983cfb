"""Where things live: the repository root and its `.llmc/` directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from llmc.errors import LlmcError

STATE_DIR = ".llmc"
DB_NAME = "index.db"
LEXICAL_DIR = "lexical"
GRAPH_NAME = "rag_graph.json"
LOCK_NAME = "index.lock"


def find_repo_root(start: Path | None = None) -> Path:
    """The git top level above ``start``, else the nearest dir with `.llmc/`, else ``start``."""
    here = Path(start or Path.cwd()).resolve()
    if not here.exists():
        raise LlmcError(f"{here}: no such directory")
    if not here.is_dir():
        raise LlmcError(f"{here}: not a directory")
    if start is not None:
        return here
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip()).resolve()
    except (OSError, subprocess.SubprocessError):
        pass
    for parent in (here, *here.parents):
        if (parent / STATE_DIR).is_dir():
            return parent
    return here


def state_dir(root: Path) -> Path:
    return root / STATE_DIR


def ensure_state_dir(root: Path) -> Path:
    """Create ``.llmc/`` with a ``.gitignore`` of ``*`` so git never sees the index."""
    path = root / STATE_DIR
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# created by llmc: the index is local state\n*\n", encoding="utf-8")
    return path


def db_path(root: Path) -> Path:
    return root / STATE_DIR / DB_NAME


def lexical_path(root: Path) -> Path:
    return root / STATE_DIR / LEXICAL_DIR


def graph_path(root: Path) -> Path:
    return root / STATE_DIR / GRAPH_NAME


def lock_path(root: Path) -> Path:
    return root / STATE_DIR / LOCK_NAME


__all__ = [
    "db_path",
    "ensure_state_dir",
    "find_repo_root",
    "graph_path",
    "lexical_path",
    "lock_path",
    "state_dir",
]
