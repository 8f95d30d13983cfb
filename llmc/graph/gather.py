"""Each file's graph facts for one update (:func:`gather_facts`): the facts cache's while
the store's content hash matches, else the chunk workers', else extracted here from disk
(:func:`extract_one`, never through a symlink out of the repository)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.graph import spanmap, warm
from llmc.graph.codec import decode_facts_lazy, encode_facts
from llmc.graph.extract import extract_file
from llmc.graph.facts import with_span_defs
from llmc.graph.langs import is_doc, spec_for
from llmc.graph.model import FileFacts
from llmc.safe_read import read_inside

if TYPE_CHECKING:
    from llmc.config import GraphConfig
    from llmc.store.db import Store

log = logging.getLogger(__name__)

FAILURES = ("unreadable", "binary", "extract", "doc:")  # errors that lose a file's facts
_BOM = b"\xef\xbb\xbf"  # the indexer reads text without it (``walk.read_text``)


@dataclass
class Gathered:
    """Every indexed file's facts for one update, and how each came."""

    facts: dict[str, FileFacts] = field(default_factory=dict)
    entries: dict[str, Any] = field(default_factory=dict)  # the next facts cache's files
    reextracted: set[str] = field(default_factory=set)  # from the workers or from disk
    extracted: int = 0
    reused: int = 0
    failed: int = 0
    spans_by_path: dict[str, list[tuple]] | None = None  # read when a file is extracted


def gather_facts(
    repo_root: Path,
    store: Store,
    records: Mapping[str, Any],
    changed: set[str],
    cached_files: dict[str, Any],
    given: Mapping[str, bytes],
    cfg: GraphConfig,
) -> Gathered:
    """Each file's facts: the cached ones while the store's content hash matches (and the
    file is not ``changed``), else the chunk workers' (``given``, checked), else extracted
    here from disk."""
    out = Gathered()
    # A kept state (the daemon) keeps each file's JSON for its next cache write, and
    # decodes calls and mentions from it; a one-shot run reads them again from ``given``
    # (the indexer's spool file) when the file is resolved and when the cache is written.
    keep_raw = warm.enabled()
    for path in sorted(records):
        rec = records[path]
        entry = cached_files.get(path)
        if (
            path not in changed
            and entry is not None
            and rec.content_hash
            and entry.get("hash") == rec.content_hash
        ):
            cached = entry.get("facts")
            if isinstance(cached, FileFacts):
                out.facts[path] = cached
                out.entries[path] = entry
                out.reused += 1
                continue
            log.debug("%s: cached graph facts unreadable; re-extracting", path)
        raw = given.get(path)
        f = None
        if raw is not None:
            f = decode_facts_lazy(raw, path, raw if keep_raw else given)
        if f is None:
            if raw is not None:
                log.debug("%s: graph facts from the chunk worker unreadable", path)
            raw = None
            if out.spans_by_path is None:
                out.spans_by_path = spanmap.read_span_rows(store)
            f = extract_one(
                repo_root, path, rec.lang, rec.category, cfg, out.spans_by_path.get(path)
            )
        out.reextracted.add(path)
        out.extracted += 1
        if f.error.startswith(FAILURES):
            out.failed += 1
        out.facts[path] = f
        if raw is None or keep_raw:
            out.entries[path] = {"hash": rec.content_hash, "facts": f, "raw": raw}
        else:  # read again from ``given`` when the cache is written
            out.entries[path] = {"hash": rec.content_hash, "facts": f, "raw": None, "src": given}
        del raw
    return out


def facts_as_json(entries: dict[str, Any]) -> None:
    """Let the next facts cache's entries hold each file's facts as JSON only (kept,
    encoded now, or read again from the spool they were given in: ``"src"``), not as
    records, so that the records go with the resolver's tables."""
    for e in entries.values():
        if not e.get("raw") and e.get("src") is None:
            e["raw"] = encode_facts(e["facts"])
        e["facts"] = None


def extract_one(
    repo_root: Path,
    path: str,
    lang: str | None,
    category: str | None,
    cfg: GraphConfig,
    spans: list[tuple] | None,
) -> FileFacts:
    cat = "doc" if is_doc(path, lang, category) and spec_for(path, None) is None else "code"
    try:
        # Never through a symlink out of the repository (llmc.safe_read), like the indexer.
        raw = read_inside(repo_root, path, cfg.max_file_size)
        if len(raw) > cfg.max_file_size:
            f = FileFacts(
                path, lang or "", cat, error=f"too large (over {cfg.max_file_size} bytes)"
            )
        else:
            if b"\x00" in raw[:8192]:
                f = FileFacts(path, lang or "", cat, error="binary")
            else:
                if raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                f = extract_file(path, raw.decode("utf-8", "replace"), lang, category)
    except OSError as e:
        f = FileFacts(path, lang or "", cat, error=f"unreadable: {e.strerror or e}")
    if f.error:
        log.debug("%s: %s", path, f.error)
    return with_span_defs(f, spans)


__all__ = ["FAILURES", "Gathered", "extract_one", "facts_as_json", "gather_facts"]
