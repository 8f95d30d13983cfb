"""The graph update started as soon as an index run's files are parsed, before its spans
are committed.

After the parse the indexer writes the spans (~1 s on SQLAlchemy's 688 files) while both
chunk workers sit idle, and the graph's merge and cross-file resolution need only the
files' records (path, language, category, content hash) and facts, not span ids. So
:func:`start` hands one worker the records the run is about to commit, and the update
(:func:`update_graph_early`) merges and resolves beside the writes. It waits at a
:class:`CommitGate` before it reads span ids or writes anything: the indexer holds the
gate (an exclusive ``flock``) from before it starts writing until its writes are committed
and durable, then opens it with the run's token. A run that fails opens it without the
token (or dies, and the kernel drops the lock): the update then writes nothing, and the
next run's content-hash check repairs the graph, as after any crash. Past the gate, the
store's file records are checked against the ones the update started from; any
difference (none is expected) means updating again from the store.

The update answers (its future resolves) once ``rag_graph.json`` is written; the facts
cache is written and the update's records are freed after that, in a thread of the
worker, which the pool's shutdown waits for (the indexer holds its writer lock until then).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from llmc.paths import open_state_file

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from llmc.config import GraphConfig
    from llmc.graph.model import GraphStats
    from llmc.store.db import FileRecord, Store

log = logging.getLogger(__name__)

GATE_FILE = "graph.gate"  # in .llmc/


class Pool(Protocol):
    """What :func:`start` needs of the indexer's chunk pool (``ChunkPool.beside``)."""

    def beside(self, fn: Any, *args: Any) -> Future | None: ...


class CommitGate:
    """Held (an exclusive ``flock`` on ``.llmc/graph.gate``) from its creation until
    :meth:`open`; a waiter (:func:`wait_for_commit`) then learns whether the holder
    committed, by the token the holder wrote."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.token = uuid.uuid4().hex
        self._fd: int | None = open_state_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            os.ftruncate(self._fd, 0)
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise

    def open(self, committed: bool) -> None:
        """Let the waiter through; with ``committed``, tell it the writes are durable.
        Only the first call counts."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if committed:
                os.pwrite(fd, self.token.encode(), 0)
        finally:
            os.close(fd)  # drops the lock


def wait_for_commit(path: Path, token: str) -> bool:
    """Block until the gate at ``path`` is open; True when its holder committed (wrote
    ``token``), False when it gave up or died."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return os.pread(fd, 64, 0) == token.encode()
    finally:
        os.close(fd)


class Abandoned(Exception):
    """The run did not commit: the update writes nothing."""


class RecordsDiffer(Exception):
    """The committed store's files are not the records the update started from."""


def _shape(rows: Iterable[tuple[str, str | None, str | None, str]]) -> tuple[int, int]:
    """What the graph reads of the files (path, lang, category, content hash) as (count,
    order-free digest): compared without a second copy of every record (on 89k files the
    store's records and two shapes of them were ~60 MB at the update's peak)."""
    count = total = 0
    for row in rows:
        text = "\0".join("\1" if v is None else v for v in row).encode("utf-8", "surrogatepass")
        total += int.from_bytes(hashlib.blake2b(text, digest_size=16).digest(), "big")
        count += 1
    return count, total & ((1 << 128) - 1)


def _record_rows(records: Mapping[str, FileRecord]) -> Iterator[tuple]:
    return ((p, r.lang, r.category, r.content_hash) for p, r in records.items())


def encode_records(records: Mapping[str, FileRecord]) -> bytes:
    """The records as one JSON blob, as :func:`start` hands them to the worker: the
    executor keeps a job's arguments until its result, in both processes, and one
    ``bytes`` is ~4x smaller than the records (on 89k files ~12 against ~45 MB)."""
    fields = ("id", "path", "lang", "category", "size", "mtime_ns", "content_hash")
    return orjson.dumps([[getattr(r, f) for f in fields] for r in records.values()])


def decode_records(blob: bytes) -> dict[str, FileRecord]:
    from llmc.store.db import FileRecord

    return {row[1]: FileRecord(*row) for row in orjson.loads(blob)}


