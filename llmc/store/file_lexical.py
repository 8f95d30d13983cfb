"""Whole-file BM25: a second tantivy index in ``.llmc/files/``, one document per indexed
file, for file-level answers (``llmc search --files``, ``group: "file"``).

A span index finds the span that matches; a question such as "which files does this
report touch" is also answered by files whose *whole* text matches, its terms spread over
many spans (a keyword table, ``setup.py``). On validation, fusing this list into the
span-grouped file list lifted commit subjects → files and long reports → files
(docs/reports/2026-11-27-whole-file-bm25-validation.md).

A file's document is rebuilt from its spans in SQLite, not from the file on disk: the
spans are what was indexed (a redacted secret stays redacted, a skipped file stays out),
and no path is opened. Overlapping spans (a class and its methods) count their lines once.
The index is derived and rebuildable: ``sync`` brings it to the store's content by
comparing each file's content hash with the one it recorded (``hashes.json``), so a crash
mid-sync, a missing or a corrupt index are all repaired by the next sync.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.errors import StoreError
from llmc.store.lexical import ANALYZER, WRITER_HEAP_BYTES, _analyzer, _atomic_write
from llmc.store.tokens import code_tokens

if TYPE_CHECKING:  # pragma: no cover
    from llmc.store.db import Store

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
HASHES_FILE = "hashes.json"
MAX_FILE_CHARS = 2_000_000  # a file's text past this is left out of its document
# A long report is matched whole, as a whole file is (the span index caps a query at 64
# terms; here every term of a report counts)
MAX_QUERY_TERMS = 512


@dataclass(frozen=True)
class FileMatch:
    path: str
    score: float


@dataclass(frozen=True)
class SyncReport:
    written: int
    removed: int
    files: int


def _schema():
    import tantivy

    b = tantivy.SchemaBuilder()
    b.add_text_field("path_key", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_text_field("text", stored=False, tokenizer_name=ANALYZER, index_option="freq")
    return b.build()


def file_text(spans: Sequence[tuple[int, int, str]]) -> str:
    """One file's text from its spans (start line, end line, text), each line once: a
    span's lines already held by an earlier-starting span are left out."""
    seen: set[int] = set()
    out: list[str] = []
    size = 0
    for start, _end, text in sorted(spans, key=lambda s: (s[0], -s[1])):
        for offset, line in enumerate(text.split("\n")):
            number = start + offset
            if number in seen:
                continue
            seen.add(number)
            out.append(line)
            size += len(line) + 1
            if size > MAX_FILE_CHARS:
                return "\n".join(out)
    return "\n".join(out)


class FileIndex:
    """The whole-file index at ``path``. A ``readonly`` one that is missing or unreadable
    raises StoreError (callers then answer without it); a writer recreates it."""

    def __init__(self, path: Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if readonly and not (self.path / HASHES_FILE).is_file():
            raise StoreError(f"no whole-file index at {self.path} (run `llmc index`)")
        try:
            self.path.mkdir(exist_ok=True)  # never its parent: a deleted .llmc/ stays deleted
            self._open()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"whole-file index at {self.path}: {e}") from e

    def _open(self) -> None:
        import tantivy

        self._analyzer = _analyzer()
        marker = self.path / "llmc_schema"
        try:
            if marker.exists() and marker.read_text().strip() != SCHEMA_VERSION:
                if self.readonly:
                    raise ValueError("built by another llmc version")
                self._wipe()
            self.index = tantivy.Index(_schema(), path=str(self.path), reuse=True)
        except (ValueError, OSError, RuntimeError) as e:
            if self.readonly:
                raise StoreError(f"whole-file index at {self.path} is unreadable: {e}") from e
            log.warning("whole-file index at %s unreadable (%s); recreating it", self.path, e)
            self._wipe()
            self.index = tantivy.Index(_schema(), path=str(self.path), reuse=True)
        self.index.register_tokenizer(ANALYZER, self._analyzer)
        if not self.readonly and not marker.exists():
            _atomic_write(marker, SCHEMA_VERSION)

    def _wipe(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()

    # -- state ------------------------------------------------------------------------------
    def hashes(self) -> dict[str, str]:
        """path → content hash of every file the index holds (empty when unknown: then a
        sync writes every file again)."""
        try:
            data = json.loads((self.path / HASHES_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            return {}
        return data

    # -- writing ----------------------------------------------------------------------------
    def sync(self, store: Store) -> SyncReport:
        """Bring the index to ``store``'s files: rewrite each file whose content hash
        differs from the recorded one, delete the files the store no longer has."""
        want = {path: rec.content_hash for path, rec in store.files().items()}
        have = self.hashes()
        if have and not self._holds_documents(len(have)):
            have = {}  # hashes without their documents (a wiped index): write them all
        changed = sorted(p for p, h in want.items() if have.get(p) != h)
        removed = sorted(p for p in have if p not in want)
        if not changed and not removed:
            return SyncReport(0, 0, len(want))
        try:
            writer = self.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            if not have:
                writer.delete_all_documents()
            for path in removed:
                writer.delete_documents_by_term("path_key", path)
            written = 0
            for path, text in _file_texts(store, changed):
                writer.delete_documents_by_term("path_key", path)
                self._add(writer, path, text)
                written += 1
            writer.commit()
            writer.wait_merging_threads()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"whole-file index update failed: {e}") from e
        try:
            _atomic_write(self.path / HASHES_FILE, json.dumps(want, sort_keys=True))
            self.index.reload()
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"whole-file index update failed: {e}") from e
        return SyncReport(written, len(removed), len(want))

    def _add(self, writer, path: str, text: str) -> None:
        import tantivy

        writer.add_document(tantivy.Document(path_key=path, text=" ".join(code_tokens(text))))

    def _holds_documents(self, expected: int) -> bool:
        try:
            self.index.reload()
            return self.index.searcher().num_docs > 0 or expected == 0
        except (ValueError, OSError, RuntimeError):
            return False

    # -- reading ----------------------------------------------------------------------------
    def search(self, query: str, limit: int) -> list[FileMatch]:
        """The ``limit`` best files for ``query`` by BM25 over their whole text."""
        import tantivy

        analysed = self._analyzer.analyze(" ".join(code_tokens(query)))
        terms = list(dict.fromkeys(t for t in analysed if t))[:MAX_QUERY_TERMS]
        if not terms or limit <= 0:
            return []
        schema = self.index.schema
        should = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", t, index_option="freq"))
            for t in terms
        ]
        try:
            self.index.reload()  # an index run since this was opened
            searcher = self.index.searcher()
            result = searcher.search(tantivy.Query.boolean_query(should), limit)
        except (ValueError, OSError, RuntimeError) as e:
            raise StoreError(f"whole-file index at {self.path} is unreadable: {e}") from e
        hits = []
        for score, address in result.hits:
            doc = searcher.doc(address)
            hits.append(FileMatch(str(doc["path_key"][0]), float(score)))
        return hits


def _file_texts(store: Store, paths: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(path, text) of each of ``paths`` from its spans, one file's spans in memory at a
    time."""
    for start in range(0, len(paths), 50):
        chunk = list(paths[start : start + 50])
        marks = ",".join("?" * len(chunk))
        rows: dict[str, list[tuple[int, int, str]]] = {}
        for path, first, last, text in store.conn.execute(
            f"SELECT path, start_line, end_line, text FROM spans WHERE path IN ({marks})", chunk
        ):
            rows.setdefault(path, []).append((int(first), int(last), text or ""))
        for path in chunk:
            yield path, file_text(rows.pop(path, []))


__all__ = ["FileIndex", "FileMatch", "SyncReport", "file_text"]
