"""The parse phase of a run: which walked files changed, and their text read and chunked.

``split_by_stat`` costs a stat per file (done by the walk): a file whose size and mtime
match its record is unchanged. ``parse_files`` reads each other file (``walk.read_text``:
inside the repository, secrets kept out, generated files skipped), drops the ones whose
content hash matches after all (a touch), and hands the rest to the chunk workers
(``ChunkPool``) in batches of ``CHUNK_BATCH_FILES``; a file's skip reason is recorded with
its stat, so an unchanged skipped file is not read again. ``BATCHES_AHEAD`` more batches
are with the workers while the caller writes one and this reads the next: the workers
never wait for the reads or the writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from llmc.config import Config
from llmc.index.chunk_pool import Batch, ChunkPool
from llmc.index.generated import Detector
from llmc.index.parse_journal import JOURNAL_DIR, culprits
from llmc.index.progress import Progress
from llmc.index.walk import (
    KEEP_SECRETS,
    SKIP_SECRETS,
    FileText,
    WalkedFile,
    read_text,
    secrets_mode,
)
from llmc.paths import state_dir
from llmc.store.db import Store
from llmc.store.lexical import Fields
from llmc.types import IndexSummary, SkippedFile, Span, text_hash

log = logging.getLogger(__name__)

CHUNK_BATCH_FILES = 512  # files read before they are chunked (in parallel when many)
# Batches handed to the workers before the first of them is taken (each holds its texts
# and, once chunked, its results: ~20 MB a batch on the nine-project tree)
BATCHES_AHEAD = 1
# From this many changed files, ``facts_later`` leaves the graph facts for after the index
# is searchable; a smaller run extracts them in the same parse and starts the graph beside
# its writes (a second read and parse of a few files would only delay its graph)
FACTS_LATER_MIN_FILES = 2000


@dataclass
class Parsed:
    """A changed file, read and chunked: what the run writes for it."""

    file: WalkedFile
    lang: str | None
    category: str | None
    content_hash: str
    spans: list[Span]
    fields: list[Fields] | None = None  # the spans' lexical fields, when workers made them
    facts: bytes | None = None  # its graph facts as JSON, when workers extracted them


def split_by_stat(
    files: list[WalkedFile], known: dict, full: bool
) -> tuple[list[WalkedFile], list[WalkedFile]]:
    """Split by stat alone: an unchanged file costs nothing more."""
    changed, unchanged = [], []
    for f in files:
        rec = known.get(f.path)
        if not full and rec is not None and rec.size == f.size and rec.mtime_ns == f.mtime_ns:
            unchanged.append(f)
        else:
            changed.append(f)
    return changed, unchanged


def parse_batches(
    root: Path,
    cfg: Config,
    progress: Progress,
    files: list[WalkedFile],
    known: dict,
    summary: IndexSummary,
    full: bool,
    store: Store | None = None,
    recheck: bool = False,
    graph: bool = False,
    detector: Detector | None = None,
    reader: Callable[..., FileText] = read_text,
    keep: Callable[[ChunkPool], None] | None = None,
    facts_later: bool = False,
) -> Iterator[list[Parsed]]:
    """Read and chunk the changed files; with ``graph`` (and the graph enabled), the
    chunk workers extract each file's graph facts from the same parse, and stay up
    for the graph update (handed to ``keep`` as soon as it exists, so the caller
    closes it whatever happens). ``detector``: the walk's content rules
    (they know every path of the tree, which tells compiled output from the only copy
    of its code).

    The parsed files come as they are chunked, a batch of at most ``CHUNK_BATCH_FILES``
    at a time, so a caller that writes each batch and lets it go holds one batch's spans,
    not the tree's (the skip records are written once the last batch is taken).

    With ``facts_later``, worker processes and ``FACTS_LATER_MIN_FILES`` files or more,
    the workers leave the graph facts out
    (``Parsed.facts`` is None) and the pool says so (``ChunkPool.facts_deferred``): the
    caller makes the index searchable first and then takes them from ``facts_batches``
    (the facts were over half of the workers' CPU: 8.2 of 15.1 s on a 4,443-file sample of
    the nine-project tree)."""
    languages, reuse = set(cfg.index.languages), not (full or recheck)
    secrets_as = secrets_mode(cfg.index)
    detector = detector or Detector(cfg.index, root=root)
    progress.phase("parsing", len(files))
    indexable: set[str] = set()
    known_skips = store.skipped_files() if store is not None else {}
    new_skips: list[tuple[str, int, int, str, str]] = []
    pending: list[tuple[WalkedFile, str, str]] = []  # read, changed: to chunk
    graph_cfg = cfg.graph
    graph = graph and graph_cfg.enabled

    inflight: list[tuple[list[tuple[WalkedFile, str]], Batch]] = []  # with the workers

    def submit(pool: ChunkPool) -> None:
        items = [
            (f.path, text, facts_now and f.size <= graph_cfg.max_file_size)
            for f, text, _ in pending
        ]
        inflight.append(([(f, digest) for f, _, digest in pending], pool.submit(items, cfg.index)))
        pending.clear()

    def take() -> list[Parsed]:
        files_of, batch = inflight.pop(0)
        out: list[Parsed] = []
        for (f, digest), got in zip(files_of, batch.results(), strict=True):
            progress.advance()
            if isinstance(got, str):
                summary.skipped.append(SkippedFile(f.path, "parse-error", got[:200]))
                continue
            lang, category, spans, fields, facts = got
            if languages and (lang or "text") not in languages:
                summary.skipped.append(
                    SkippedFile(f.path, "language-not-selected", f"{lang} not in index.languages")
                )
                continue
            out.append(Parsed(f, lang, category, digest, spans, fields, facts))
            indexable.add(f.path)
            key = lang or "text"
            summary.files_by_lang[key] = summary.files_by_lang.get(key, 0) + 1
            for s in spans:
                summary.spans_by_kind[s.kind] = summary.spans_by_kind.get(s.kind, 0) + 1
        return out

    journal = None
    earlier: dict[str, int] = {}
    if store is not None and not store.readonly:
        journal = state_dir(root) / JOURNAL_DIR
        earlier = culprits(journal)  # files an earlier run's process died parsing
        for rel in sorted(earlier):  # a warning: shown with --json too
            log.warning(
                "%s: an earlier `llmc index` died while parsing it (a crash in its "
                "grammar?); indexing it as line windows, without the grammar",
                rel,
            )
    pool = ChunkPool(len(files), journal, earlier)
    if graph and keep is not None:
        keep(pool)
    pool.facts_deferred = (
        graph and facts_later and pool.parallel and len(files) >= FACTS_LATER_MIN_FILES
    )
    facts_now = graph and not pool.facts_deferred
    pool.warm()  # the workers start while the files are read
    try:
        for f in files:
            prior = known_skips.get(f.path)
            if reuse and prior is not None and prior[:2] == (f.size, f.mtime_ns):
                progress.advance()
                summary.skipped.append(SkippedFile(f.path, prior[2], prior[3]))
                continue
            read = reader(root, f.path, detector, secrets_as)
            if read.skipped is not None:
                progress.advance()
                summary.skipped.append(read.skipped)
                new_skips.append(
                    (f.path, f.size, f.mtime_ns, read.skipped.reason, read.skipped.detail)
                )
                continue
            digest = text_hash(read.text)
            rec = known.get(f.path)
            if not full and rec is not None and rec.content_hash == digest:
                progress.advance()
                if store is not None:
                    store.touch_file(f.path, f.size, f.mtime_ns)
                summary.files_unchanged += 1
                continue
            pending.append((f, read.text, digest))
            if len(pending) >= CHUNK_BATCH_FILES:  # bounds the texts held at once
                submit(pool)
                if len(inflight) > BATCHES_AHEAD:
                    out = take()
                    if out:
                        yield out
        if pending:
            submit(pool)
        while inflight:
            out = take()
            if out:
                yield out
    finally:
        if not graph:
            pool.close()
    if store is not None and not store.readonly:
        # A skipped file has no row in ``files``, so it is always among ``files`` while it
        # exists; forget skips of files that are gone or that are indexable now.
        present = {f.path for f in files}
        forget = [p for p in known_skips if p not in present or p in indexable]
        store.set_skipped(new_skips, forget)
    for s in summary.skipped:
        log.info("skip %s: %s (%s)", s.path, s.reason, s.detail)


def facts_batches(
    root: Path,
    cfg: Config,
    progress: Progress,
    pool: ChunkPool,
    files: list[tuple[str, int, str]],
    detector: Detector | None = None,
    reader: Callable[..., FileText] = read_text,
) -> Iterator[list[tuple[str, bytes]]]:
    """The graph facts of files ``parse_batches`` chunked without them (``facts_later``):
    each (path, size, content hash) is read again and its facts extracted by ``pool``'s
    workers, a batch of (path, facts JSON) at a time. A file that changed since (its hash),
    is too large for the graph or whose extraction failed gets none: the graph reads it
    itself, as it does any file without facts."""
    # The files were judged as they were written: a file whose content hash still matches
    # holds no secret (skipped ones were not written) and is no generated file, so it is
    # not scanned again (a redacted one is, to give the same text)
    secrets_as = secrets_mode(cfg.index)
    if secrets_as == SKIP_SECRETS:
        secrets_as, detector = KEEP_SECRETS, None
    limit = cfg.graph.max_file_size
    progress.phase("graph", len(files))
    pending: list[tuple[str, str, bool]] = []
    inflight: list[Batch] = []

    def take() -> list[tuple[str, bytes]]:
        batch = inflight.pop(0)
        paths = [rel for rel, _, _ in batch.items]
        got = [(rel, facts) for rel, facts in zip(paths, batch.results(), strict=True) if facts]
        progress.advance(len(paths))
        return got

    for rel, size, digest in files:
        read = reader(root, rel, detector, secrets_as) if size <= limit else None
        if read is None or read.text is None or text_hash(read.text) != digest:
            progress.advance()
            continue
        pending.append((rel, read.text, True))
        if len(pending) >= CHUNK_BATCH_FILES:
            inflight.append(pool.submit(pending, cfg.index, facts=True))
            pending = []
            if len(inflight) > BATCHES_AHEAD:
                yield take()
    if pending:
        inflight.append(pool.submit(pending, cfg.index, facts=True))
    while inflight:
        yield take()


def parse_files(*args, **kwargs) -> list[Parsed]:
    """``parse_batches`` as one list (``--dry-run``, which writes nothing)."""
    return [p for batch in parse_batches(*args, **kwargs) for p in batch]


__all__ = [
    "BATCHES_AHEAD",
    "CHUNK_BATCH_FILES",
    "FACTS_LATER_MIN_FILES",
    "Parsed",
    "facts_batches",
    "parse_batches",
    "parse_files",
    "split_by_stat",
]
