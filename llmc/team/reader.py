"""Reading repositories' current versions in the team store, as search reads an index.

``ShardReader`` answers the ``Store`` methods the query path calls (spans by id, path or
symbol, the rankers' span rows, vector spaces and counts, KNN over pgvector's HNSW) from
the shards of one or more repositories; ``llmc/team/lexical.py`` answers ``LexicalIndex``'s
and the whole-file index's over the same shards. So the one search pipeline runs over the
store unchanged.

One repository reads exactly as its local index: span ids and paths as published. Several
read as one index (a team search ranks them together, in one pass): a span's id carries its
repository's place in the search (``place << 40 | id``; ids of one repository stay below
2**40) and its path is ``repo/path``, as if each repository were a top-level directory of
one tree. Each statement runs on every shard at once (``UNION ALL``, one round trip).

A reader follows the repositories' current versions: ``follow()`` (once per query) re-reads
their rows, and a new version moves the reader to the new shard. A publish drops the old
shard right after switching, so a query that began on it can find it gone; that raises
``ShardGone``, and the caller asks again on the new version (``llmc/team/search.py``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmc.errors import TeamError
from llmc.store.vector_tables import VectorSpace
from llmc.team.schema import CATEGORIES, checked_shard
from llmc.types import Span, StoredSpan

SPAN_SELECT = (
    "id, path, lang, category, kind, symbol, qualname, start_line, end_line, text, header, "
    "part, signature, docstring"
)
EF_SEARCH_MIN = 100  # HNSW candidates per KNN search; at least 2k (pgvector's default is 40)
PLACE_BITS = 40  # a repository's span ids stay below 2**40; its place in a search above


class ShardGone(Exception):  # noqa: N818 - not an error to show: the caller retries
    """The shard a query was reading was dropped by a newer publish."""


@dataclass(frozen=True)
class Version:
    """A repository's current version in the store (its ``llmc.repos`` row)."""

    repo: str
    shard: str
    generation: int
    commit: str
    spaces: dict[str, Any]


def current_versions(conn: Any, repos: Sequence[str]) -> tuple[list[Version], dict[str, str]]:
    """The current versions of ``repos`` (in their order) and, for each that cannot be read
    (not published, a shard name llmc did not make), why: one round trip."""
    rows = {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT name, shard, generation, commit, spaces FROM llmc.repos WHERE name = ANY(%s)",
            (list(repos),),
        )
    }
    found, problems = [], {}
    for repo in repos:
        row = rows.get(repo)
        if row is None:
            problems[repo] = f"no repository {repo!r} in the team store (`llmc team list`)"
            continue
        try:
            shard = checked_shard(row[0])
        except TeamError as e:
            problems[repo] = str(e)
            continue
        found.append(Version(repo, shard, int(row[1]), row[2] or "", dict(row[3] or {})))
    return found, problems


def current_version(conn: Any, repo: str) -> Version:
    found, problems = current_versions(conn, [repo])
    if problems:
        raise TeamError(problems[repo])
    return found[0]


def global_id(place: int, local: int) -> int:
    return (place << PLACE_BITS) | local


def split_id(span_id: int) -> tuple[int, int]:
    """(place, the repository's own span id)."""
    return span_id >> PLACE_BITS, span_id & ((1 << PLACE_BITS) - 1)


def _unpack(data: bytes | None, dtype: str) -> np.ndarray:
    """An integer array as PostgreSQL's ``array_send`` writes it (no nulls): header, then
    (length, big-endian value) per element. Far faster than a list of Python ints."""
    if not data:
        return np.zeros(0, dtype=dtype)
    ndim = int.from_bytes(data[0:4], "big")
    if ndim == 0:
        return np.zeros(0, dtype=dtype)
    record = np.dtype([("n", ">i4"), ("v", ">" + np.dtype(dtype).str[1:])])
    return np.frombuffer(data, dtype=record, offset=12 + 8 * ndim)["v"].astype(dtype)


