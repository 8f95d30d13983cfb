"""Records shared between stages. Plain frozen dataclasses, no dicts of dicts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

CODE = "code"
DOC = "doc"


def text_hash(text: str) -> str:
    """Stable content hash used for files, spans and the embedding cache."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Span:
    """A contiguous, addressable piece of a file: a function, class, section, paragraph...

    Lines are 1-based and inclusive. ``part`` numbers the pieces of a long span that was
    split with overlap (0 when not split); every part keeps the symbol of the whole.
    ``header`` is the context header (path, enclosing scope, signature, docstring or
    heading path) that is prepended to ``text`` for both embedding and BM25.
    """

    path: str
    lang: str
    category: str  # CODE or DOC
    kind: str  # function, method, class, module, block, section, paragraph, window
    symbol: str
    qualname: str
    start_line: int
    end_line: int
    text: str
    header: str
    part: int = 0
    signature: str = ""
    docstring: str = ""

    @property
    def content_hash(self) -> str:
        return text_hash(self.text)

    @property
    def embed_text(self) -> str:
        """What the embedder and BM25 see: context header, then the span text."""
        return f"{self.header}\n{self.text}" if self.header else self.text


@dataclass(frozen=True)
class StoredSpan:
    """A span as read back from the store, with its database id."""

    id: int
    span: Span


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str
    detail: str = ""


@dataclass
class IndexSummary:
    """What `llmc index` did, for the human summary and --json."""

    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_by_lang: dict[str, int] = field(default_factory=dict)
    spans_by_kind: dict[str, int] = field(default_factory=dict)
    skipped: list[SkippedFile] = field(default_factory=list)
    spans_total: int = 0
    spans_written: int = 0
    embedded: int = 0
    embed_cached: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    generation: int = 0
    repaired: list[str] = field(default_factory=list)
    model_changed: bool = False
    dry_run: bool = False
    estimated_spans: int = 0
    estimated_embed_seconds: float = 0.0
    # Seconds per phase (walk, parse, write, lexical, graph) and from start until the
    # change was searchable (SQLite and the lexical index committed; the graph follows).
    timings: dict[str, float] = field(default_factory=dict)
    searchable_seconds: float = 0.0

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for s in self.skipped:
            counts[s.reason] = counts.get(s.reason, 0) + 1
        return counts

    def to_json(self) -> dict:
        """`llmc index --json`."""
        return {
            "dry_run": self.dry_run,
            "files_seen": self.files_seen,
            "files_indexed": self.files_indexed,
            "files_unchanged": self.files_unchanged,
            "files_removed": self.files_removed,
            "files_by_lang": self.files_by_lang,
            "spans_by_kind": self.spans_by_kind,
            "spans_written": self.spans_written,
            "spans_total": self.spans_total,
            "embedded": self.embedded,
            "embed_cached": self.embed_cached,
            "skipped_by_reason": self.skipped_by_reason,
            "skipped": [
                {"path": s.path, "reason": s.reason, "detail": s.detail} for s in self.skipped
            ],
            "seconds": round(self.seconds, 3),
            "searchable_seconds": round(self.searchable_seconds, 3),
            "timings": self.timings,
            "spans_per_second": round(self.embedded / self.embed_seconds, 1)
            if self.embed_seconds
            else None,
            "generation": self.generation,
            "repaired": self.repaired,
            "model_changed": self.model_changed,
            "estimated_spans": self.estimated_spans,
            "estimated_embed_seconds": round(self.estimated_embed_seconds, 1),
        }


__all__ = ["CODE", "DOC", "IndexSummary", "SkippedFile", "Span", "StoredSpan", "text_hash"]
