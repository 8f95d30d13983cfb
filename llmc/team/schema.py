"""The team store's schema: created and versioned by llmc, one shard per repository.

``llmc.meta`` holds the schema version; ``llmc.repos`` one row per published repository,
naming the PostgreSQL schema (the *shard*) that holds its current generation. A shard has
the repository's files (path, content hash), spans (as the local index holds them, span ids
unchanged, with their analysed terms per field: ``llmc/team/terms.py``), one vector table
per embedding category (pgvector, HNSW over cosine distance), and what a version builds
from them once loaded: one posting list per (field, term) (``postings``), one per term of
the whole files (``file_postings``), and the documents' lengths and categories in one row
each (``span_stats``, ``file_stats``), so a query fetches its terms' lists and scores them
with BM25 as the local index does. A publish writes
a new shard and swaps the pointer in one transaction, so readers see the old generation or
the new one, never half of one (zoekt's model: a shard per repository, replaced whole).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from llmc.errors import TeamError

SCHEMA_VERSION = 3  # 2: BM25 statistics instead of a tsvector; 3: postings hold positions
CATEGORIES = ("code", "doc")
SHARD_PREFIX = "r_"

_GLOBAL = (
    "CREATE SCHEMA IF NOT EXISTS llmc",
    "CREATE TABLE IF NOT EXISTS llmc.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS llmc.repos (
        name text PRIMARY KEY,
        shard text NOT NULL,
        generation bigint NOT NULL,
        commit text NOT NULL DEFAULT '',
        files integer NOT NULL,
        spans integer NOT NULL,
        spaces jsonb NOT NULL,
        published_at timestamptz NOT NULL DEFAULT now())""",
)


def ensure_schema(conn: Any) -> None:
    """Create the global tables when missing; refuse a store of another schema version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('llmc.schema'))")
        for sql in _GLOBAL:
            conn.execute(sql)
        row = conn.execute("SELECT value FROM llmc.meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO llmc.meta (key, value) VALUES ('schema_version', %s)",
                (str(SCHEMA_VERSION),),
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise TeamError(
                f"the team store's schema is version {row[0]}; this llmc knows version "
                f"{SCHEMA_VERSION}: use an llmc of the same version as the store"
            )


def check_schema(conn: Any) -> bool:
    """Read-only (a replica answers it): False when nothing was ever published to the
    store; TeamError when its schema is another version than this llmc's."""
    if conn.execute("SELECT to_regclass('llmc.meta')").fetchone()[0] is None:
        return False
    row = conn.execute("SELECT value FROM llmc.meta WHERE key = 'schema_version'").fetchone()
    if row is not None and row[0] != str(SCHEMA_VERSION):
        raise TeamError(
            f"the team store's schema is version {row[0]}; this llmc knows version "
            f"{SCHEMA_VERSION}: use an llmc of the same version as the store"
        )
    return True


SHARD_RE = re.compile(r"^r_[a-z0-9_]{1,32}_[0-9a-f]{8}_g[0-9]{1,18}$")


def checked_shard(name: object) -> str:
    """``name`` read back from ``llmc.repos``, refused unless it is a shard name llmc makes:
    it goes into SQL as an identifier, and whoever can write to the store (any publisher)
    could otherwise make every searcher run a statement of theirs."""
    if not isinstance(name, str) or not SHARD_RE.match(name):
        raise TeamError(f"the team store names a shard llmc did not make: {str(name)[:80]!r}")
    return name


def shard_name(repo: str, generation: int) -> str:
    """The PostgreSQL schema of ``repo``'s generation: ``r_<slug>_<hash>_g<generation>``
    (a name any repository name maps to safely; the hash keeps similar names apart)."""
    return f"{shard_prefix(repo)}g{generation}"