class PendingStore:
    """The store as ``update_graph`` reads it, before the run has committed: the file
    records are the ones the run is writing; span rows (``conn``, ``iter_spans``) wait for
    the commit and come from the store itself, opened read-only then."""

    def __init__(
        self, root: Path, records: Mapping[str, FileRecord] | bytes, gate: Path, token: str
    ):
        self.root = Path(root)
        # kept encoded (``encode_records``): each ``files()`` decodes them, and an update
        # that lets its records go (a cold one, once it has their facts) frees them
        self._records = records if isinstance(records, bytes) else encode_records(records)
        self._shape = _shape(_record_rows(self.files()))  # what the committed store must match
        self.gate, self.token = Path(gate), token
        self._store: Store | None = None
        self._failed: Exception | None = None

    def files(self) -> dict[str, FileRecord]:
        return decode_records(self._records)

    @property
    def conn(self):
        return self._committed().conn

    def iter_spans(self):
        return self._committed().iter_spans()

    def _committed(self) -> Store:
        if self._failed is not None:  # (``spanmap.read_span_rows`` retries through ``iter_spans``)
            raise self._failed
        if self._store is None:
            from llmc.paths import db_path
            from llmc.store.db import Store

            if not wait_for_commit(self.gate, self.token):
                self._failed = Abandoned("the index run did not commit")
                raise self._failed
            store = Store(db_path(self.root), readonly=True)
            committed = store.conn.execute("SELECT path, lang, category, content_hash FROM files")
            if _shape(committed) != self._shape:
                store.close()
                self._failed = RecordsDiffer("the store's files changed under the update")
                raise self._failed
            self._store = store
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _update_after_commit(
    root: Path,
    records: Mapping[str, FileRecord] | bytes,
    gate: tuple[Path, str],
    args: tuple,
    on_written,
) -> GraphStats | None:
    """``update_graph`` on a :class:`PendingStore`; None when the run did not commit."""
    from llmc.graph.build import update_graph, update_graph_in

    store = PendingStore(root, records, *gate)
    try:
        return update_graph(root, store, *args, on_written=on_written)
    except Abandoned:
        log.info("graph update dropped: the index run did not commit")
        return None
    except RecordsDiffer as e:
        log.info("%s; updating the graph from the store", e)
    finally:
        store.close()
    return update_graph_in(root, *args, on_written=on_written)


_background: list[threading.Thread] = []  # this worker's update still writing its cache


def _join_background() -> None:
    while _background:
        _background.pop().join()


def update_graph_early(
    root: Path,
    records: Mapping[str, FileRecord] | bytes,
    changed: list[str],
    removed: list[str],
    generation: int,
    cfg: GraphConfig | None,
    facts: Mapping[str, bytes],
    gate: tuple[Path, str],
) -> GraphStats | None:
    """What the indexer runs in a chunk worker (see the module doc): the update's stats
    once ``rag_graph.json`` is written, None when the run did not commit. The rest of the
    update goes on in a thread of this process; what it raises then is logged."""
    _join_background()
    written = threading.Event()
    box: dict[str, Any] = {}

    def on_written(stats: GraphStats) -> None:
        box["stats"] = stats
        written.set()

    def work() -> None:
        try:
            box["result"] = _update_after_commit(
                root, records, gate, (changed, removed, generation, cfg, facts), on_written
            )
        except BaseException as e:  # noqa: BLE001 - handed to the caller, or logged
            if "stats" in box:
                log.warning("graph facts cache not written (%s); the next run rebuilds it", e)
            box["error"] = e
        finally:
            written.set()

    thread = threading.Thread(target=work, name="llmc-graph-update")
    thread.start()
    _background.append(thread)
    written.wait()
    if "stats" in box:
        return box["stats"]
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


@dataclass
class Early:
    """An update started by :func:`start`: open its ``gate`` once the run committed (or
    failed), then wait for its ``future``."""

    gate: CommitGate
    future: Future


def start(
    pool: Pool | None,
    root: Path,
    cfg: GraphConfig,
    records: dict[str, FileRecord],
    changed: list[str],
    removed: list[str],
    generation: int,
    facts: Mapping[str, bytes],
) -> Early | None:
    """Start the graph update in a worker of ``pool`` behind a new gate; None when there
    is no worker to run it, or no gate (the caller then updates the graph after its
    writes)."""
    if pool is None or not cfg.enabled:
        return None
    from llmc.paths import state_dir

    try:
        gate = CommitGate(state_dir(root) / GATE_FILE)
    except OSError as e:  # the caller updates the graph once its writes are committed
        log.debug("graph update gate unavailable (%s); the graph waits for the writes", e)
        return None
    # a plain dict is copied (the caller's stays its own); another Mapping (the indexer's
    # SpooledFacts) pickles as a reference to its file
    given = dict(facts) if isinstance(facts, dict) else facts
    args = (root, encode_records(records), changed, removed, generation, cfg, given)
    future = pool.beside(update_graph_early, *args, (gate.path, gate.token))
    if future is None:
        gate.open(False)
        return None
    return Early(gate, future)


__all__ = [
    "CommitGate",
    "Early",
    "PendingStore",
    "start",
    "update_graph_early",
    "wait_for_commit",
]
