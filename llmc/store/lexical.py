"""The tantivy BM25 index in ``.llmc/lexical/``: derived from SQLite, rebuildable.

Each span is one document keyed by its span id. Text fields hold code-aware token
strings (``tokens.py``) analysed by whitespace + lowercase + English stemming. Queries are
built from term queries, never parsed, so user punctuation cannot raise. The index
records the store generation it reflects in ``generation``; a mismatch means stale.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import StoreError
from llmc.store.tokens import code_tokens
from llmc.types import Span, StoredSpan

log = logging.getLogger(__name__)

ANALYZER = "llmc_code"
GENERATION_FILE = "generation"
SCHEMA_VERSION = "1"
FIELD_BOOSTS = {"symbol": 3.0, "path": 1.5, "header": 1.5, "text": 1.0}
MAX_QUERY_TOKENS = 64
# tantivy's writer buffers documents in this much memory, then writes a segment (invisible
# until the commit): what the lexical index costs in RSS, whatever the tree's size
WRITER_HEAP_BYTES = 64_000_000


@dataclass(frozen=True)
class LexicalHit:
    span_id: int
    score: float


def _analyzer():
    from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

    return (
        TextAnalyzerBuilder(Tokenizer.whitespace())
        .filter(Filter.remove_long(80))
        .filter(Filter.lowercase())
        .filter(Filter.stemmer("english"))
        .build()
    )


def _schema():
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_unsigned_field("span_id", stored=True, indexed=True, fast=True)
    b.add_text_field("path_key", stored=False, tokenizer_name="raw", index_option="basic")
    for name in FIELD_BOOSTS:
        b.add_text_field(name, stored=False, tokenizer_name=ANALYZER, index_option="freq")
    for name in ("kind", "lang", "category"):
        b.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    return b.build()


Fields = tuple[str, str, str, str]  # token strings of path, symbol, header, text


def span_fields(span: Span) -> Fields:
    """The analysed fields of ``span``'s document, as token strings. The costly part of
    indexing a span, so the indexer computes it where it chunks (on every core)."""
    return (
        " ".join(code_tokens(span.path)),
        " ".join(code_tokens(f"{span.symbol} {span.qualname}")),
        " ".join(code_tokens(span.header)),
        " ".join(code_tokens(span.text)),
    )


def _document(stored: StoredSpan, fields: Fields | None = None):
    import tantivy

    span = stored.span
    path, symbol, header, text = fields or span_fields(span)
    doc = tantivy.Document(
        path_key=span.path,
        path=path,
        symbol=symbol,
        header=header,
        text=text,
        kind=span.kind,
        lang=span.lang or "text",
        category=span.category,
    )
    doc.add_unsigned("span_id", stored.id)
    return doc


def analysed_query_terms(analyze: Callable[[str], list[str]], query: str) -> list[str]:
    """``query``'s analysed, de-duplicated terms in first-seen order (at most
    ``MAX_QUERY_TOKENS``), by ``analyze`` (this index's analyser, or the team store's)."""
    tokens = code_tokens(query)[: MAX_QUERY_TOKENS * 2]
    if not tokens:
        return []
    terms = analyze(" ".join(tokens))
    return list(dict.fromkeys(t for t in terms if t))[:MAX_QUERY_TOKENS]


def term_weights(
    terms: Iterable[str], extra_terms: Mapping[str, float] | None,
    analyze: Callable[[str], list[str]],
) -> dict[str, float]:  # fmt: skip
    """A query's terms weighted 1, with ``extra_terms`` (analysed) at their own weight."""
    out = dict.fromkeys(terms, 1.0)
    for term, weight in (extra_terms or {}).items():
        for analysed in analyze(term):
            out[analysed] = max(out.get(analysed, 0.0), weight)
    return out


