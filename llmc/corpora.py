"""Pinned open-source projects: which ones, and how one is fetched and cached.

Eval sets and the training runs both read real projects: a pinned archive (name, version,
sha256) from PyPI (``pip download --no-deps --no-binary :all:``, an sdist) or npm
(``npm pack NAME@VERSION``, the published tarball). ``fetch`` downloads it once, checks
its sha256, unpacks it under a cache directory (``$XDG_CACHE_HOME/llmc/<kind>``, default
``~/.cache/llmc/<kind>``), makes it its own git work tree and leaves a marker holding the
sha256; later runs (offline too) reuse it.

Which projects are kept away from what: the pallets projects are reserved for
independent evaluation (never an eval set, never trained on), and the projects of
llmc's shipped search eval sets (``EVAL_SET_PROJECTS``) are never trained on. Errors are
raised as the caller's own ``LlmcError`` subclass (``error=``), so eval says EvalError and
training TrainError.
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

from llmc.errors import LlmcError

log = logging.getLogger(__name__)

PYPI, NPM = "pypi", "npm"
PALLETS = frozenset({"flask", "click", "werkzeug", "jinja2", "itsdangerous", "markupsafe"})

Download = Callable[[str, Path], None]


@dataclass(frozen=True)
class Project:
    """A pinned archive: a PyPI sdist or an npm tarball (``sha256`` empty: not pinned)."""

    name: str
    version: str
    sha256: str = ""
    ecosystem: str = PYPI  # PYPI | NPM

    @property
    def dir_name(self) -> str:
        """``name-version``: its directory in a cache (and the name of its eval set)."""
        return f"{self.name}-{self.version}"

    set_name = dir_name

    @property
    def requirement(self) -> str:
        sep = "@" if self.ecosystem == NPM else "=="
        return f"{self.name}{sep}{self.version}"


# The projects llmc's shipped search eval sets (llmc/eval/sets/<name>-<version>.jsonl) are
# judged against; their line numbers refer to exactly these archives.
EVAL_SET_PROJECTS: tuple[Project, ...] = (
    Project("attrs", "25.3.0", "75d7cefc7fb576747b2c81b4442d4d4a1ce0900973527c011d1030fd3bf4af1b"),
    Project(
        "marshmallow", "3.26.1", "e6d8affb6cb61d39d26402096dc0aee12d5a26d490a121f118d2e81dc0719dc6"
    ),
)


def reserved_for_eval() -> frozenset[str]:
    """Project names no training run may use: pallets, and every shipped eval set's."""
    return PALLETS | {p.name for p in EVAL_SET_PROJECTS}


def default_cache_dir(kind: str, configured: str = "") -> Path:
    """``configured`` if set, else ``$XDG_CACHE_HOME/llmc/<kind>`` (``eval``, ``train``)."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmc" / kind


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run_fetcher(
    cmd: list[str], requirement: str, tool: str, error: type[LlmcError], cwd: Path | None = None
) -> None:
    """Run ``cmd`` (``tool`` names it in errors, ``pip download`` or ``npm pack``)."""
    log.info("fetching %s: %s", requirement, " ".join(cmd))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd)
    except (OSError, subprocess.SubprocessError) as e:
        raise error(f"cannot run {tool.split()[0]} to fetch {requirement}: {e}") from None
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise error(f"{tool} {requirement} failed: {' / '.join(tail)}")


def pip_download(requirement: str, dest: Path, error: type[LlmcError] = LlmcError) -> None:
    """``pip download`` one sdist, no dependencies, into ``dest``."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "--quiet", "-d", str(dest), requirement,
    ]  # fmt: skip
    _run_fetcher(cmd, requirement, "pip download", error)


def npm_pack(requirement: str, dest: Path, error: type[LlmcError] = LlmcError) -> None:
    """``npm pack NAME@VERSION``: the package's published tarball into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["npm", "pack", "--silent", "--ignore-scripts", requirement]
    _run_fetcher(cmd, requirement, "npm pack", error, cwd=dest)


DOWNLOADERS: dict[str, Callable[..., None]] = {PYPI: pip_download, NPM: npm_pack}


def _archive_top(names: list[str], error: type[LlmcError]) -> str:
    """The archive's single top directory; refuse absolute or escaping member names."""
    tops = set()
    for name in names:
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts:
            raise error(f"refusing archive member {name!r}")
        if pure.parts:
            tops.add(pure.parts[0])
    if len(tops) != 1:
        raise error(f"expected one top-level directory in the sdist, found {sorted(tops)}")
    return tops.pop()


