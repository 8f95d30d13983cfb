"""Shipped eval sets and the open-source projects they are judged against.

A set over a project is ``llmc/eval/sets/<name>-<version>.jsonl``; its line numbers refer
to that exact sdist, so the version is pinned and the archive's sha256 is checked. The
project is fetched at run time with ``pip download --no-deps --no-binary :all:`` (PyPI) or
``npm pack NAME@VERSION`` (npm, for the protocol's JavaScript projects), unpacked into the
cache (``eval.cache_dir``, default ``$XDG_CACHE_HOME/llmc/eval``) and indexed there; later
runs reuse both. ``llmc.jsonl`` is judged against the llmc checkout itself.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from llmc.errors import EvalError

log = logging.getLogger(__name__)

SETS_DIR = Path(__file__).parent / "sets"
MARKER = ".llmc-eval-source"
SELF_SET = "llmc"
PYPI, NPM = "pypi", "npm"


@dataclass(frozen=True)
class Project:
    """A pinned archive an eval set is judged against: a PyPI sdist or an npm tarball."""

    name: str
    version: str
    sha256: str
    ecosystem: str = PYPI  # PYPI | NPM

    @property
    def set_name(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def requirement(self) -> str:
        sep = "@" if self.ecosystem == NPM else "=="
        return f"{self.name}{sep}{self.version}"


# Never the pallets projects (flask, click, werkzeug, jinja2, itsdangerous, markupsafe):
# they are reserved for independent evaluation.
PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project(
            "attrs", "25.3.0", "75d7cefc7fb576747b2c81b4442d4d4a1ce0900973527c011d1030fd3bf4af1b"
        ),
        Project(
            "marshmallow",
            "3.26.1",
            "e6d8affb6cb61d39d26402096dc0aee12d5a26d490a121f118d2e81dc0719dc6",
        ),
    )
}
RESERVED = frozenset({"flask", "click", "werkzeug", "jinja2", "itsdangerous", "markupsafe"})


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
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmc" / "eval"


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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_download(requirement: str, dest: Path) -> None:
    """``pip download`` one sdist, no dependencies, into ``dest``."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "--quiet", "-d", str(dest), requirement,
    ]  # fmt: skip
    log.info("fetching %s: %s", requirement, " ".join(cmd))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        raise EvalError(f"cannot run pip to fetch {requirement}: {e}") from None
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise EvalError(f"pip download {requirement} failed: {' / '.join(tail)}")


def npm_pack(requirement: str, dest: Path) -> None:
    """``npm pack NAME@VERSION``: the package's published tarball into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["npm", "pack", "--silent", "--ignore-scripts", requirement]
    log.info("fetching %s: %s", requirement, " ".join(cmd))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=dest)
    except (OSError, subprocess.SubprocessError) as e:
        raise EvalError(f"cannot run npm to fetch {requirement}: {e}") from None
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise EvalError(f"npm pack {requirement} failed: {' / '.join(tail)}")


DOWNLOADERS: dict[str, Callable[[str, Path], None]] = {PYPI: pip_download, NPM: npm_pack}


def _safe_members(names: list[str]) -> str:
    """The archive's single top directory; refuse absolute or escaping member names."""
    tops = set()
    for name in names:
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts:
            raise EvalError(f"refusing archive member {name!r}")
        if pure.parts:
            tops.add(pure.parts[0])
    if len(tops) != 1:
        raise EvalError(f"expected one top-level directory in the sdist, found {sorted(tops)}")
    return tops.pop()


def extract_sdist(archive: Path, dest: Path) -> Path:
    """Unpack ``archive`` (.tar.gz or .zip) into ``dest``; returns the top directory."""
    if archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tf:
            members = tf.getmembers()
            top = _safe_members([m.name for m in members])
            for m in members:
                if m.issym() or m.islnk() or not (m.isfile() or m.isdir()):
                    raise EvalError(f"{archive.name}: refusing non-regular member {m.name!r}")
            tf.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    elif archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            top = _safe_members(zf.namelist())
            zf.extractall(dest)
    else:
        raise EvalError(f"{archive.name}: unknown archive type")
    return dest / top


def fetch_project(
    project: Project,
    cache_dir: Path,
    download: Callable[[str, Path], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> Path:
    """The unpacked archive of ``project`` under ``cache_dir``, downloaded on first use
    (by ``download``, default the project's ecosystem's: ``pip_download``, ``npm_pack``)."""
    root = cache_dir / project.set_name
    marker = root / MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == project.sha256:
        return root
    if download is None:
        if project.ecosystem not in DOWNLOADERS:
            raise EvalError(f"{project.name}: unknown ecosystem {project.ecosystem!r}")
        download = DOWNLOADERS[project.ecosystem]
    if note is not None:
        where = "npm" if project.ecosystem == NPM else "PyPI"
        note(f"fetching {project.requirement} from {where} into {cache_dir}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{project.set_name}-", dir=cache_dir) as tmp:
        tmp_path = Path(tmp)
        download(project.requirement, tmp_path / "dl")
        archives = sorted((tmp_path / "dl").glob("*")) if (tmp_path / "dl").is_dir() else []
        if len(archives) != 1:
            raise EvalError(
                f"expected one sdist for {project.requirement}, got "
                f"{[a.name for a in archives] or 'none'}"
            )
        digest = file_sha256(archives[0])
        if digest != project.sha256:
            raise EvalError(
                f"{archives[0].name}: sha256 {digest} does not match the pinned "
                f"{project.sha256}; the set's line numbers would not fit"
            )
        top = extract_sdist(archives[0], tmp_path / "src")
        git_init(top)
        (top / MARKER).write_text(project.sha256 + "\n", encoding="utf-8")
        if marker.is_file() and marker.read_text(encoding="utf-8").strip() == project.sha256:
            return root  # another run unpacked it meanwhile (and may be indexing it)
        if root.exists():
            shutil.rmtree(root)
        top.rename(root)
    log.info("unpacked %s into %s", project.set_name, root)
    return root


def git_init(root: Path) -> None:
    """Make the unpacked sdist its own git work tree.

    The walker then lists files with git (the sdist's .gitignore applies) even when the
    cache lies inside another repository, where ``git ls-files`` would see nothing.
    """
    try:
        subprocess.run(
            ["git", "init", "-q", str(root)], capture_output=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("git init %s failed (%s); the walker will honour .gitignore itself", root, e)
    info = root / ".git" / "info"
    if info.is_dir():
        (info / "exclude").write_text(f"{MARKER}\n", encoding="utf-8")


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
