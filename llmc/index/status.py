"""`llmc status`: how fresh and how big the index is, without writing anything.

It never waits for the writer and never fails because one is at work: while a run is in
progress (``.llmc/progress.json``, ``llmc.index.live``) the status says what that run is
doing and what answers already (``Searchable``): BM25 once the lexical index has a
generation, exact symbols and paths once spans are committed, the graph once
``rag_graph.json`` names the store's generation (``building`` while the run that will write
it holds the lock), vectors n of m. The freshness walk is left out then (the run is doing
it), so a status during a cold index of a large tree costs a few reads, not a walk.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.errors import IndexMissingError
from llmc.index.backfill import Coverage
from llmc.index.generated import Detector
from llmc.index.live import read_live
from llmc.index.walk import read_text, secrets_mode, walk
from llmc.paths import db_path, graph_path, lexical_path, lock_path
from llmc.store.db import Store
from llmc.types import CODE, DOC

GRAPH_HEAD_BYTES = 4096  # rag_graph.json's "graph" attributes come first


@dataclass(frozen=True)
class Searchable:
    """What answers a search now: ``bm25`` and ``exact`` (yes, partial, no), ``graph``
    (yes, building, behind, off, no), and the vectors' coverage."""

    bm25: str
    exact: str
    graph: str
    vectors: Coverage

    def line(self) -> str:
        """``searchable: BM25 yes, exact symbols yes, graph building, vectors 120 of 5,740``."""
        cov = self.vectors
        return (
            f"searchable: BM25 {self.bm25}, exact symbols {self.exact}, graph {self.graph}, "
            f"vectors {cov.embedded:,} of {cov.total:,}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "bm25": self.bm25,
            "exact": self.exact,
            "graph": self.graph,
            "vectors": {"embedded": self.vectors.embedded, "total": self.vectors.total},
            "line": self.line(),
        }


@dataclass
class IndexStatus:
    root: str
    generation: int
    lexical_generation: int
    lexical_fresh: bool
    files: int
    spans: int
    code_spans: int
    doc_spans: int
    cached_vectors: int
    files_by_lang: dict[str, int]
    spans_by_kind: dict[str, int]
    models: dict[str, str]
    device: str
    db_bytes: int
    lexical_bytes: int
    graph_bytes: int
    indexed_at: float | None
    changed_files: list[str] = field(default_factory=list)
    new_files: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    uncommitted_changes: int | None = None
    vectors: Coverage = field(default_factory=lambda: Coverage(0, 0))
    graph_generation: int = -1
    # The run in progress in another process (``.llmc/progress.json``), None when none
    run: dict[str, Any] | None = None
    writer: str | None = None  # who holds the writer lock ("pid 123: llmc index"), if anyone
    searchable: Searchable | None = None

    @property
    def fresh(self) -> bool:
        return (
            self.run is None
            and not (self.changed_files or self.new_files or self.deleted_files)
            and self.lexical_fresh
        )

    @property
    def indexing(self) -> bool:
        return self.run is not None

    def run_lines(self) -> list[str]:
        """While another process indexes: what it does, how far, and what answers now."""
        if self.run is None:
            return []
        r = self.run
        lines = [f"{self.root}: indexing (pid {r['pid']}, {r.get('what') or 'a run'})"]
        lines.append(f"  {r.get('line') or r.get('phase') or 'starting'}")
        if self.searchable is not None:
            lines.append(f"  {self.searchable.line()}")
        lines.append(
            f"  so far: {self.files:,} files, {self.spans:,} spans (generation {self.generation})"
        )
        return lines

    def to_json(self) -> dict:
        out = asdict(self)
        out["fresh"] = self.fresh
        out["indexing"] = self.indexing
        out["vectors"] = self.vectors.to_json()  # dense coverage while vectors backfill
        out["dense"] = self.vectors.line()
        out["searchable"] = self.searchable.to_json() if self.searchable is not None else None
        return out


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return 0


def _uncommitted(root: Path) -> int | None:
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.splitlines() if line.strip())


def index_status(root: Path, cfg: Config) -> IndexStatus:
    from llmc.models.device import pick_device

    run = read_live(root)
    writer = writer_holder(root)
    if run is None and writer is not None:
        run = {"pid": writer[0], "what": writer[1], "line": "phase unknown"}
    try:
        store = Store(db_path(root), readonly=True)
    except IndexMissingError:
        if run is None:
            raise
        return _starting(root, run, writer)  # a cold run, before its first commit
    try:
        counts = store.counts()
        generation = store.generation
        lexical_gen = lexical_generation(root)
        vectors = Coverage.of(store.vector_counts())
        changed: list[str] = []
        new: list[str] = []
        deleted: list[str] = []
        uncommitted = None
        if run is None:  # the run in progress walks the tree itself: no second walk
            changed, new, deleted = _diff(root, cfg, store)
            uncommitted = _uncommitted(root)
        models = {}
        for category in (CODE, DOC):
            space = store.vector_space(category)
            models[category] = f"{space.model_id} ({space.dim}d)" if space else "none"
        indexed_at = store.get_meta("indexed_at")
        try:
            device = pick_device(cfg.embedding.device, cfg.embedding.precision).reason
        except ImportError:
            device = "cpu (torch not installed)"
        device += f"; search profile {_profile(cfg)}"
        wal = Path(str(db_path(root)) + "-wal")
        graph_gen = graph_generation(root)
        return IndexStatus(
            root=str(root),
            generation=generation,
            lexical_generation=lexical_gen,
            lexical_fresh=lexical_gen == generation,
            files=counts["files"],
            spans=counts["spans"],
            code_spans=counts["code_spans"],
            doc_spans=counts["doc_spans"],
            cached_vectors=counts["cached_vectors"],
            files_by_lang=store.group_counts("files", "lang"),
            spans_by_kind=store.group_counts("spans", "kind"),
            models=models,
            device=device,
            db_bytes=_size(db_path(root)) + _size(wal),
            lexical_bytes=_size(lexical_path(root)),
            graph_bytes=_size(graph_path(root)),
            indexed_at=float(indexed_at) if indexed_at else None,
            changed_files=changed,
            new_files=new,
            deleted_files=deleted,
            uncommitted_changes=uncommitted,
            vectors=vectors,
            graph_generation=graph_gen,
            run=run,
            writer=writer[1] if writer else None,
            searchable=searchable(
                generation,
                lexical_gen,
                graph_gen,
                counts["spans"],
                vectors,
                busy=run is not None,
                graph_on=cfg.graph.enabled,
            ),  # fmt: skip
        )
    finally:
        store.close()