def extract_archive(archive: Path, dest: Path, error: type[LlmcError] = LlmcError) -> Path:
    """Unpack ``archive`` (.tar.gz, .tgz, .tar.bz2, .tar or .zip) into ``dest``; returns its
    top directory. Links, devices and members escaping ``dest`` are refused."""
    if archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tf:
            members = tf.getmembers()
            top = _archive_top([m.name for m in members], error)
            for m in members:
                if m.issym() or m.islnk() or not (m.isfile() or m.isdir()):
                    raise error(f"{archive.name}: refusing non-regular member {m.name!r}")
            tf.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    elif archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            top = _archive_top(zf.namelist(), error)
            zf.extractall(dest)
    else:
        raise error(f"{archive.name}: unknown archive type")
    return dest / top


def git_init(root: Path, *exclude: str) -> None:
    """Make the unpacked archive its own git work tree, ignoring ``exclude`` (our markers).

    llmc's walker then lists its files with git (its own .gitignore applies) even when the
    cache lies inside another repository, where ``git ls-files`` would see nothing.
    """
    try:
        subprocess.run(
            ["git", "init", "-q", str(root)], capture_output=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("git init %s failed (%s); the walker will honour .gitignore itself", root, e)
    info = root / ".git" / "info"
    if info.is_dir() and exclude:
        (info / "exclude").write_text("".join(f"{e}\n" for e in exclude), encoding="utf-8")


def source_sha256(root: Path, marker: str) -> str:
    """The sha256 of the archive ``root`` was unpacked from ("" if unknown)."""
    try:
        return (root / marker).read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _cached(root: Path, marker: str, project: Project) -> bool:
    recorded = source_sha256(root, marker)
    return bool(recorded) and (not project.sha256 or recorded == project.sha256)


def fetch(
    project: Project,
    cache_dir: Path,
    *,
    marker: str,
    error: type[LlmcError] = LlmcError,
    download: Download | None = None,
    note: Callable[[str], None] | None = None,
) -> Path:
    """The unpacked archive of ``project`` at ``cache_dir/<name>-<version>``, downloaded on
    first use (by ``download``, default the ecosystem's: ``pip_download``, ``npm_pack``).

    A pinned project's archive must match its sha256; an unpinned one is fetched with a
    warning naming the sha256 it got. ``marker`` (a file in the unpacked root) records the
    sha256, so a later call finds it without the network."""
    root = cache_dir / project.dir_name
    if _cached(root, marker, project):
        return root
    if download is None:
        if project.ecosystem not in DOWNLOADERS:
            raise error(f"{project.name}: unknown ecosystem {project.ecosystem!r}")
        fetcher = DOWNLOADERS[project.ecosystem]

        def download(requirement: str, dest: Path) -> None:
            fetcher(requirement, dest, error)

    if note is not None:
        where = "npm" if project.ecosystem == NPM else "PyPI"
        note(f"fetching {project.requirement} from {where} into {cache_dir}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{project.dir_name}-", dir=cache_dir) as tmp:
        tmp_path = Path(tmp)
        download(project.requirement, tmp_path / "dl")
        archives = sorted((tmp_path / "dl").glob("*")) if (tmp_path / "dl").is_dir() else []
        if len(archives) != 1:
            raise error(
                f"expected one sdist for {project.requirement}, got "
                f"{[a.name for a in archives] or 'none'}"
            )
        digest = file_sha256(archives[0])
        if project.sha256 and digest != project.sha256:
            raise error(
                f"{archives[0].name}: sha256 {digest} does not match the pinned {project.sha256}"
            )
        if not project.sha256:
            log.warning("%s is not pinned; fetched sha256 %s", project.requirement, digest)
        top = extract_archive(archives[0], tmp_path / "src", error)
        git_init(top, marker)
        (top / marker).write_text(digest + "\n", encoding="utf-8")
        if _cached(root, marker, project):
            return root  # another run unpacked it meanwhile (and may be indexing it)
        if root.exists():
            shutil.rmtree(root)
        top.rename(root)
    log.info("unpacked %s into %s", project.requirement, root)
    return root


__all__ = [
    "EVAL_SET_PROJECTS",
    "NPM",
    "PALLETS",
    "PYPI",
    "Project",
    "default_cache_dir",
    "extract_archive",
    "fetch",
    "file_sha256",
    "git_init",
    "npm_pack",
    "pip_download",
    "reserved_for_eval",
    "source_sha256",
]