class ShardReader:
    """The ``Store`` methods search calls, over the current shards of ``repos`` (one name
    or several: see the module doc)."""

    def __init__(self, conn: Any, repos: str | Sequence[str]):
        names = [repos] if isinstance(repos, str) else list(dict.fromkeys(repos))
        if not names:
            raise TeamError("no repository to search")
        self.conn = conn
        self.lock = threading.RLock()  # one connection: one statement at a time
        self.repos = names
        self.joined = len(names) > 1
        self.versions = self._read_versions()
        self._counts: tuple[tuple[str, ...], dict[str, int]] | None = None
        self._ef_search = 0

    def _read_versions(self) -> list[Version]:
        with self.lock:
            found, problems = current_versions(self.conn, self.repos)
        if problems:
            raise TeamError(next(iter(problems.values())))
        return found

    # -- the versions -----------------------------------------------------------------
    @property
    def version(self) -> Version:
        """The version read (of the first repository, the only one of a single reader)."""
        return self.versions[0]

    @property
    def generation(self) -> int:
        """Changes whenever a repository's version does (each generation only grows)."""
        return sum(v.generation for v in self.versions)

    @property
    def shards(self) -> tuple[str, ...]:
        return tuple(v.shard for v in self.versions)

    def follow(self) -> bool:
        """Move to the repositories' current versions; True when one changed."""
        now = self._read_versions()
        if now == self.versions:
            return False
        self.versions, self._counts = now, None
        return True

    def data_version(self) -> int:
        return self.generation

    # -- statements -------------------------------------------------------------------
    def q(self, sql: str, params: Sequence[Any] = (), place: int = 0) -> list[tuple]:
        """``sql`` with ``{s}`` one repository's shard: its rows."""
        return self._run(sql.format(s=self.versions[place].shard), params)

    def each(
        self, sql: str, params: Sequence[Any] | Callable[[int], Sequence[Any]] = (),
        places: Iterable[int] | None = None, binary: bool = False,
    ) -> list[tuple]:  # fmt: skip
        """``sql`` on each shard (``places``; default all) in one statement: its rows, each
        with the shard's place first. ``params``: the same for each, or a shard's own;
        ``binary``: rows in PostgreSQL's binary format (``bytea`` as is, not hex text)."""
        chosen = list(range(len(self.versions)) if places is None else places)
        args: list[Any] = []
        parts = []
        for place in chosen:
            shard_sql = sql.format(s=self.versions[place].shard)
            parts.append(
                shard_sql if len(chosen) == 1 else f"SELECT {place}, t.* FROM ({shard_sql}) t"
            )
            args.extend(params(place) if callable(params) else params)
        if not parts:
            return []
        rows = self._run(" UNION ALL ".join(parts), args, binary)
        return [(chosen[0], *r) for r in rows] if len(chosen) == 1 else rows

    def _run(self, sql: str, params: Sequence[Any], binary: bool = False) -> list[tuple]:
        import psycopg

        with self.lock:
            try:
                return self.conn.execute(sql, params, binary=binary).fetchall()
            except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as e:
                raise ShardGone(str(e)) from None
            except psycopg.OperationalError as e:
                raise TeamError(f"the team store stopped answering: {_first(e)}") from None

    # -- places and paths ---------------------------------------------------------------
    def shown(self, place: int, path: str) -> str:
        """A repository's path as this reader shows it (``repo/path`` when joined)."""
        return f"{self.versions[place].repo}/{path}" if self.joined else path

    def place_of(self, path: str) -> tuple[int, str] | None:
        """(place, the repository's own path) of a path as shown; None when no repository
        of this reader holds it."""
        if not self.joined:
            return 0, path
        best = None
        for place, v in enumerate(self.versions):
            if path.startswith(v.repo + "/") and (best is None or len(v.repo) > len(best[1])):
                best = (place, v.repo)
        return None if best is None else (best[0], path[len(best[1]) + 1 :])

    def repo_of(self, span_id: int) -> Version:
        return self.versions[split_id(span_id)[0]]

    def _by_place(self, ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for span_id in ids:
            place, local = split_id(int(span_id))
            if place < len(self.versions):
                out.setdefault(place, []).append(local)
        return out

    def _span(self, place: int, row: Sequence[Any]) -> StoredSpan:
        return StoredSpan(
            id=global_id(place, int(row[0])),
            span=Span(
                path=self.shown(place, row[1]), lang=row[2], category=row[3], kind=row[4],
                symbol=row[5] or "", qualname=row[6] or "", start_line=row[7],
                end_line=row[8], text=row[9] or "", header=row[10] or "", part=row[11] or 0,
                signature=row[12] or "", docstring=row[13] or "",
            ),
        )  # fmt: skip

    # -- spans ------------------------------------------------------------------------
    def spans_by_ids(self, ids: Sequence[int]) -> dict[int, StoredSpan]:
        wanted = self._by_place(ids)
        rows = self.each(
            f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE id = ANY(%s)",
            lambda place: (wanted[place],), wanted,
        )  # fmt: skip
        spans = (self._span(r[0], r[1:]) for r in rows)
        return {s.id: s for s in spans}

    def paths_by_ids(self, ids: Sequence[int]) -> dict[int, str]:
        wanted = self._by_place(ids)
        rows = self.each(
            "SELECT id, path FROM {s}.spans WHERE id = ANY(%s)",
            lambda place: (wanted[place],), wanted,
        )  # fmt: skip
        return {global_id(p, int(i)): self.shown(p, path) for p, i, path in rows}

    def spans_for_path(self, path: str) -> list[StoredSpan]:
        found = self.place_of(path)
        if found is None:
            return []
        place, own = found
        rows = self.q(
            f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE path = %s ORDER BY start_line, part",
            (own,), place,
        )  # fmt: skip
        return [self._span(place, r) for r in rows]

    def spans_by_symbol(self, name: str, limit: int = 20) -> list[StoredSpan]:
        rows = self.each(
            f"SELECT {SPAN_SELECT} FROM {{s}}.spans WHERE (symbol = %s OR qualname = %s) "
            "AND kind NOT IN ('block', 'window', 'paragraph') ORDER BY part, id LIMIT %s",
            (name, name, limit),
        )
        spans = [self._span(r[0], r[1:]) for r in rows]
        return sorted(spans, key=lambda s: (s.span.part, s.id))[:limit]

    def has_file(self, path: str) -> bool:
        found = self.place_of(path)
        if found is None:
            return False
        return bool(
            self.q("SELECT 1 FROM {s}.files WHERE path = %s LIMIT 1", (found[1],), found[0])
        )

    def paths_ending(self, tail: str, limit: int = 2) -> list[str]:
        rows = self.each(
            "SELECT path FROM {s}.files WHERE right(path, %s) = %s ORDER BY path LIMIT %s",
            (len(tail) + 1, "/" + tail, limit),
        )
        return sorted(self.shown(p, path) for p, path in rows)[:limit]

    def span_rows(self, ids: Sequence[int]) -> list[tuple]:
        wanted = self._by_place(ids)
        rows = self.each(
            "SELECT id, path, category, kind, symbol, qualname, start_line, end_line, part "
            "FROM {s}.spans WHERE id = ANY(%s)",
            lambda place: (wanted[place],), wanted,
        )  # fmt: skip
        return [(global_id(r[0], int(r[1])), self.shown(r[0], r[2]), *r[3:]) for r in rows]

    def code_languages(self) -> list[tuple[str, int]]:
        rows = self.each(
            "SELECT lang, count(*) FROM {s}.spans WHERE category = 'code' AND lang IS NOT NULL "
            "GROUP BY lang"
        )
        counts: Counter[str] = Counter()
        for _, lang, n in rows:
            counts[lang] += int(n)
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def text_lengths(self, category: str) -> list[int]:
        rows = self.each("SELECT length(text) FROM {s}.spans WHERE category = %s", (category,))
        return [int(r[1] or 0) for r in rows]

    def counts(self) -> dict[str, int]:
        if self._counts is None or self._counts[0] != self.shards:
            by_category: Counter[str] = Counter()
            for _, category, n in self.each(
                "SELECT category, count(*) FROM {s}.spans GROUP BY category"
            ):
                by_category[category] += int(n)
            files = sum(int(r[1]) for r in self.each("SELECT count(*) FROM {s}.files"))
            self._counts = (self.shards, {
                "files": files, "spans": int(sum(by_category.values())),
                "code_spans": int(by_category["code"]), "doc_spans": int(by_category["doc"]),
                "cached_vectors": 0,
            })  # fmt: skip
        return self._counts[1]

    # -- vectors ----------------------------------------------------------------------
    def vector_space(self, category: str) -> VectorSpace | None:
        """The space of ``category``'s vectors: the one most repositories' are in (a
        repository embedded by another model is searched without them: ``space_places``)."""
        spaces = [_space(v, category) for v in self.versions]
        held = Counter(s for s in spaces if s is not None)
        if not held:
            return None
        top = max(held.values())
        return next(s for s in spaces if s is not None and held[s] == top)

    def space_places(self, category: str) -> list[int]:
        """The places whose ``category`` vectors are in ``vector_space(category)``."""
        space = self.vector_space(category)
        if space is None or category not in CATEGORIES:
            return []
        return [p for p, v in enumerate(self.versions) if _space(v, category) == space]

    def vector_counts(self) -> dict[str, tuple[int, int]]:
        counts = self.counts()
        out = {}
        for category in CATEGORIES:
            total = counts[f"{category}_spans"]
            if not total:
                continue
            places = self.space_places(category)
            rows = self.each(f"SELECT count(*) FROM {{s}}.vec_{category}", (), places)
            embedded = sum(int(r[1]) for r in rows)
            out[category] = (min(embedded, total), total)
        return out

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest spans by cosine distance over each shard's HNSW index."""
        places = self.space_places(category)
        if k <= 0 or not places:
            return []
        with self.lock:
            ef = max(EF_SEARCH_MIN, 2 * k)
            if ef != self._ef_search:
                self.conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                self._ef_search = ef
            rows = self.each(
                f"SELECT span_id, v <=> %s AS d FROM {{s}}.vec_{category} ORDER BY d LIMIT %s",
                (np.asarray(vector, dtype=np.float32), k), places,
            )  # fmt: skip
        if len(places) > 1:
            rows = sorted(rows, key=lambda r: float(r[2]))[:k]
        return [(global_id(p, int(i)), 1.0 - float(d)) for p, i, d in rows]

    def vectors(self, category: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        places = set(self.space_places(category))
        wanted = {p: i for p, i in self._by_place(ids).items() if p in places}
        rows = self.each(
            f"SELECT span_id, v FROM {{s}}.vec_{category} WHERE span_id = ANY(%s)",
            lambda place: (wanted[place],), wanted,
        )  # fmt: skip
        return {global_id(p, int(i)): v.to_numpy().astype(np.float32) for p, i, v in rows}

    def all_vectors(self, category: str, place: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of ``category`` in one shard: (its own span ids ascending, rows)."""
        space = _space(self.versions[place], category)
        if space is None or category not in CATEGORIES:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        sql = f"SELECT span_id, v FROM {self.versions[place].shard}.vec_{category} ORDER BY span_id"
        rows = self._run(sql, (), binary=True)  # binary: no text to parse, ~30x faster
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.empty((len(rows), space.dim), dtype=np.float32)
        for i, (_, v) in enumerate(rows):
            matrix[i] = v.to_numpy()
        return ids, matrix

    def close(self) -> None:
        with self.lock:
            self.conn.close()


def _space(version: Version, category: str) -> VectorSpace | None:
    space = version.spaces.get(category)
    return VectorSpace(str(space["model"]), int(space["dim"])) if space else None


def _first(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


__all__ = [
    "PLACE_BITS",
    "ShardGone",
    "ShardReader",
    "Version",
    "current_version",
    "current_versions",
    "global_id",
    "split_id",
]