def _diff(root: Path, cfg: Config, store: Store) -> tuple[list[str], list[str], list[str]]:
    """Changed (by stat), new (and indexable) and deleted files since the last run."""
    known = store.files()
    walked = walk(root, cfg.index)
    detector = walked.detector or Detector(cfg.index)
    current = {f.path: f for f in walked.files}
    changed = [
        p
        for p, f in current.items()
        if p in known and (known[p].size, known[p].mtime_ns) != (f.size, f.mtime_ns)
    ]
    new = [
        p
        for p in set(current) - set(known)
        if read_text(root, p, detector, secrets_mode(cfg.index)).skipped is None
    ]
    return sorted(changed), sorted(new), sorted(set(known) - set(current))


def _starting(root: Path, run: dict[str, Any], writer: tuple[int, str] | None) -> IndexStatus:
    """A cold run before its first commit: nothing answers yet."""
    nothing = Coverage(0, 0)
    return IndexStatus(
        root=str(root), generation=0, lexical_generation=-1, lexical_fresh=False, files=0,
        spans=0, code_spans=0, doc_spans=0, cached_vectors=0, files_by_lang={},
        spans_by_kind={}, models={CODE: "none", DOC: "none"}, device="", db_bytes=0,
        lexical_bytes=0, graph_bytes=0, indexed_at=None, vectors=nothing, run=run,
        writer=writer[1] if writer else None,
        searchable=Searchable("no", "no", "building", nothing),
    )  # fmt: skip


def searchable(
    generation: int,
    lexical_gen: int,
    graph_gen: int,
    spans: int,
    vectors: Coverage,
    busy: bool,
    graph_on: bool = True,
) -> Searchable:
    """What answers now, from the generations the store and its derived indexes record
    (see the module doc); ``busy``: a run is in progress."""
    if lexical_gen > 0 and lexical_gen == generation:
        bm25 = "yes"
    elif lexical_gen > 0:
        bm25 = "stale" if not busy else "yes, without this run's changes yet"
    else:
        bm25 = "no"
    if spans == 0:
        exact = "no"
    elif busy and lexical_gen < generation:
        exact = "partial"  # the run commits its spans batch by batch
    else:
        exact = "yes"
    if not graph_on:
        graph = "off"
    elif graph_gen > 0 and graph_gen == generation:
        graph = "yes"
    elif busy:
        graph = "building"
    else:
        graph = "behind" if graph_gen > 0 else "no"
    return Searchable(bm25, exact, graph, vectors)


def lexical_generation(root: Path) -> int:
    from llmc.store.lexical import GENERATION_FILE

    try:
        return int((lexical_path(root) / GENERATION_FILE).read_text().strip())
    except (OSError, ValueError):
        return -1


_GRAPH_GENERATION = re.compile(rb'"generation"\s*:\s*(\d+)')


def graph_generation(root: Path) -> int:
    """The store generation ``rag_graph.json`` was built from (its head only; -1: none)."""
    try:
        with open(graph_path(root), "rb") as f:
            head = f.read(GRAPH_HEAD_BYTES)
    except OSError:
        return -1
    match = _GRAPH_GENERATION.search(head)
    return int(match.group(1)) if match else -1


_LOCK_HOLDER = re.compile(r"pid (\d+)")


def writer_holder(root: Path) -> tuple[int, str] | None:
    """(pid, what) of the process holding the writer lock now, read from the lock file
    (the holder writes it, the release empties it); None when nobody holds it."""
    from llmc.index.live import pid_alive

    try:
        text = lock_path(root).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    match = _LOCK_HOLDER.match(text)
    if match is None:
        return None
    pid = int(match.group(1))
    return (pid, text[:200]) if pid_alive(pid) else None


def _profile(cfg: Config) -> str:
    """The search profile line (llmc.models.device.machine_profile) and the query budget."""
    from llmc.models.device import machine_profile

    try:
        profile = machine_profile(cfg.search.profile).reason
    except ValueError as e:
        return str(e)
    budget = cfg.search.budget_ms
    return f"{profile}, budget {budget:,.0f} ms a query" if budget > 0 else f"{profile}, no budget"


def age(seconds_since_epoch: float | None) -> str:
    if not seconds_since_epoch:
        return "never"
    delta = max(0.0, time.time() - seconds_since_epoch)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{delta / size:.0f}{unit} ago"
    return f"{delta:.0f}s ago"


__all__ = [
    "IndexStatus",
    "Searchable",
    "age",
    "graph_generation",
    "index_status",
    "lexical_generation",
    "searchable",
    "writer_holder",
]