class LexicalIndex:
    """Open (or create) the tantivy index at ``path``.

    A writer (the indexer) that finds the index unreadable wipes and recreates it, since it
    is derived from SQLite; a ``readonly`` reader raises StoreError instead.
    """

    def __init__(self, path: Path, readonly: bool = False):
        import tantivy

        self.path = Path(path)
        self.readonly = readonly
        if readonly and not self.path.is_dir():
            raise StoreError(f"no lexical index at {self.path} (run `llmc index`)")
        self.path.mkdir(parents=True, exist_ok=True)
        self._analyzer = _analyzer()
        try:
            self.index = self._open(tantivy)
        except (ValueError, OSError, RuntimeError) as e:
            if readonly and not os.access(self.path, os.W_OK):
                self.index = self._open_copy(tantivy)
            elif readonly:
                raise StoreError(f"lexical index at {self.path} is unreadable: {e}") from e
            else:
                log.warning("lexical index at %s unreadable (%s); recreating it", self.path, e)
                self._wipe()
                self.index = self._open(tantivy)
        self.schema = self.index.schema

    def _open_copy(self, tantivy):
        """Open a private copy: tantivy takes a lock file even to read, which a read-only
        directory cannot hold. The copy goes when this object does."""
        tmp = tempfile.mkdtemp(prefix="llmc-lexical-")
        weakref.finalize(self, shutil.rmtree, tmp, True)
        log.info("lexical index at %s is read-only: searching a copy in %s", self.path, tmp)
        try:
            shutil.copytree(
                self.path, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".tantivy-*")
            )
            index = tantivy.Index.open(tmp)
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index at {self.path} is unreadable: {e}") from e
        index.register_tokenizer(ANALYZER, self._analyzer)
        return index

    def _open(self, tantivy):
        schema_marker = self.path / "llmc_schema"
        if schema_marker.exists() and schema_marker.read_text().strip() != SCHEMA_VERSION:
            if self.readonly:
                raise ValueError("built by another llmc version (run `llmc index` to rebuild)")
            self._wipe()
        index = tantivy.Index(_schema(), path=str(self.path), reuse=True)
        index.register_tokenizer(ANALYZER, self._analyzer)
        if not schema_marker.exists() and not self.readonly:
            _atomic_write(schema_marker, SCHEMA_VERSION)
        return index

    def _wipe(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True, exist_ok=True)

    # -- generation -----------------------------------------------------------------------
    @property
    def generation(self) -> int:
        try:
            return int((self.path / GENERATION_FILE).read_text().strip())
        except (OSError, ValueError):
            return -1

    def _set_generation(self, generation: int) -> None:
        _atomic_write(self.path / GENERATION_FILE, str(generation))

    # -- writing ----------------------------------------------------------------------------
    def begin_update(self) -> LexicalUpdate:
        """An update written as the spans come (``LexicalUpdate``); nothing is visible, and
        the generation is unchanged, until its ``commit``."""
        return LexicalUpdate(self)

    def update(
        self,
        remove_paths: Iterable[str],
        add: Iterable[StoredSpan],
        generation: int,
        fields: Mapping[int, Fields] | None = None,
    ) -> None:
        """Delete every document of ``remove_paths``, add ``add``, commit, record generation.
        ``fields`` (span id → ``span_fields``) saves tokenizing spans again."""
        upd = self.begin_update()
        try:
            upd.remove(remove_paths)
            upd.add(add, fields)
            upd.commit(generation)
        finally:
            upd.close()

    def rebuild(self, spans: Iterable[StoredSpan], generation: int) -> int:
        """Replace the whole index with ``spans``; return how many were written."""
        count = 0
        try:
            writer = self.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            writer.delete_all_documents()
            for stored in spans:
                writer.add_document(_document(stored))
                count += 1
            writer.commit()
            writer.wait_merging_threads()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index rebuild failed: {e}") from e
        self._set_generation(generation)
        self.index.reload()
        return count

    # -- reading ----------------------------------------------------------------------------
    def reload(self) -> None:
        """See the documents an index run committed since this was opened."""
        self.index.reload()

    def query_terms(self, query: str) -> list[str]:
        """Analysed, de-duplicated query terms in first-seen order."""
        return analysed_query_terms(self._analyzer.analyze, query)

    def search(
        self,
        query: str,
        limit: int,
        category: str | None = None,
        field_boosts: dict[str, float] | None = None,
        extra_terms: dict[str, float] | None = None,
    ) -> list[LexicalHit]:
        """BM25 over symbol, path, header and text; ``extra_terms`` adds weighted terms."""
        import tantivy

        terms = term_weights(self.query_terms(query), extra_terms, self._analyzer.analyze)
        if not terms or limit <= 0:
            return []
        boosts = field_boosts or FIELD_BOOSTS
        should = []
        for term, weight in terms.items():
            for field, boost in boosts.items():
                q = tantivy.Query.term_query(self.schema, field, term, index_option="freq")
                should.append((tantivy.Occur.Should, tantivy.Query.boost_query(q, boost * weight)))
        query_obj = tantivy.Query.boolean_query(should)
        if category is not None:
            query_obj = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, query_obj),
                    (
                        tantivy.Occur.Must,
                        tantivy.Query.term_query(self.schema, "category", category),
                    ),
                ]
            )
        searcher = self.index.searcher()
        result = searcher.search(query_obj, limit)
        hits = []
        for score, address in result.hits:
            doc = searcher.doc(address)
            hits.append(LexicalHit(int(doc["span_id"][0]), float(score)))
        return hits

    def containing_all(self, text: str, limit: int) -> list[LexicalHit]:
        """Spans whose text holds every term of ``text`` (a conjunction, BM25 order): the
        few places that may hold a pasted message verbatim, for the caller to check."""
        import tantivy

        terms = self.query_terms(text)
        if not terms or limit <= 0:
            return []
        must = [
            (tantivy.Occur.Must,
             tantivy.Query.term_query(self.schema, "text", t, index_option="freq"))
            for t in terms
        ]  # fmt: skip
        searcher = self.index.searcher()
        result = searcher.search(tantivy.Query.boolean_query(must), limit)
        return [
            LexicalHit(int(searcher.doc(address)["span_id"][0]), float(score))
            for score, address in result.hits
        ]

    def num_docs(self) -> int:
        return self.index.searcher().num_docs

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """How many spans contain each analysed term (any text field)."""
        searcher = self.index.searcher()
        out = {}
        for term in terms:
            out[term] = max(searcher.doc_freq("text", term), searcher.doc_freq("header", term))
        return out