def shard_prefix(repo: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", repo.lower()).strip("_")[:32] or "repo"
    digest = hashlib.sha256(repo.encode()).hexdigest()[:8]
    return f"{SHARD_PREFIX}{slug}_{digest}_"


def shard_tables(shard: str, dims: dict[str, int]) -> list[str]:
    """DDL of a new shard: files, spans and one vector table per category in ``dims``."""
    out = [
        f"CREATE SCHEMA {shard}",
        f"CREATE TABLE {shard}.files (path text PRIMARY KEY, hash text NOT NULL, "
        "lang text, category text, lex_terms text[] NOT NULL, lex_tfs integer[] NOT NULL, "
        "len integer NOT NULL)",
        f"""CREATE TABLE {shard}.spans (
            id bigint PRIMARY KEY, path text NOT NULL, lang text, category text, kind text,
            symbol text, qualname text, start_line integer, end_line integer,
            part integer, signature text, docstring text, header text, text text,
            lex_fields smallint[] NOT NULL, lex_terms text[] NOT NULL,
            lex_tfs integer[] NOT NULL, lens integer[] NOT NULL)""",
    ]
    for category, dim in dims.items():
        out.append(
            f"CREATE TABLE {shard}.vec_{category} (span_id bigint PRIMARY KEY, v vector({dim}))"
        )
    return out


def shard_indexes(shard: str, dims: dict[str, int]) -> list[str]:
    """What a version builds once its rows are loaded: indexes (faster than maintaining
    them row by row), the posting lists and the documents' statistics (``terms.py``)."""
    out = [
        f"CREATE INDEX ON {shard}.spans (path)",
        f"CREATE INDEX ON {shard}.spans (symbol)",
        f"CREATE INDEX ON {shard}.spans (qualname)",
        # a posting names a document by its position in id order (span_stats' order), so a
        # query scores it without looking its id up
        f"""CREATE TABLE {shard}.postings AS
            SELECT u.field, u.term, array_agg(s.n ORDER BY s.n) AS ids,
                   array_agg(u.tf ORDER BY s.n) AS tfs
            FROM (SELECT (row_number() OVER (ORDER BY id) - 1)::int AS n, * FROM {shard}.spans) s,
                 unnest(s.lex_fields, s.lex_terms, s.lex_tfs) AS u(field, term, tf)
            GROUP BY u.field, u.term""",
        f"CREATE UNIQUE INDEX ON {shard}.postings (term, field)",
        f"""CREATE TABLE {shard}.span_stats AS
            SELECT array_agg(id ORDER BY id) AS ids, array_agg(category ORDER BY id) AS cats,
                   array_agg(lens ORDER BY id) AS lens FROM {shard}.spans""",
        f"""CREATE TABLE {shard}.file_postings AS
            SELECT u.term, array_agg(f.n ORDER BY f.n) AS ids, array_agg(u.tf ORDER BY f.n) AS tfs
            FROM (SELECT (row_number() OVER (ORDER BY path) - 1)::int AS n, * FROM {shard}.files) f,
                 unnest(f.lex_terms, f.lex_tfs) AS u(term, tf)
            GROUP BY u.term""",
        f"CREATE UNIQUE INDEX ON {shard}.file_postings (term)",
        f"""CREATE TABLE {shard}.file_stats AS
            SELECT array_agg(path ORDER BY path) AS paths, array_agg(len ORDER BY path) AS lens
            FROM {shard}.files""",
    ]
    for category in dims:
        out.append(f"CREATE INDEX ON {shard}.vec_{category} USING hnsw (v vector_cosine_ops)")
    return out


def stale_shards(conn: Any, repo: str, keep: str | None) -> list[str]:
    """``repo``'s shards other than ``keep``: left by a publish that was killed, or by a
    swap whose old generation was not dropped yet."""
    prefix = shard_prefix(repo)
    rows = conn.execute(
        "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
    ).fetchall()
    return [
        r[0]
        for r in rows
        if r[0] != keep and r[0][len(prefix) :].startswith("g") and SHARD_RE.match(r[0])
    ]


__all__ = [
    "CATEGORIES",
    "SCHEMA_VERSION",
    "check_schema",
    "checked_shard",
    "ensure_schema",
    "shard_indexes",
    "shard_name",
    "shard_prefix",
    "shard_tables",
    "stale_shards",
]
