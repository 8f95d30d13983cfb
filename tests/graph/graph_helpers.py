"""Helpers for the graph tests: fixture repositories with known graphs, and a way to fill a
store the way the indexer does (spans from the real chunker, no embeddings).

Test modules import the fixtures from here (``from graph_helpers import ...``): a second
``conftest.py`` would shadow the top-level one that other suites import by name. The
projects under ``fixtures/`` have no ``test_*.py`` or ``conftest.py`` files, so pytest
never collects them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from llmc.config import IndexConfig
from llmc.graph.extract import extract_file
from llmc.graph.model import FileFacts
from llmc.graph.resolve import Resolver
from llmc.index.chunk import chunk_file
from llmc.languages import detect_language
from llmc.paths import db_path
from llmc.store.db import Store
from llmc.types import text_hash

FIXTURES = Path(__file__).parent / "fixtures"


def project_files(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith(".llmc/"):
            out[rel] = p.read_text(encoding="utf-8")
    return out


def facts_of(root: Path) -> dict[str, FileFacts]:
    facts = {}
    for rel, text in project_files(root).items():
        lang, category = detect_language(rel)
        if lang is not None:
            facts[rel] = extract_file(rel, text, lang, category)
    return facts


def resolve_project(root: Path):
    """(nodes, edges, counts) of a fixture project, straight from extraction + resolution."""
    return Resolver(facts_of(root), root).run()


def expected_edges(name: str) -> dict[str, set[tuple[str, str]]]:
    data = json.loads((FIXTURES / f"{name}.expected.json").read_text(encoding="utf-8"))
    return {kind: {tuple(e) for e in edges} for kind, edges in data.items()}


class StoreFiller:
    """Index files into ``.llmc/index.db`` like the indexer: chunk, store spans, no vectors."""

    def __init__(self, root: Path):
        self.root = root
        self.store = Store(db_path(root))
        self.cfg = IndexConfig()

    def put(self, paths: list[str] | None = None) -> list[str]:
        files = project_files(self.root)
        changed = []
        for rel in paths if paths is not None else sorted(files):
            text = files[rel]
            if not text.strip():
                continue  # the indexer skips empty files too
            lang, category = detect_language(rel, text.split("\n", 1)[0])
            spans = chunk_file(rel, text, lang, category, self.cfg)
            st = (self.root / rel).stat()
            self.store.replace_file(
                rel, lang, category, st.st_size, st.st_mtime_ns, text_hash(text), spans,
                [None] * len(spans), self.store.generation + 1,
            )  # fmt: skip
            changed.append(rel)
        return changed

    def remove(self, paths: list[str]) -> None:
        self.store.remove_files(paths)

    def bump(self) -> int:
        return self.store.bump_generation()


def copy_project(tmp_path: Path, name: str) -> Path:
    """A private copy of ``fixtures/<name>`` to index and edit."""
    dest = tmp_path / name
    shutil.copytree(FIXTURES / name, dest)
    return dest


def filler_factory():
    """Body of a ``filler`` fixture: ``filler(root)`` gives a StoreFiller, closed after."""
    made: list[StoreFiller] = []

    def make(root: Path) -> StoreFiller:
        f = StoreFiller(root)
        made.append(f)
        return f

    yield make
    for f in made:
        f.store.close()


def touch_later(path: Path, text: str) -> None:
    """Rewrite a file so that its mtime surely changes (not left to the clock's grain)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    after = path.stat()
    if after.st_mtime_ns <= before:
        os.utime(path, ns=(after.st_atime_ns, before + 1_000_000))


def write_hundred_modules(root: Path) -> Path:
    """A Python package of 100 modules, 8 classes and 8 functions each, every module
    calling into the next: a graph whose every call resolves across files."""
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    for i in range(100):
        body = [f"from app.m{(i + 1) % 100} import f{(i + 1) % 100}_0\n\n"]
        for j in range(8):
            body.append(
                f"class C{i}_{j}:\n    def run(self, x):\n        return f{i}_{j}(x)\n\n"
                f"def f{i}_{j}(x):\n    return f{(i + 1) % 100}_0(x) if x else C{i}_{j}()\n\n"
            )
        (root / "app" / f"m{i}.py").write_text("".join(body))
    return root
