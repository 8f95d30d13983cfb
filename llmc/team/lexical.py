"""BM25 over the team store: ``LexicalIndex``'s and the whole-file index's reading methods
over the shards a ``ShardReader`` reads (``llmc/team/terms.py`` scores as tantivy does).

Several repositories are scored as one index: their documents side by side (a shard's
posting lists moved past the shards before it), so a term's document frequency, the number
of documents and the average lengths are the union's, as one tantivy index over all of
them would count them. One repository is scored exactly as before: its own statistics.

Posting lists are read for a query's terms from every shard in one round trip and kept
(``PostingCache``, within a byte budget; one cache may serve a process's searchers, since a
shard's lists do not change: a new version is a new shard).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from llmc.store.file_lexical import FileMatch
from llmc.store.lexical import FIELD_BOOSTS, LexicalHit, term_weights
from llmc.team import terms
from llmc.team.reader import PLACE_BITS, ShardReader, _unpack

POSTINGS_CACHE_BYTES = 64_000_000  # posting lists kept across queries, per cache
_EMPTY = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))


class PostingCache:
    """Posting lists by (shard, table, field, term), the least recently used dropped past
    ``budget`` bytes. Thread-safe."""

    def __init__(self, budget: int = POSTINGS_CACHE_BYTES):
        self.budget = budget
        self._lock = threading.Lock()
        self._lists: OrderedDict[tuple, terms.Posting] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple) -> terms.Posting | None:
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
            return found

    def put(self, key: tuple, posting: terms.Posting) -> None:
        with self._lock:
            if key in self._lists:
                return
            self._lists[key] = posting
            self._bytes += posting[0].nbytes + posting[1].nbytes + 64
            while self._bytes > self.budget and len(self._lists) > 1:
                _, (ids, tfs) = self._lists.popitem(last=False)
                self._bytes -= ids.nbytes + tfs.nbytes + 64


class _Postings:
    """One table's posting lists over the reader's shards, as one index's (see the module
    doc): a shard's document positions moved by its ``offsets`` entry."""

    def __init__(self, reader: ShardReader, table: str, keyed_by_field: bool, cache: PostingCache):
        self.reader, self.table, self.by_field, self.cache = reader, table, keyed_by_field, cache

    def get(
        self, fields: Iterable[int], words: Iterable[str], offsets: Sequence[int]
    ) -> dict[tuple[int, str], terms.Posting]:
        fields = list(fields) if self.by_field else [0]
        words = list(dict.fromkeys(words))
        shards = self.reader.shards
        held: dict[tuple, terms.Posting] = {}
        missing: dict[int, list[str]] = {}
        for place, shard in enumerate(shards):
            for word in words:
                for field in fields:
                    found = self.cache.get((shard, self.table, field, word))
                    if found is None:
                        missing.setdefault(place, []).append(word)
                        break
                    held[(shard, self.table, field, word)] = found
        if missing:
            held.update(self._read({p: sorted(set(w)) for p, w in missing.items()}, fields))
        out = {}
        for field in fields:
            for word in words:
                parts = [(held.get((s, self.table, field, word), _EMPTY), offsets[p])
                         for p, s in enumerate(shards)]  # fmt: skip
                out[(field, word)] = _joined(parts)
        return out

    def _read(self, words: dict[int, list[str]], fields: list[int]) -> dict[tuple, terms.Posting]:
        """Read ``words``' lists of each shard (a place's own words) in one round trip."""
        field = "field" if self.by_field else "0"
        rows = self.reader.each(
            f"SELECT {field}, term, array_send(ids), array_send(tfs) FROM {{s}}.{self.table} "
            "WHERE term = ANY(%s)",
            lambda place: (words[place],), words, binary=True,
        )  # fmt: skip
        shards = self.reader.shards
        found = {(shards[p], self.table, int(f), t): (_unpack(i, "int32"), _unpack(c, "int32"))
                 for p, f, t, i, c in rows}  # fmt: skip
        for place, asked in words.items():  # a term a shard lacks is remembered as empty
            for word in asked:
                for number in fields:
                    key = (shards[place], self.table, number, word)
                    found.setdefault(key, _EMPTY)
        for key, posting in found.items():
            self.cache.put(key, posting)
        return found