class LexicalUpdate:
    """One update of a ``LexicalIndex``, written batch by batch: ``remove`` a file's
    documents before ``add``-ing its new ones (tantivy applies a delete to the documents
    added before it only), ``commit`` once the store's writes are durable. Until then the
    documents sit in the writer's bounded heap (``WRITER_HEAP_BYTES``) or in segments no
    reader sees; ``close`` without a commit drops them (a crash does too: the generation
    file still names the old content, and the next run rebuilds from SQLite)."""

    def __init__(self, lexical: LexicalIndex):
        self.lexical = lexical
        try:
            self._writer = lexical.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index update failed: {e}") from e

    def remove(self, paths: Iterable[str]) -> None:
        try:
            for path in paths:
                self._writer.delete_documents_by_term("path_key", path)
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index update failed: {e}") from e

    def add(self, spans: Iterable[StoredSpan], fields: Mapping[int, Fields] | None = None) -> None:
        """Add ``spans``' documents; ``fields`` (span id → ``span_fields``) saves
        tokenizing them again."""
        fields = fields or {}
        try:
            for stored in spans:
                self._writer.add_document(_document(stored, fields.get(stored.id)))
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index update failed: {e}") from e

    def commit(self, generation: int) -> None:
        """Make the update visible and record ``generation`` (the store's, durable)."""
        try:
            self._writer.commit()
            self._writer.wait_merging_threads()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index update failed: {e}") from e
        finally:
            self._writer = None  # its lock goes with it
        try:  # .llmc/ deleted under the run: one clear error, not a traceback
            self.lexical._set_generation(generation)
            self.lexical.index.reload()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"lexical index update failed: {e}") from e

    def close(self) -> None:
        """Drop what was not committed, and the writer's lock."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.rollback()
            except (ValueError, OSError, RuntimeError) as e:
                log.debug("lexical index rollback: %s", e)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


__all__ = [
    "Fields",
    "LexicalHit",
    "LexicalIndex",
    "LexicalUpdate",
    "analysed_query_terms",
    "span_fields",
    "term_weights",
]
