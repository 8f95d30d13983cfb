"""Publish a repository's local index to the team store: incremental and all-or-nothing.

A publish compares the local files' content hashes with the store's current generation of
the repository and writes a new generation (a new shard, llmc/team/schema.py): the rows of
unchanged files are copied inside the server, the changed files' spans and vectors are sent
from the local index (span ids and vectors as they are there: nothing is re-embedded), and
one transaction points the repository at the new shard. A publish killed at any step before
that leaves the previous generation searchable; its half-written shard is dropped by the
next publish. An unchanged repository writes nothing (``files_changed`` 0, ``spans_sent`` 0).
Two publishes of one repository do not run at once (an advisory lock).
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.errors import TeamError
from llmc.index.progress import Progress, Silent
from llmc.team.connect import connect, shown_url
from llmc.team.schema import (
    CATEGORIES,
    checked_shard,
    ensure_schema,
    shard_indexes,
    shard_name,
    shard_tables,
    stale_shards,
)

log = logging.getLogger(__name__)

SPAN_COLUMNS = (
    "id", "path", "lang", "category", "kind", "symbol", "qualname", "start_line", "end_line",
    "part", "signature", "docstring", "header", "text", "lex_fields", "lex_terms", "lex_tfs",
    "lens",
)  # fmt: skip
FILE_COLUMNS = ("path", "hash", "lang", "category", "lex_terms", "lex_tfs", "len")


@dataclass(frozen=True)
class PublishReport:
    """What a publish did (`llmc team push --json`)."""

    repo: str
    store: str  # the store's URL, without credentials
    generation: int
    commit: str
    files: int
    spans: int
    files_changed: int = 0
    files_removed: int = 0
    spans_sent: int = 0
    spans_kept: int = 0
    vectors_sent: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Local:
    """The local index, as a publish reads it."""

    hashes: dict[str, str]  # path -> content hash
    facts: dict[str, tuple[str | None, str | None]]  # path -> (lang, category)
    spaces: dict[str, dict[str, Any]]  # category -> {"model": ..., "dim": ...}


def repo_name(root: Path, cfg: Config, name: str | None = None) -> str:
    chosen = (name or cfg.team.repo or root.resolve().name).strip()
    if not chosen or len(chosen) > 200 or any(ord(c) < 32 for c in chosen):
        raise TeamError(f"not a usable repository name for the team store: {chosen!r}")
    return chosen


def head_commit(root: Path) -> str:
    """The repository's HEAD commit, or '' outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def publish(
    root: Path, cfg: Config, name: str | None = None, progress: Progress | None = None
) -> PublishReport:
    """Publish ``root``'s index as ``name`` (``team.repo``, else the directory's name);
    ``progress`` hears its phases (copy, send, index, switch) and the files sent."""
    from llmc.paths import db_path
    from llmc.store.db import Store

    started = time.perf_counter()
    repo = repo_name(root, cfg, name)
    store = Store(db_path(root), readonly=True)
    try:
        local = _read_local(store)
        with store_session(cfg) as conn, _publish_lock(conn, repo):
            report = _publish(conn, store, local, repo, head_commit(root), progress or Silent())
    finally:
        store.close()
    out = asdict(report) | {"store": shown_url(cfg.team.url)}
    out["seconds"] = round(time.perf_counter() - started, 3)
    return PublishReport(**out)


def publish_after_index(root: Path, cfg: Config, why: str) -> PublishReport | None:
    """``team.publish``: publish after an index run (a git hook's, the daemon's). Never
    raises: a failure is one warning in the log, and a run whose vectors are still being
    embedded is published by the run that finishes them."""
    if not (cfg.team.publish and cfg.team.url):
        return None
    try:
        report = publish(root, cfg)
    except VectorsPending as e:
        log.info("%s: not published yet: %d spans await their vectors", why, e.pending)
        return None
    except TeamError as e:
        log.warning("%s: not published to the team store: %s", why, e)
        return None
    log.info("%s: published %s (version %d): %d files changed, %d spans sent", why,
             report.repo, report.generation, report.files_changed, report.spans_sent)  # fmt: skip
    return report


class VectorsPending(TeamError):
    """The local index still has spans to embed: a publish now would miss their vectors."""

    def __init__(self, pending: int):
        super().__init__(
            f"{pending} spans of this index have no vector yet: run `llmc index` (or let "
            "the daemon finish) before publishing, so the team store gets every vector"
        )
        self.pending = pending


@contextmanager
def store_session(cfg: Config) -> Iterator[Any]:
    """A connection to the team store with its schema checked, closed afterwards."""
    conn = connect(cfg.team, autocommit=True)
    try:
        ensure_schema(conn)
        yield conn
    finally:
        conn.close()


