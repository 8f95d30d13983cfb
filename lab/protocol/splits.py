"""The protocol's project splits, read from ``projects.json`` (package data).

Each project is pinned (name, ecosystem, version, sha256 of the archive) and belongs to one
split: ``train`` (the shipped reranker was trained on them), ``validation`` (defaults are
chosen on them) or ``test`` (they report, and never feed a choice). Splitting is by
project, never by query. The pallets projects are reserved and refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from llmc.errors import EvalError
from llmc.eval.projects import NPM, PYPI, RESERVED, Project

PROJECTS_FILE = Path(__file__).parent / "projects.json"
SPLITS = ("train", "validation", "test")
ECOSYSTEMS = (PYPI, NPM)


@dataclass(frozen=True)
class SplitProject:
    """A pinned project and the split it belongs to."""

    project: Project
    split: str

    @property
    def name(self) -> str:
        return self.project.name


def parse_projects(doc: dict) -> tuple[SplitProject, ...]:
    """The projects of a ``projects.json`` document, checked (splits, ecosystems, pins)."""
    out: list[SplitProject] = []
    seen: set[str] = set()
    for i, row in enumerate(doc.get("projects", [])):
        where = f"projects[{i}]"
        try:
            name, eco, version = str(row["name"]), str(row["ecosystem"]), str(row["version"])
            sha, split = str(row["sha256"]), str(row["split"])
        except (KeyError, TypeError) as e:
            raise EvalError(f"{where}: missing key {e}") from None
        if split not in SPLITS:
            raise EvalError(f"{where}: split must be one of {', '.join(SPLITS)}, got {split!r}")
        if eco not in ECOSYSTEMS:
            raise EvalError(f"{where}: ecosystem must be pypi or npm, got {eco!r}")
        if len(sha) != 64:
            raise EvalError(f"{where}: sha256 must be 64 hex digits")
        if name.lower() in RESERVED:
            raise EvalError(f"{where}: {name} is reserved for independent evaluation")
        if name.lower() in seen:
            raise EvalError(f"{where}: {name} is listed twice (a project is in one split)")
        seen.add(name.lower())
        out.append(SplitProject(Project(name, version, sha, eco), split))
    return tuple(out)


@lru_cache(maxsize=1)
def protocol_projects() -> tuple[SplitProject, ...]:
    """Every project of the protocol, in file order."""
    return parse_projects(json.loads(PROJECTS_FILE.read_text(encoding="utf-8")))


def select_projects(split: str, names: Sequence[str] = ()) -> list[SplitProject]:
    """The projects of ``split``, or only those named (each must be in that split)."""
    if split not in SPLITS:
        raise EvalError(f"unknown split {split!r} (known: {', '.join(SPLITS)})")
    in_split = [p for p in protocol_projects() if p.split == split]
    if not names:
        return in_split
    by_name = {p.name.lower(): p for p in protocol_projects()}
    out = []
    for name in names:
        key = name.lower()
        if key in RESERVED:
            raise EvalError(f"{name}: the pallets projects are reserved for independent evaluation")
        if key not in by_name:
            raise EvalError(f"{name}: not a protocol project (see lab/protocol/projects.json)")
        if by_name[key].split != split:
            raise EvalError(f"{name} is in the {by_name[key].split} split, not {split}")
        out.append(by_name[key])
    return out


__all__ = [
    "PROJECTS_FILE",
    "SPLITS",
    "SplitProject",
    "parse_projects",
    "protocol_projects",
    "select_projects",
]
