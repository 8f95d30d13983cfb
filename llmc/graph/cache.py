"""The graph's facts cache, ``.llmc/graph_facts.jsonl``: each file's facts and resolution.

JSON Lines, written whole and atomically by :func:`write`:

* line 1, the header: ``{"version", "token", "files": {path: content hash}, "state"}``
  (``state``: what the per-file results were resolved under, or null);
* ``["f", path, facts]`` per file (:meth:`FileFacts.to_json`);
* ``["r", path, result]`` per resolved file (:func:`llmc.graph.codec.result_to_data`).

A no-op update reads the header only; the other lines are decoded when something must be
resolved (:func:`load_facts`, :func:`load_state`). Each file's line is kept as bytes with
its entry (``"raw"``), so a rewrite encodes only what changed. The daemon's kept updates
append deltas to ``graph_facts.journal.jsonl`` instead, one JSON line each
(:func:`append_delta`), replayed on the next read while each follows the token reached.

Everything read is checked (:mod:`llmc.graph.codec`): a line or record of the wrong shape
or types, a foreign version or a torn journal is a cache miss for what it held. A cache of
an older llmc (``graph_facts.pickle``: never read) is deleted when found.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from llmc.graph.atomic import write_atomic
from llmc.graph.codec import (
    decode_facts_lazy,
    encode_facts,
    encode_result,
    facts_from_data,
    result_from_data,
    signature_from_data,
)
from llmc.graph.incremental import STATE_VERSION, FileResult, ResolutionState
from llmc.graph.model import FACTS_VERSION
from llmc.offset_reads import OffsetReads
from llmc.paths import open_state_file

log = logging.getLogger(__name__)

JOURNAL = "graph_facts.journal.jsonl"  # deltas appended to the cache by kept updates
JOURNAL_MAX = 32 * 2**20  # bytes; past this the cache is written whole again
# Caches of older versions, deleted unread (pickles can run code when loaded).
LEGACY = ("graph_facts.pickle", "graph_facts.journal", "graph_facts.json")


def journal(facts_file: Path) -> Path:
    return facts_file.with_name(JOURNAL)


def remove_legacy(llmc_dir: Path) -> None:
    for name in LEGACY:
        try:
            (llmc_dir / name).unlink()
        except OSError:
            pass


def load(path: Path) -> dict[str, Any]:
    """The cache's header and journal as ``{"version", "token", "files": {path: {"hash"}},
    "state", "body"}`` (``body``: where the lines after the header are, read when needed:
    the file, its offset, its inode, size and mtime); {} when missing, unreadable, foreign
    or of another version. Derived data: anything unreadable means re-extracting."""
    remove_legacy(path.parent)
    try:
        with open(path, "rb") as fh:
            first = fh.readline()
            st = os.fstat(fh.fileno())
    except FileNotFoundError:
        return {}
    except OSError as e:
        log.debug("graph facts cache unreadable (%s); re-extracting everything", e)
        return {}
    try:
        head = orjson.loads(first)
    except ValueError as e:  # orjson.JSONDecodeError is a ValueError
        log.debug("graph facts cache unreadable (%s); re-extracting everything", e)
        return {}
    if type(head) is not dict or head.get("version") != FACTS_VERSION:
        return {}
    token, files = head.get("token"), head.get("files")
    if type(token) is not str or not token or type(files) is not dict:
        return {}
    if not all(type(h) is str for h in files.values()):
        return {}
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    data = {
        "version": FACTS_VERSION,
        "token": token,
        "files": {p: {"hash": h} for p, h in files.items()},
        "state": head.get("state"),
        "body": (Path(path), len(first), stamp),
    }
    _replay_journal(data, journal(path))
    return data


def _replay_journal(data: dict[str, Any], path: Path) -> None:
    """Apply the deltas appended after the cache was written (see :func:`append_delta`),
    each only if it follows the token reached so far; a torn, malformed or foreign record
    ends the replay (the graph's token then tells the cache is stale)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return
    facts: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for line in raw.split(b"\n")[:-1]:  # the last piece: "" or a torn record
        try:
            rec = orjson.loads(line)
        except ValueError:
            break
        if type(rec) is not dict or rec.get("prev") != data["token"]:
            break
        token, hashes = rec.get("token"), rec.get("hashes")
        new_facts, new_results = rec.get("facts"), rec.get("results")
        if type(token) is not str or not token:
            break
        if not all(type(d) is dict for d in (hashes, new_facts, new_results)):
            break
        if not all(type(h) is str for h in hashes.values()):
            break
        data["token"] = token
        for p, digest in hashes.items():
            data["files"][p] = {"hash": digest}
        facts.update(new_facts)
        results.update(new_results)
    data["facts_delta"], data["results_delta"] = facts, results


def load_facts(cache: dict[str, Any], keep_raw: bool = True) -> None:
    """Decode the facts into the cache's entries (``"facts"``: a FileFacts, or None when
    its line is missing or malformed), only when something must be resolved: a no-op
    update compares hashes and never pays for building ~100k small records. A file's
    calls, mentions and bindings stay in its line until read (``LazyFacts``): with
    ``keep_raw`` (a kept state) in the line's bytes, kept (``"raw"``, written again as
    is), else read again from the cache file by offset (``"src"``: on 89k files their
    bytes are ~0.6 GB). Keeps where the result lines are for :func:`load_state`."""
    body = cache.pop("body", None)
    if body is None:
        return
    files: dict[str, Any] = cache.get("files", {})
    for entry in files.values():
        entry["facts"] = entry["raw"] = None
    results, facts_src = CacheLines(), CacheLines()
    for at, line, fd in _lines(*body):
        results.use(fd)
        facts_src.use(fd)
        kind = line[:5]
        if kind in (b'["r",', b'["f",'):  # the JSON after the path: left undecoded here
            path, start = _value_at(line)
            if path is not None and kind == b'["r",':
                results.at(path, at + start, len(line) - 1 - start)
                continue
            entry = files.get(path) if path is not None else None
            if entry is not None:
                raw = line[start:-1]
                if keep_raw:
                    entry["facts"] = decode_facts_lazy(raw, path, raw)
                    entry["raw"] = raw if entry["facts"] is not None else None
                else:
                    facts_src.at(path, at + start, len(raw))
                    entry["facts"] = decode_facts_lazy(raw, path, facts_src)
                    entry["src"] = facts_src if entry["facts"] is not None else None
                continue
            if path is not None:
                continue  # facts of a file no longer indexed
        try:
            rec = orjson.loads(line)
        except ValueError:
            continue  # that file's facts are missing: it is extracted again
        if type(rec) is not list or len(rec) != 3 or type(rec[1]) is not str:
            continue
        kind, path, value = rec
        if kind == "r":
            results.given(path, orjson.dumps(value))
        elif kind == "f" and path in files:
            _given_facts(files[path], path, value)
    del body
    for path, value in (cache.pop("facts_delta", None) or {}).items():
        if path in files:
            _given_facts(files[path], path, value)
    for path, value in (cache.pop("results_delta", None) or {}).items():
        results.given(path, orjson.dumps(value))
    cache["results"] = results


def _given_facts(entry: dict[str, Any], path: str, value: Any) -> None:
    """An entry's facts from decoded JSON (a journal's delta, a line read whole)."""
    entry["facts"] = facts_from_data(value, path)
    entry["raw"] = None  # (encoded again when the cache is written)
    entry.pop("src", None)


class CacheLines(OffsetReads):
    """JSON values of the facts cache's lines (each file's facts, or result), by path,
    read from the cache file by offset when asked (the file as it was opened: a cache
    replaced meanwhile is still this one), or as given (a journal's delta, a line whose
    path needed decoding). Not held in memory: ~0.7 GB of result lines and ~0.6 GB of
    facts at 100k files, which a one-shot update reads once or twice each."""

    def use(self, fd: int) -> None:
        """Read from ``fd`` (a duplicate of it, kept until :meth:`close`)."""
        if self._fd is None:
            self._fd = os.dup(fd)

    def at(self, path: str, offset: int, length: int) -> None:
        self._where[path] = (offset, length)

    def given(self, path: str, raw: bytes) -> None:
        self._where[path] = raw


def _lines(
    path: Path, offset: int, stamp: tuple[int, int, int]
) -> Iterator[tuple[int, bytes, int]]:
    """(offset, line, the file's descriptor) of each non-empty line of the cache after its
    header, read one at a time (on nine large projects the cache is 260 MB); none when
    the file is no longer the one whose header was read."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if (st.st_ino, st.st_size, st.st_mtime_ns) != stamp:
                log.debug("graph facts cache replaced since its header was read")
                return
            fh.seek(offset)
            at = offset
            for line in fh:
                start, at = at, at + len(line)
                line = line.rstrip(b"\n")
                if line:
                    yield start, line, fh.fileno()
    except OSError as e:
        log.debug("graph facts cache unreadable (%s); re-extracting everything", e)


def _value_at(line: bytes) -> tuple[str | None, int]:
    """(path, where the value's JSON starts in the line) of a line ``["f" or "r", path,
    value]``, the value left undecoded; (None, 0) unless the path reads back as it is
    written (the line is then decoded whole)."""
    end = line.find(b'",', 6)
    if end < 0 or line[-1:] != b"]":
        return None, 0
    quoted = line[5 : end + 1]
    try:
        path = orjson.loads(quoted)
    except ValueError:
        return None, 0
    if type(path) is not str or orjson.dumps(path) != quoted:
        return None, 0
    return path, end + 2


def load_state(
    cache: dict[str, Any], keep_raw: bool = True
) -> tuple[ResolutionState, dict[str, bytes]] | None:
    """The previous run's per-file resolution and (``keep_raw``) each file's result line
    as kept bytes (None: resolve every file)."""
    got = state_lines(cache)
    if got is None:
        return None
    state, lines = got
    files: dict[str, FileResult] = {}
    raws: dict[str, bytes] = {}
    for path in lines:  # in order (the merge's), each line read and decoded in turn
        raw = lines[path]
        try:
            value = orjson.loads(raw)
        except ValueError:
            value = None
        res = result_from_data(value)
        value = None
        if res is None:
            log.debug("graph resolution cache of %s malformed; resolving every file", path)
            return None
        files[path] = res
        if raw is not None and keep_raw:
            raws[path] = raw
    return ResolutionState(state.version, state.name_fallback, state.signature, files), raws


def state_lines(cache: dict[str, Any]) -> tuple[ResolutionState, Mapping[str, bytes]] | None:
    """:func:`load_state` without decoding: what the previous run's results were resolved
    under, its ``files`` each file's result as JSON, read when asked (a one-shot update
    decodes each once, as its run reaches the file: ``Resolver.reuse_from``)."""
    state, lines = cache.pop("state", None), cache.pop("results", None)
    if type(state) is not dict or not lines:
        return None
    version, name_fallback = state.get("version"), state.get("name_fallback")
    signature = signature_from_data(state.get("signature"))
    if version != STATE_VERSION or type(name_fallback) is not bool or signature is None:
        return None
    return ResolutionState(version, name_fallback, signature, lines), lines  # type: ignore[arg-type]


# A cold build's spill files, named by its process: its result lines until the cache is
# written, and its edge events until merged (by phase and part: llmc.graph.parts).
SPILL = "graph_facts.results.{pid}.tmp"
EVENTS = "graph_events.{pid}.{phase}.tmp"


def spill_files(llmc_dir: Path, pid: int, phases: int) -> list[Path]:
    """The spill files a cold build in process ``pid`` writes."""
    llmc_dir = Path(llmc_dir)
    return [llmc_dir / SPILL.format(pid=pid)] + [
        llmc_dir / EVENTS.format(pid=pid, phase=i) for i in range(phases)
    ]


def remove_stale_spills(llmc_dir: Path) -> None:
    """Delete the spill files of builds whose process is gone (killed mid-build)."""
    for p in [
        *Path(llmc_dir).glob("graph_facts.results.*.tmp"),
        *Path(llmc_dir).glob("graph_events.*.tmp"),
    ]:
        pid = p.name.split(".")[-3 if p.name.startswith("graph_events.") else -2]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            p.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


class ResultSpill:
    """A cold build's result lines (``["r", path, result]``), written to
    ``.llmc/graph_facts.results.tmp`` as each file is resolved, and copied into the cache
    when it is written: its per-file results are then never all in memory (nine large
    projects: ~200 MB of records)."""

    def __init__(self, facts_file: Path):
        self.path = facts_file.with_name(SPILL.format(pid=os.getpid()))
        fd = open_state_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self._fh = os.fdopen(fd, "wb")

    def add(self, path: str, res: FileResult) -> None:
        self._fh.write(_line(b"r", path, encode_result(res)))

    def add_raw(self, path: str, raw: bytes) -> None:
        """A result reused as it was read (its JSON, checked when decoded)."""
        self._fh.write(_line(b"r", path, raw))

    def lines(self) -> Iterator[bytes]:
        self._fh.close()
        with open(self.path, "rb") as fh:
            yield from fh

    def remove(self) -> None:
        self._fh.close()
        try:
            self.path.unlink()
        except OSError:
            pass


def _line(kind: bytes, path: str, raw: bytes) -> bytes:
    return b'["' + kind + b'",' + orjson.dumps(path) + b"," + raw + b"]\n"


def write(
    path: Path,
    data: dict[str, Any],
    state: dict[str, Any] | None = None,
    results: Mapping[str, bytes] | Iterable[tuple[str, bytes]] | None = None,
    result_lines: Iterable[bytes] = (),
) -> None:
    """Write the cache whole: the header, each file's facts line (its kept bytes, or
    encoded now) and each file's result line (``results``: each file's result as JSON,
    encoded once per resolution of the file, by path, or as (path, JSON) pairs made while
    the file is written; or ``result_lines``, whole, from a :class:`ResultSpill`;
    ``state``: what they were resolved under, ``{"version", "name_fallback", "signature"}``)."""
    files = data["files"]
    for e in files.values():
        if not e.get("raw") and e.get("src") is None:  # kept for the next write (warm.py)
            e["raw"] = encode_facts(e["facts"])
    head = {
        "version": data["version"],
        "token": data["token"],
        "files": {p: e["hash"] for p, e in files.items()},
        "state": state,
    }
    pairs = results.items() if isinstance(results, Mapping) else results or ()

    def chunks() -> Iterator[bytes]:
        yield orjson.dumps(head) + b"\n"
        for p, e in files.items():
            raw = e["raw"] or _raw_from(p, e)
            if raw is not None:  # (else: a cache miss for that file, re-extracted next run)
                yield b'["f",' + orjson.dumps(p) + b"," + raw + b"]\n"
        for p, raw in pairs:  # made as they are written when ``results`` is an iterator
            yield _line(b"r", p, raw)
        yield from result_lines

    write_atomic(path, chunks())
    try:
        journal(path).unlink()
    except OSError:
        pass
    remove_legacy(path.parent)


def _raw_from(path: str, e: dict[str, Any]) -> bytes | None:
    """The facts JSON of an entry that keeps none: read again from where its facts were
    decoded (``"src"``: the indexer's spool, by path; checked again when the cache is
    read, like every line), else encoded; None when neither can be had."""
    src = e.get("src")
    if src is not None:
        try:
            return src[path]
        except (KeyError, OSError) as err:
            log.warning("%s: graph facts unreadable (%r); not cached", path, err)
    f = e.get("facts")
    return encode_facts(f) if f is not None else None


def append_delta(
    path: Path, prev: str, data: dict[str, Any], paths: set[str], results: dict[str, bytes]
) -> bool:
    """Append what changed since the cache (token ``prev``) to its journal: the hashes and
    facts of ``paths``, the ``results`` of the files resolved again, the new token. O(edit)
    instead of rewriting the whole cache; False (nothing written) when the journal has
    grown past ``JOURNAL_MAX`` bytes and the cache should be written whole instead."""
    jpath = journal(path)
    try:
        size = jpath.stat().st_size
    except OSError:
        size = 0
    if size > JOURNAL_MAX:
        return False
    files = data["files"]
    for p in paths:
        e = files[p]
        if not e.get("raw"):
            e["raw"] = _raw_from(p, e) or b"null"  # (null: a cache miss when read)
    line = [
        b'{"prev":',
        orjson.dumps(prev),
        b',"token":',
        orjson.dumps(data["token"]),
        b',"hashes":',
        orjson.dumps({p: files[p]["hash"] for p in paths}),
        b',"facts":{',
        b",".join(orjson.dumps(p) + b":" + files[p]["raw"] for p in paths),
        b'},"results":{',
        b",".join(orjson.dumps(p) + b":" + raw for p, raw in results.items()),
        b"}}\n",
    ]
    with open(jpath, "ab") as fh:
        fh.write(b"".join(line))
    return True


__all__ = [
    "EVENTS",
    "JOURNAL",
    "SPILL",
    "ResultSpill",
    "remove_stale_spills",
    "spill_files",
    "append_delta",
    "journal",
    "load",
    "load_facts",
    "load_state",
    "state_lines",
    "remove_legacy",
    "write",
]