def _read_local(store: Any) -> _Local:
    missing = store.span_ids_missing_vectors()
    if missing:
        raise VectorsPending(len(missing))
    files = store.files()
    spaces = {}
    for category in CATEGORIES:
        space = store.vector_space(category)
        if space is not None:
            spaces[category] = {"model": space.model_id, "dim": space.dim}
    return _Local(
        hashes={p: f.content_hash for p, f in files.items()},
        facts={p: (f.lang, f.category) for p, f in files.items()},
        spaces=spaces,
    )


class _publish_lock:
    """The session-level advisory lock of one repository's publishes (none waits)."""

    def __init__(self, conn: Any, repo: str):
        self.conn, self.repo = conn, repo

    def __enter__(self) -> None:
        row = self.conn.execute(
            "SELECT pg_try_advisory_lock(hashtext('llmc.publish'), hashtext(%s))", (self.repo,)
        ).fetchone()
        if not row[0]:
            raise TeamError(f"another publish of {self.repo} is running; try again when it ends")

    def __exit__(self, *exc: object) -> None:
        self.conn.execute(
            "SELECT pg_advisory_unlock(hashtext('llmc.publish'), hashtext(%s))", (self.repo,)
        )


def _publish(
    conn: Any, store: Any, local: _Local, repo: str, commit: str, progress: Progress
) -> PublishReport:
    row = conn.execute(
        "SELECT shard, generation, spaces, commit FROM llmc.repos WHERE name = %s", (repo,)
    ).fetchone()
    old_shard, old_gen, old_spaces, old_commit = row if row else (None, 0, None, "")
    old_shard = checked_shard(old_shard) if old_shard is not None else None
    for leftover in stale_shards(conn, repo, keep=old_shard):
        conn.execute(f"DROP SCHEMA {leftover} CASCADE")  # a killed publish's half shard
    old_hashes = (
        dict(conn.execute(f"SELECT path, hash FROM {old_shard}.files").fetchall())
        if old_shard
        else {}
    )
    same_space = old_spaces == local.spaces
    changed = sorted(p for p, h in local.hashes.items() if old_hashes.get(p) != h)
    removed = sorted(set(old_hashes) - set(local.hashes))
    kept = sorted(set(local.hashes) - set(changed))
    if old_shard and not changed and not removed and same_space:
        if commit != old_commit:
            conn.execute("UPDATE llmc.repos SET commit = %s WHERE name = %s", (commit, repo))
        spans = conn.execute(f"SELECT count(*) FROM {old_shard}.spans").fetchone()[0]
        return PublishReport(repo, "", old_gen, commit, len(local.hashes), spans)
    shard = shard_name(repo, old_gen + 1)
    dims = {c: int(s["dim"]) for c, s in local.spaces.items()}
    with conn.transaction():
        for sql in shard_tables(shard, dims):
            conn.execute(sql)
    progress.phase("copying unchanged files in the store", None)
    spans_kept = _copy_kept(conn, old_shard, shard, kept, dims if same_space else {})
    resend = kept if not same_space else []
    progress.phase("sending changed files", len(changed))
    sent, vectors = _send(conn, store, shard, local, changed, resend, dims, progress)
    progress.phase("building the store's indexes", None)
    for sql in shard_indexes(shard, dims):
        conn.execute(sql)
    total = conn.execute(f"SELECT count(*) FROM {shard}.spans").fetchone()[0]
    progress.phase("switching to the new version", None)
    with conn.transaction():  # the swap: readers see the old generation or this one
        _swap(conn, repo, shard, old_gen, commit, len(local.hashes), total, local.spaces)
    if old_shard:
        conn.execute(f"DROP SCHEMA {old_shard} CASCADE")
    return PublishReport(
        repo, "", old_gen + 1, commit, len(local.hashes), total, files_changed=len(changed),
        files_removed=len(removed), spans_sent=sent, spans_kept=spans_kept, vectors_sent=vectors,
    )  # fmt: skip


def _copy_kept(conn: Any, old: str | None, new: str, paths: Sequence[str], dims: dict) -> int:
    """Copy the unchanged files' rows (and, when the vector spaces are the same, their
    vectors) from the old shard inside the server; how many spans."""
    if not old or not paths:
        return 0
    cols = ", ".join(SPAN_COLUMNS)
    with conn.transaction():
        conn.execute(
            f"INSERT INTO {new}.files SELECT * FROM {old}.files WHERE path = ANY(%s)", (paths,)
        )
        n = conn.execute(
            f"INSERT INTO {new}.spans ({cols}) SELECT {cols} FROM {old}.spans WHERE path = ANY(%s)",
            (paths,),
        ).rowcount
        for category in dims:
            conn.execute(
                f"INSERT INTO {new}.vec_{category} SELECT v.* FROM {old}.vec_{category} v "
                f"JOIN {new}.spans s ON s.id = v.span_id"
            )
    return n