def _joined(parts: Sequence[tuple[terms.Posting, int]]) -> terms.Posting:
    if len(parts) == 1 and parts[0][1] == 0:
        return parts[0][0]
    kept = [(ids, tfs, offset) for (ids, tfs), offset in parts if len(ids)]
    if not kept:
        return _EMPTY
    return (
        np.concatenate([ids + offset for ids, _, offset in kept]),
        np.concatenate([tfs for _, tfs, _ in kept]),
    )


class _Documents:
    """The reader's documents as one index's: each shard's statistics read once a version,
    side by side (``terms.DocStats``), with where each shard's positions start."""

    def __init__(self, reader: ShardReader, read: Callable[[list[int]], dict[str, Any]]):
        self.reader, self.read = reader, read
        self._shards: dict[str, tuple] = {}  # shard → what ``read`` made of its statistics
        self._joined: tuple[tuple[str, ...], Any, list[int]] | None = None

    def get(self, join: Callable[[list[Any]], Any]) -> tuple[Any, list[int]]:
        shards = self.reader.shards
        if self._joined is None or self._joined[0] != shards:
            wanted = [p for p, s in enumerate(shards) if s not in self._shards]
            if wanted:
                self._shards.update(self.read(wanted))
            parts = [self._shards[s] for s in shards]
            self._shards = {s: self._shards[s] for s in shards}  # older versions go
            offsets = list(np.cumsum([0] + [part[-1] for part in parts[:-1]]).tolist())
            self._joined = (shards, join(parts), offsets)
        return self._joined[1], self._joined[2]


class ShardLexical:
    """``LexicalIndex``'s reading methods over the reader's shards: BM25 as the local index
    scores it, the union of several repositories as one index."""

    def __init__(self, reader: ShardReader, cache: PostingCache | None = None):
        self.reader = reader
        self._postings = _Postings(reader, "postings", True, cache or PostingCache())
        self._documents = _Documents(reader, self._read_stats)
        # the last few queries' scores over every document: a query searches each category
        # (and both routes) with the same terms, and only the mask differs
        self._scored: OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    @property
    def generation(self) -> int:
        return self.reader.generation

    def reload(self) -> None:
        """Nothing to reload: a reader reads the versions it follows."""

    def _read_stats(self, places: list[int]) -> dict[str, tuple[int, terms.DocStats, int]]:
        rows = self.reader.each(
            "SELECT array_send(ids), cats, array_send(lens) FROM {s}.span_stats", (), places,
            binary=True,
        )  # fmt: skip
        out = {}
        for place, ids, cats, lens in rows:
            ids_arr = _unpack(ids, "int64")
            if len(ids_arr):
                lens_arr = _unpack(lens, "int32").reshape(len(ids_arr), -1)
                stats = terms.DocStats.of(ids_arr, lens_arr, cats)
                out[self.reader.shards[place]] = (place, stats, len(stats))
        for place in places:  # a shard without statistics holds no document
            out.setdefault(self.reader.shards[place], (place, terms.DocStats.empty(), 0))
        return out

    def _join(self, parts: list[tuple[int, terms.DocStats, int]]) -> terms.DocStats:
        if len(parts) == 1:
            return parts[0][1]
        return terms.DocStats.joined(
            [((np.int64(p) << PLACE_BITS) | s.ids, s) for p, s, _ in parts]
        )

    def stats(self) -> terms.DocStats:
        return self._documents.get(self._join)[0]

    def _lists(self, fields: Iterable[int], words: Iterable[str]) -> dict:
        return self._postings.get(fields, words, self._documents.get(self._join)[1])

    def query_terms(self, query: str) -> list[str]:
        return terms.query_terms(query)

    def search(
        self,
        query: str,
        limit: int,
        category: str | None = None,
        field_boosts: dict[str, float] | None = None,
        extra_terms: dict[str, float] | None = None,
    ) -> list[LexicalHit]:
        """BM25 over symbol, path, header and text (``LexicalIndex.search``)."""
        weights = term_weights(terms.query_terms(query), extra_terms, terms.analyze)
        if not weights or limit <= 0:
            return []
        boosts = {terms.FIELDS.index(f): b for f, b in (field_boosts or FIELD_BOOSTS).items()}
        stats = self.stats()
        positions, scores = self._scores(stats, weights, boosts)
        if category is not None:  # tantivy adds the category clause's own score: its idf
            mask = stats.mask(category)
            kept = mask[positions]
            constant = float(terms.idf(int(mask.sum()), len(stats)))
            positions, scores = positions[kept], scores[kept] + constant
        return [LexicalHit(int(stats.ids[p]), s) for p, s in terms.top(positions, scores, limit)]

    def _scores(
        self, stats: terms.DocStats, weights: dict[str, float], boosts: dict[int, float]
    ) -> tuple[np.ndarray, np.ndarray]:
        key = (self.reader.shards, tuple(weights.items()), tuple(sorted(boosts.items())))
        found = self._scored.get(key)
        if found is None:
            postings = self._lists(boosts, weights)
            found = self._scored[key] = terms.bm25(stats, postings, weights, boosts)
            while len(self._scored) > 8:
                self._scored.popitem(last=False)
        return found

    def containing_all(self, text: str, limit: int) -> list[LexicalHit]:
        """Spans whose text holds every term of ``text``, BM25 order."""
        words = terms.query_terms(text)
        if not words or limit <= 0:
            return []
        field = terms.TEXT_FIELD
        postings = self._lists([field], words)
        common: np.ndarray | None = None
        for word in words:
            held = postings.get((field, word), _EMPTY)[0]
            common = held if common is None else np.intersect1d(common, held, assume_unique=True)
        if common is None or not len(common):
            return []
        stats = self.stats()
        mask = np.zeros(len(stats), dtype=bool)
        mask[common] = True
        weights = dict.fromkeys(words, 1.0)
        positions, scores = terms.bm25(stats, postings, weights, {field: 1.0}, mask)
        return [LexicalHit(int(stats.ids[p]), s) for p, s in terms.top(positions, scores, limit)]

    def num_docs(self) -> int:
        return len(self.stats())

    def document_frequencies(self, words: Iterable[str]) -> dict[str, int]:
        """How many spans contain each analysed term (text or header, the larger)."""
        words = list(words)
        fields = (terms.TEXT_FIELD, terms.HEADER_FIELD)
        postings = self._lists(fields, words)
        return {w: max(len(postings.get((f, w), _EMPTY)[0]) for f in fields) for w in words}


