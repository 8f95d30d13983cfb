"""The open-source projects the reranker is trained and held-out-evaluated on.

Each is a pinned PyPI sdist (name, version, sha256), fetched at run time by
``llmc.corpora`` and unpacked under ``$XDG_CACHE_HOME/llmc/train`` (default
``~/.cache/llmc/train``). The pallets projects and the projects of llmc's search eval sets
are refused (``llmc.corpora.reserved_for_eval``): they are reserved for evaluating search,
so no model llmc ships may have seen them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from llmc import corpora
from llmc.corpora import Project
from llmc.errors import TrainError

log = logging.getLogger(__name__)

MARKER = ".llmc-train-source"

# A training project is a pinned archive like any other (sha256 empty: not pinned, a
# project given on the command line as NAME==VERSION).
TrainProject = Project


def _p(name: str, version: str, sha256: str) -> TrainProject:
    return TrainProject(name, version, sha256)


# Pure-Python projects with docstrings and docs (Markdown or reST) in their sdist.
TRAIN_PROJECTS: tuple[TrainProject, ...] = (
    _p("urllib3", "2.2.3", "e7d814a81dad81e6caf2ec9fdedb284ecc9c73076b62654547cc64ccdcae26e9"),
    _p("httpx", "0.27.2", "f7c2be1d2f3c3c3160d441802406b206c2b76f5947b11115e6df10c6c65e66c2"),
    _p("pluggy", "1.5.0", "2cffa88e94fdc978c4c574f15f9e59b7f4201d439195c3715ca9e2486f1d0cf1"),
    _p("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6"),
    _p("boltons", "24.1.0", "4a49b7d57ee055b83a458c8682a2a6f199d263a8aa517098bda9bab813554b87"),
    _p("tornado", "6.4.1", "92d3ab53183d8c50f8204a51e6f91d18a15d5ef261e84d452800d4ff6fc504e9"),
    _p("arrow", "1.3.0", "d4540617648cb5f895730f1ad8c82a65f2dad0166f57b75f3ca54759c4d67a85"),
    _p("mkdocs", "1.6.1", "7b432f01d928c084353ab39c57282f29f92136665bdd6abf7c1ec8d822ef86f2"),
    _p("black", "24.10.0", "846ea64c97afe3bc677b761787993be4991810ecc7a4a937816dd6bddedc4875"),
    _p("trio", "0.27.0", "1dcc95ab1726b2da054afea8fd761af74bad79bd52381b84eae408e983c76831"),
    _p("loguru", "0.7.2", "e671a53522515f34fd406340ee968cb9ecafbc4b36c679da03c18fd8d0bd51ac"),
    _p("cachetools", "5.5.0", "2cc24fb4cbe39633fb7badd9db9ca6295d766d9c2995f245725a46715d050f2a"),
    _p("python-dateutil", "2.9.0.post0", "37dd54208da7e1cd875388217d5e00ebd4179249f90fb72437e91a35459a0ad3"),
    _p("networkx", "3.4.2", "307c3669428c5362aab27c8a1260aa8f47c4e91d3891f48be0141738d8d053e1"),
    _p("fsspec", "2024.10.0", "eda2d8a4116d4f2429db8550f2457da57279247dd930bb12f821b58391359493"),
    _p("toolz", "1.0.0", "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02"),
    _p("tenacity", "9.0.0", "807f37ca97d62aa361264d497b0e31e92b8027044942bfa756160d908320d73b"),
    _p("rich", "13.9.4", "439594978a49a09530cff7ebc4b5c7103ef57baf48d5ea3184f21d9a2befa098"),
)  # fmt: skip

# Never trained on: the held-out gains in TRAINING.json are measured on these.
HOLDOUT_PROJECTS: tuple[TrainProject, ...] = (
    _p("anyio", "4.6.2.post1", "4c8bc31ccdb51c7f7bd251f51c609e038d63e34219b44aa86e47576389880b4c"),
    _p("structlog", "24.4.0", "b27bfecede327a6d2da5fbc96bd859f114ecc398a6389d664f62085ee7ae6fc4"),
)  # fmt: skip

_KNOWN = {p.name: p for p in TRAIN_PROJECTS + HOLDOUT_PROJECTS}


# Reserved for llmc's quality evaluation (never fetched, mined, trained or tuned on), beside
# the eval sets' projects of ``llmc.corpora.reserved_for_eval``. requests and pytest were
# train projects until issue 28 took them out.
RESERVED_PROJECTS = frozenset(
    {
        "django", "sympy", "matplotlib", "scikit-learn", "astropy", "sphinx", "xarray",
        "pytest", "pylint", "requests", "seaborn", "flask", "click", "jinja", "jinja2",
        "werkzeug", "itsdangerous", "markupsafe",
    }
)  # fmt: skip


def reserved_names() -> frozenset[str]:
    """Projects no training run may use: pallets, every search eval set's project, and
    the projects reserved for evaluation (``RESERVED_PROJECTS``)."""
    return frozenset(n.lower() for n in corpora.reserved_for_eval()) | RESERVED_PROJECTS


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def parse_project(spec: str) -> TrainProject:
    """``name`` (a pinned project above) or ``name==version`` (fetched unpinned)."""
    name, _, version = spec.partition("==")
    name = _normalise(name)
    if not name:
        raise TrainError(f"{spec!r}: expected NAME or NAME==VERSION")
    if name in reserved_names():
        raise TrainError(f"{name}: reserved for search evaluation; never trained on")
    known = _KNOWN.get(name)
    if not version:
        if known is None:
            raise TrainError(f"{name}: not a pinned project; give NAME==VERSION")
        return known
    if known is not None and known.version == version:
        return known
    return TrainProject(name, version.strip())


def check_allowed(projects: list[TrainProject]) -> None:
    reserved = reserved_names()
    bad = sorted({p.name for p in projects if _normalise(p.name) in reserved})
    if bad:
        raise TrainError(f"reserved for search evaluation, never trained on: {', '.join(bad)}")


def default_cache_dir() -> Path:
    return corpora.default_cache_dir("train")


def fetch(project: TrainProject, cache_dir: Path) -> Path:
    """The unpacked sdist of ``project`` under ``cache_dir``, downloaded on first use."""
    return corpora.fetch(project, cache_dir, marker=MARKER, error=TrainError)


def source_sha256(root: Path) -> str:
    """The sha256 of the sdist ``root`` was unpacked from ("" if unknown)."""
    return corpora.source_sha256(root, MARKER)


__all__ = [
    "HOLDOUT_PROJECTS",
    "RESERVED_PROJECTS",
    "TRAIN_PROJECTS",
    "TrainProject",
    "check_allowed",
    "default_cache_dir",
    "fetch",
    "parse_project",
    "reserved_names",
    "source_sha256",
]