def _send(
    conn: Any, store: Any, shard: str, local: _Local, changed: Sequence[str],
    vectors_only: Sequence[str], dims: dict[str, int], progress: Progress,
) -> tuple[int, int]:  # fmt: skip
    """Send the changed files (rows, spans, vectors) and the vectors of ``vectors_only``
    (a changed embedding space) from the local index; (spans sent, vectors sent)."""
    from llmc.store.file_lexical import file_text
    from llmc.team.terms import file_terms, span_terms

    spans_sent = vectors_sent = 0
    with conn.transaction(), conn.cursor() as cur:
        ids: dict[str, list[int]] = {c: [] for c in dims}
        file_rows = []
        with cur.copy(f"COPY {shard}.spans ({', '.join(SPAN_COLUMNS)}) FROM STDIN") as copy:
            for path in changed:
                spans = store.spans_for_path(path)
                for stored in spans:
                    s, lex = stored.span, span_terms(stored.span)
                    copy.write_row((stored.id, s.path, s.lang, s.category, s.kind,
                                    *map(_pg_text, (s.symbol, s.qualname)), s.start_line,
                                    s.end_line, s.part,
                                    *map(_pg_text, (s.signature, s.docstring, s.header, s.text)),
                                    lex.fields, lex.terms, lex.tfs, lex.lens))  # fmt: skip
                    if s.category in ids:
                        ids[s.category].append(stored.id)
                    spans_sent += 1
                text = file_text([(x.span.start_line, x.span.end_line, x.span.text or "")
                                  for x in spans])  # fmt: skip
                file_rows.append((path, local.hashes[path], *local.facts[path], *file_terms(text)))
                progress.advance()
        with cur.copy(f"COPY {shard}.files ({', '.join(FILE_COLUMNS)}) FROM STDIN") as copy:
            for row in file_rows:
                copy.write_row(row)
        for stored in _spans(store, vectors_only):
            if stored.span.category in ids:
                ids[stored.span.category].append(stored.id)
        for category, wanted in ids.items():
            sql = f"COPY {shard}.vec_{category} (span_id, v) FROM STDIN (FORMAT BINARY)"
            with cur.copy(sql) as copy:
                copy.set_types(["int8", "vector"])
                for start in range(0, len(wanted), 2000):
                    found = store.vectors(category, wanted[start : start + 2000])
                    for span_id, vector in found.items():
                        copy.write_row((span_id, vector))
                        vectors_sent += 1
    return spans_sent, vectors_sent


def _pg_text(text: str | None) -> str | None:
    """``text`` as PostgreSQL can hold it: a NUL (which a source file may carry in a string
    literal, and SQLite keeps) becomes U+FFFD. BM25's terms are taken before, from the span
    as the local index holds it, so the scores do not move."""
    return text.replace("\x00", "\ufffd") if text and "\x00" in text else text


def _spans(store: Any, paths: Sequence[str]) -> Iterator[Any]:
    for path in paths:
        yield from store.spans_for_path(path)


def _swap(conn: Any, repo: str, shard: str, old_gen: int, commit: str, files: int,
          spans: int, spaces: dict) -> None:  # fmt: skip
    row = conn.execute(
        "SELECT generation FROM llmc.repos WHERE name = %s FOR UPDATE", (repo,)
    ).fetchone()
    if (row[0] if row else 0) != old_gen:
        raise TeamError(f"{repo} was published by someone else meanwhile; publish again")
    conn.execute(
        """INSERT INTO llmc.repos (name, shard, generation, commit, files, spans, spaces)
           VALUES (%s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (name) DO UPDATE SET shard = EXCLUDED.shard,
             generation = EXCLUDED.generation, commit = EXCLUDED.commit,
             files = EXCLUDED.files, spans = EXCLUDED.spans, spaces = EXCLUDED.spaces,
             published_at = now()""",
        (repo, shard, old_gen + 1, commit, files, spans, json.dumps(spaces)),
    )


def unpublish(cfg: Config, repo: str) -> bool:
    """Remove ``repo`` from the store (its row, then its shards); False when it was not
    there. Waits for no publish: one running holds the repository's lock and this refuses."""
    with store_session(cfg) as conn, _publish_lock(conn, repo):
        with conn.transaction():
            gone = conn.execute("DELETE FROM llmc.repos WHERE name = %s", (repo,)).rowcount
        for shard in stale_shards(conn, repo, keep=None):
            conn.execute(f"DROP SCHEMA {shard} CASCADE")
    return bool(gone)


def published(cfg: Config) -> list[dict[str, Any]]:
    """Every repository in the store: name, generation, commit, files, spans, when."""
    with store_session(cfg) as conn:
        rows = conn.execute(
            "SELECT name, generation, commit, files, spans, published_at FROM llmc.repos "
            "ORDER BY name"
        ).fetchall()
    keys = ("repo", "generation", "commit", "files", "spans", "published_at")
    return [dict(zip(keys, (*r[:5], r[5].isoformat()), strict=True)) for r in rows]


__all__ = [
    "PublishReport",
    "VectorsPending",
    "head_commit",
    "publish",
    "publish_after_index",
    "published",
    "repo_name",
    "unpublish",
]
