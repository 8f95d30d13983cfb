"""Shipped eval sets and the open-source projects they are judged against.

A set over a project is ``llmc/eval/sets/<name>-<version>.jsonl``; its line numbers refer
to that exact archive, so the version is pinned and the archive's sha256 is checked
(``llmc.corpora`` holds the pins and fetches: an sdist from PyPI, or a tarball from npm for
the protocol's JavaScript projects). It is unpacked into the cache (``eval.cache_dir``,
default ``$XDG_CACHE_HOME/llmc/eval``) and indexed there; later runs reuse both.
``llmc.jsonl`` is judged against the llmc checkout itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmc import corpora
from llmc.corpora import (
    EVAL_SET_PROJECTS,
    NPM,
    PALLETS,
    PYPI,
    Project,
    file_sha256,
    npm_pack,
    pip_download,
)
from llmc.errors import EvalError

SETS_DIR = Path(__file__).parent / "sets"
MARKER = ".llmc-eval-source"
SELF_SET = "llmc"

# Never the pallets projects (flask, click, werkzeug, jinja2, itsdangerous, markupsafe):
# they are reserved for independent evaluation.
PROJECTS: dict[str, Project] = {p.name: p for p in EVAL_SET_PROJECTS}
RESERVED = PALLETS


@dataclass(frozen=True)
class EvalSet:
    """A resolved set: its queries file, the repository it is judged against, its name."""

    name: str
    queries_path: Path
    root: Path | None  # None: fetch the project (or the caller passes --repo)
    project: Project | None = None


def shipped_sets() -> list[str]:
    """Names of the sets shipped with llmc (``attrs-25.3.0``, ..., ``llmc``)."""
    return sorted(p.stem for p in SETS_DIR.glob("*.jsonl"))


def default_cache_dir(configured: str = "") -> Path:
    """``eval.cache_dir`` if set, else ``$XDG_CACHE_HOME/llmc/eval``."""
    return corpora.default_cache_dir("eval", configured)


def llmc_checkout() -> Path | None:
    """The source checkout the running llmc comes from (an editable install), if any."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    try:
        if 'name = "llmc"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        pass
    return None


def resolve_set(spec: str, repo: Path | None = None) -> EvalSet:
    """A query file path, or a shipped set by name: ``attrs``, ``attrs-25.3.0``, ``llmc``."""
    path = Path(spec)
    if path.suffix == ".jsonl" or path.is_file():
        if not path.is_file():
            raise EvalError(f"{spec}: no such query file")
        return EvalSet(path.stem, path, repo)
    name = spec.lower()
    if name in RESERVED:
        raise EvalError(f"{spec}: the pallets projects are reserved for independent evaluation")
    if name == SELF_SET:
        root = repo or llmc_checkout()
        if root is None:
            raise EvalError(
                "the llmc set is judged against llmc's source checkout; pass --repo DIR"
            )
        return EvalSet(SELF_SET, SETS_DIR / f"{SELF_SET}.jsonl", root)
    for project in PROJECTS.values():
        if name in (project.name, project.set_name):
            return EvalSet(project.set_name, SETS_DIR / f"{project.set_name}.jsonl", repo, project)
    known = ", ".join(shipped_sets())
    raise EvalError(f"{spec}: not a query file or a shipped set (shipped: {known})")


def extract_sdist(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` (.tar.gz or .zip) into ``dest``; returns the top directory."""
    return corpora.extract_archive(archive, dest, EvalError)


def fetch_project(
    project: Project,
    cache_dir: Path,
    download: Callable[[str, Path], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> Path:
    """The unpacked archive of ``project`` under ``cache_dir``, downloaded on first use
    (by ``download``, default the project's ecosystem's: ``pip_download``, ``npm_pack``)."""
    return corpora.fetch(
        project, cache_dir, marker=MARKER, error=EvalError, download=download, note=note
    )


def git_init(root: Path) -> None:
    """Make an unpacked archive (or a corpus made from one) its own git work tree."""
    corpora.git_init(root, MARKER)


__all__ = [
    "NPM",
    "PROJECTS",
    "PYPI",
    "EvalSet",
    "Project",
    "default_cache_dir",
    "extract_sdist",
    "fetch_project",
    "file_sha256",
    "git_init",
    "llmc_checkout",
    "npm_pack",
    "pip_download",
    "resolve_set",
    "shipped_sets",
]
