"""``llmc index --dry-run``: what a run would do, writing nothing.

The walk and the parse phase run as in a real run (the store opened read-only, when there
is one), so the files and spans counted are the ones a run would write; the embedding
time is estimated from the vectors already cached and the throughput the last backfill
measured (``DEFAULT_SPANS_PER_SECOND`` before any).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from llmc.config import Config
from llmc.index.parse_files import parse_files, split_by_stat
from llmc.index.progress import Progress
from llmc.index.walk import walk
from llmc.paths import db_path
from llmc.store.db import Store, embed_hash
from llmc.types import CODE, DOC, IndexSummary

DEFAULT_SPANS_PER_SECOND = 40.0  # used by --dry-run before any throughput was measured


def plan_run(
    root: Path,
    cfg: Config,
    progress: Progress,
    model_id: Callable[[str], str],
    full: bool = False,
) -> IndexSummary:
    """What a run would do, writing nothing (``--dry-run``; with ``full``, ``--full``'s
    run: every file parsed again)."""
    started = time.perf_counter()
    summary = IndexSummary(dry_run=True)
    path = db_path(root)
    store = Store(path, readonly=True) if path.exists() else None
    try:
        known = store.files() if store else {}
        walked = walk(root, cfg.index)
        summary.skipped = list(walked.skipped)
        summary.files_seen = len(walked.files)
        changed, unchanged = split_by_stat(walked.files, known, full=full)
        summary.files_unchanged = len(unchanged)
        parsed = parse_files(
            root, cfg, progress, changed, known, summary, full=full, detector=walked.detector
        )
        summary.files_indexed = len(parsed)
        summary.files_removed = len(set(known) - {f.path for f in walked.files})
        spans = [s for p in parsed for s in p.spans]
        cached = set()
        if store is not None:
            for category in (CODE, DOC):
                space = store.vector_space(category)
                if space and space.model_id == model_id(category):
                    hashes = [embed_hash(s) for s in spans if s.category == category]
                    cached |= set(store.cached_vectors(space.model_id, hashes))
        todo = [s for s in spans if embed_hash(s) not in cached]
        backlog = 0  # spans of unchanged files a backfill has yet to embed
        if store is not None:
            changed_paths = {p.file.path for p in parsed}
            stale = [i for c in (CODE, DOC) for i in store.missing_vectors(c)]
            owners = store.paths_by_ids(stale)
            backlog = sum(1 for i in stale if owners.get(i) not in changed_paths)
        rate = float(
            (store.get_meta("throughput.spans_per_s") if store else None)
            or DEFAULT_SPANS_PER_SECOND
        )
        summary.estimated_spans = len(spans)
        summary.embed_cached = len(spans) - len(todo)
        summary.estimated_embed_seconds = (len(todo) + backlog) / max(rate, 1e-6)
    finally:
        if store:
            store.close()
    summary.seconds = time.perf_counter() - started
    return summary


__all__ = ["DEFAULT_SPANS_PER_SECOND", "plan_run"]
