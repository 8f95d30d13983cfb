"""`llmc status`: how fresh and how big the index is, without writing anything."""

from __future__ import annotations

import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from llmc.config import Config
from llmc.index.backfill import Coverage
from llmc.index.generated import Detector
from llmc.index.walk import read_text, secrets_mode, walk
from llmc.paths import db_path, graph_path, lexical_path
from llmc.store.db import Store
from llmc.types import CODE, DOC


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

    @property
    def fresh(self) -> bool:
        return not (self.changed_files or self.new_files or self.deleted_files) and (
            self.lexical_fresh
        )

    def to_json(self) -> dict:
        out = asdict(self)
        out["fresh"] = self.fresh
        out["vectors"] = self.vectors.to_json()  # dense coverage while vectors backfill
        out["dense"] = self.vectors.line()
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
    from llmc.store.lexical import GENERATION_FILE

    store = Store(db_path(root), readonly=True)
    try:
        known = store.files()
        counts = store.counts()
        walked = walk(root, cfg.index)
        detector = walked.detector or Detector(cfg.index)
        current = {f.path: f for f in walked.files}
        changed = [
            p
            for p, f in current.items()
            if p in known and (known[p].size, known[p].mtime_ns) != (f.size, f.mtime_ns)
        ]
        try:
            lexical_gen = int((lexical_path(root) / GENERATION_FILE).read_text().strip())
        except (OSError, ValueError):
            lexical_gen = -1
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
        return IndexStatus(
            root=str(root),
            generation=store.generation,
            lexical_generation=lexical_gen,
            lexical_fresh=lexical_gen == store.generation,
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
            changed_files=sorted(changed),
            new_files=sorted(
                p
                for p in set(current) - set(known)
                if read_text(root, p, detector, secrets_mode(cfg.index)).skipped is None
            ),
            deleted_files=sorted(set(known) - set(current)),
            uncommitted_changes=_uncommitted(root),
            vectors=Coverage.of(store.vector_counts()),
        )
    finally:
        store.close()


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


__all__ = ["IndexStatus", "age", "index_status"]
