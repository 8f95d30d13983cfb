"""The write phase of a run: each changed file's spans into the store, with the vectors
the (model, text hash) cache already has; the rest are embedded by the backfill.

``usable_spaces`` says which categories' vector tables still belong to the configured
models (a changed model is only noted: its table is re-made by the backfill, after the
index is searchable). ``write_parsed`` swaps each file's rows in one transaction, in
batches of ``WRITE_BATCH_FILES`` files whose cached vectors are looked up together.
``records_after`` and ``record_policies`` say what the store holds once the run's writes
are committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from llmc.index.chunk import CHUNK_POLICY_KEY
from llmc.index.generated import SKIP_POLICY_KEY
from llmc.index.parse_files import Parsed
from llmc.index.progress import Progress
from llmc.store.db import FileRecord, Store, embed_hash
from llmc.store.lexical import Fields
from llmc.types import CODE, DOC, IndexSummary, Span, StoredSpan

WRITE_BATCH_FILES = 256  # files whose cached vectors are looked up together


def usable_spaces(
    store: Store,
    summary: IndexSummary,
    model_id: Callable[[str], str],
    note: Callable[[str], None],
) -> dict[str, str]:
    """Category → model id where the index's vectors come from the configured model:
    there, cached vectors are written with the spans. A changed model is only noted
    here (no model is loaded before the index is searchable); the backfill re-creates
    its table and re-embeds."""
    out: dict[str, str] = {}
    for category in (CODE, DOC):
        wanted = model_id(category)
        current = store.vector_space(category)
        if current is None:
            continue
        if current.model_id == wanted:
            out[category] = wanted
        else:
            summary.model_changed = True
            note(
                f"embedding model for {category} changed from {current.model_id} to "
                f"{wanted}: its vectors are re-made after the index is searchable"
            )
    return out


def cached_vectors(
    store: Store, spans: list[Span], spaces: dict[str, str], summary: IndexSummary
) -> list[np.ndarray | None]:
    """Vectors of ``spans`` already in the (model, text hash) cache; None elsewhere."""
    out: list[np.ndarray | None] = [None] * len(spans)
    for category, model_id in spaces.items():
        idx = [i for i, s in enumerate(spans) if s.category == category]
        if not idx:
            continue
        hashes = [embed_hash(spans[i]) for i in idx]
        cached = store.cached_vectors(model_id, hashes)
        for i, h in zip(idx, hashes, strict=True):
            if h in cached:
                out[i] = cached[h]
                summary.embed_cached += 1
    return out


def write_parsed(
    store: Store,
    parsed: list[Parsed],
    generation: int,
    spaces: dict[str, str],
    summary: IndexSummary,
    progress: Progress,
) -> tuple[list[StoredSpan], dict[int, Fields]]:
    """Each file's spans in one transaction, with the vectors the cache already has
    (the rest are the backfill's); the written spans and, by span id, the lexical
    fields the chunk workers made."""
    progress.phase("writing", len(parsed))
    return write_batch(store, parsed, generation, spaces, summary, progress.advance)


def write_batch(
    store: Store,
    batch: list[Parsed],
    generation: int,
    spaces: dict[str, str],
    summary: IndexSummary,
    advance: Callable[[], None] | None = None,
) -> tuple[list[StoredSpan], dict[int, Fields]]:
    """``write_parsed`` of one batch (its cached vectors looked up together), without
    a phase of its own: an index run writes each batch as the chunk workers hand it over
    (``parse_batches``), so only one batch's spans are held at a time."""
    written: list[StoredSpan] = []
    fields: dict[int, Fields] = {}
    for start in range(0, len(batch), WRITE_BATCH_FILES):
        part = batch[start : start + WRITE_BATCH_FILES]
        vectors = cached_vectors(store, [s for p in part for s in p.spans], spaces, summary)
        pos = 0
        with store.batch():  # one commit for the part's files (3x faster than one per file)
            for p in part:
                vecs = vectors[pos : pos + len(p.spans)]
                pos += len(p.spans)
                ids = store.replace_file(
                    p.file.path,
                    p.lang,
                    p.category,
                    p.file.size,
                    p.file.mtime_ns,
                    p.content_hash,
                    p.spans,
                    vecs,
                    generation,
                )
                written.extend(StoredSpan(i, s) for i, s in zip(ids, p.spans, strict=True))
                if p.fields is not None:
                    fields.update(zip(ids, p.fields, strict=True))
        for p in part:
            summary.files_indexed += 1
            summary.spans_written += len(p.spans)
            if advance is not None:
                advance()
    return written, fields


def record_of(p: Parsed) -> FileRecord:
    """The file record ``p``'s write commits (its id aside)."""
    f = p.file
    return FileRecord(0, f.path, p.lang, p.category, f.size, f.mtime_ns, p.content_hash)


def records_after(
    known: dict[str, FileRecord], written: Iterable[FileRecord], removed: list[str]
) -> dict[str, FileRecord]:
    """The store's file records once this run's writes are committed (ids aside):
    ``known`` less ``removed``, with the ``written`` records (``record_of``)."""
    gone = set(removed)
    out = {p: r for p, r in known.items() if p not in gone}
    for r in written:
        out[r.path] = r
    return out


def record_policies(store: Store, skip_policy: str, chunk_policy_now: str) -> None:
    """Record the skip rules and the chunker this index now reflects (after the run's
    changes are committed, so a crash before it checks and cuts again)."""
    for key, value in ((SKIP_POLICY_KEY, skip_policy), (CHUNK_POLICY_KEY, chunk_policy_now)):
        if store.get_meta(key) != value:
            store.set_meta(key, value)


__all__ = [
    "WRITE_BATCH_FILES",
    "cached_vectors",
    "record_policies",
    "record_of",
    "records_after",
    "usable_spaces",
    "write_batch",
    "write_parsed",
]
