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
from dataclasses import dataclass, field
from pathlib import Path

from llmc.config import Config
from llmc.index.chunk.pool import Batch, ChunkPool
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
    run = _ParseRun(
        root, cfg, progress, summary, known, full, store, reader,
        detector or Detector(cfg.index, root=root),
        reuse=not (full or recheck),
        known_skips=store.skipped_files() if store is not None else {},
    )  # fmt: skip
    progress.phase("parsing", len(files))
    graph = graph and cfg.graph.enabled
    pool = _start_pool(root, store, len(files), graph, facts_later)
    if graph and keep is not None:
        keep(pool)
    run.facts_now = graph and not pool.facts_deferred
    pool.warm()  # the workers start while the files are read
    try:
        for f in files:
            changed = run.changed_text(f)
            if changed is None:
                continue
            run.pending.append((f, *changed))
            if len(run.pending) >= CHUNK_BATCH_FILES:  # bounds the texts held at once
                run.submit(pool)
                if len(run.inflight) > BATCHES_AHEAD:
                    out = run.take()
                    if out:
                        yield out
        if run.pending:
            run.submit(pool)
        while run.inflight:
            out = run.take()
            if out:
                yield out
    finally:
        if not graph:
            pool.close()
    if store is not None and not store.readonly:
        # A skipped file has no row in ``files``, so it is always among ``files`` while it
        # exists; forget skips of files that are gone or that are indexable now.
        present = {f.path for f in files}
        forget = [p for p in run.known_skips if p not in present or p in run.indexable]
        store.set_skipped(run.new_skips, forget)
    for s in summary.skipped:
        log.info("skip %s: %s (%s)", s.path, s.reason, s.detail)


def _start_pool(
    root: Path, store: Store | None, n_files: int, graph: bool, facts_later: bool
) -> ChunkPool:
    """The chunk workers, told which files an earlier run's process died parsing (they
    are chunked as line windows, without their grammar); whether the graph facts wait
    for after the index is searchable (``facts_deferred``)."""
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
    pool = ChunkPool(n_files, journal, earlier)
    pool.facts_deferred = (
        graph and facts_later and pool.parallel and n_files >= FACTS_LATER_MIN_FILES
    )
    return pool


@dataclass
class _ParseRun:
    """One parse phase: which files to read, the texts waiting for the workers, the
    batches with them, and what the summary and the skip records learn."""

    root: Path
    cfg: Config
    progress: Progress
    summary: IndexSummary
    known: dict
    full: bool
    store: Store | None
    reader: Callable[..., FileText]
    detector: Detector
    reuse: bool
    known_skips: dict
    facts_now: bool = False
    pending: list[tuple[WalkedFile, str, str]] = field(default_factory=list)  # to chunk
    inflight: list[tuple[list[tuple[WalkedFile, str]], Batch]] = field(default_factory=list)
    indexable: set[str] = field(default_factory=set)
    new_skips: list[tuple[str, int, int, str, str]] = field(default_factory=list)

    def changed_text(self, f: WalkedFile) -> tuple[str, str] | None:
        """``(text, content hash)`` of a file to chunk; None for one skipped (as it was
        last time, with the same stat; or now) or unchanged after all (a touch)."""
        prior = self.known_skips.get(f.path)
        if self.reuse and prior is not None and prior[:2] == (f.size, f.mtime_ns):
            self.progress.advance()
            self.summary.skipped.append(SkippedFile(f.path, prior[2], prior[3]))
            return None
        read = self.reader(self.root, f.path, self.detector, secrets_mode(self.cfg.index))
        if read.skipped is not None:
            self.progress.advance()
            self.summary.skipped.append(read.skipped)
            self.new_skips.append(
                (f.path, f.size, f.mtime_ns, read.skipped.reason, read.skipped.detail)
            )
            return None
        digest = text_hash(read.text)
        rec = self.known.get(f.path)
        if not self.full and rec is not None and rec.content_hash == digest:
            self.progress.advance()
            if self.store is not None:
                self.store.touch_file(f.path, f.size, f.mtime_ns)
            self.summary.files_unchanged += 1
            return None
        return read.text, digest

    def submit(self, pool: ChunkPool) -> None:
        """The pending texts to the workers, as one batch."""
        limit = self.cfg.graph.max_file_size
        items = [(f.path, text, self.facts_now and f.size <= limit) for f, text, _ in self.pending]
        files_of = [(f, digest) for f, _, digest in self.pending]
        self.inflight.append((files_of, pool.submit(items, self.cfg.index)))
        self.pending.clear()

    def take(self) -> list[Parsed]:
        """The oldest batch's files, chunked; parse errors and unselected languages are
        skips, the rest counted by language and span kind."""
        files_of, batch = self.inflight.pop(0)
        languages = set(self.cfg.index.languages)
        summary = self.summary
        out: list[Parsed] = []
        for (f, digest), got in zip(files_of, batch.results(), strict=True):
            self.progress.advance()
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
            self.indexable.add(f.path)
            key = lang or "text"
            summary.files_by_lang[key] = summary.files_by_lang.get(key, 0) + 1
            for s in spans:
                summary.spans_by_kind[s.kind] = summary.spans_by_kind.get(s.kind, 0) + 1
        return out


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