class ShardFiles:
    """The whole-file index's ``search`` over the reader's shards' file posting lists."""

    def __init__(self, reader: ShardReader, cache: PostingCache | None = None):
        self.reader = reader
        self._postings = _Postings(reader, "file_postings", False, cache or PostingCache())
        self._documents = _Documents(reader, self._read_files)

    def _read_files(self, places: list[int]) -> dict[str, tuple[list[str], np.ndarray, int]]:
        rows = self.reader.each(
            "SELECT paths, array_send(lens) FROM {s}.file_stats", (), places, binary=True
        )
        out = {}
        for place, paths, lens in rows:
            shown = [self.reader.shown(place, p) for p in paths or []]
            out[self.reader.shards[place]] = (shown, _unpack(lens, "int32"), len(shown))
        for place in places:
            out.setdefault(self.reader.shards[place], ([], np.zeros(0, dtype=np.int32), 0))
        return out

    @staticmethod
    def _join(parts: list[tuple[list[str], np.ndarray, int]]) -> tuple[list[str], terms.DocStats]:
        paths = [p for part in parts for p in part[0]]
        lens = np.concatenate([part[1] for part in parts]) if parts else np.zeros(0)
        positions = np.arange(len(paths))  # file_postings number a shard's files by path
        return paths, terms.DocStats.of(positions, lens.reshape(len(paths), 1), [""] * len(paths))

    def search(self, query: str, limit: int) -> list[FileMatch]:
        words = terms.file_query_terms(query)
        if not words or limit <= 0:
            return []
        (paths, stats), offsets = self._documents.get(self._join)
        postings = self._postings.get([0], words, offsets)
        weights = dict.fromkeys(words, 1.0)
        positions, scores = terms.bm25(stats, postings, weights, {0: 1.0})
        return [FileMatch(paths[p], s) for p, s in terms.top(positions, scores, limit)]


__all__ = ["POSTINGS_CACHE_BYTES", "PostingCache", "ShardFiles", "ShardLexical"]
