"""One check of a whole index, shared by the indexer, durability, soak and fault tests."""

from __future__ import annotations

from pathlib import Path

from llmc.paths import db_path, lexical_path
from llmc.store.db import Store
from llmc.store.lexical import LexicalIndex


def assert_index_consistent(root: Path, graph: bool = False) -> None:
    """Every span's file is on disk and holds its lines; vectors and lexical docs match
    the spans exactly and the lexical index reflects the store's generation; with
    ``graph``, so does the graph."""
    store = Store(db_path(root), readonly=True)
    try:
        spans = list(store.iter_spans())
        ids = {s.id for s in spans}
        for s in spans:
            path = root / s.span.path
            assert path.is_file(), s.span.path
            lines = path.read_text(encoding="utf-8").split("\n")
            assert 1 <= s.span.start_line <= s.span.end_line <= len(lines), s.span
        vec_ids: set[int] = set()
        for table in ("emb_code", "emb_docs"):
            vec_ids |= {r[0] for r in store.conn.execute(f"SELECT span_id FROM {table}")}
        assert vec_ids == ids
        lexical = LexicalIndex(lexical_path(root), readonly=True)
        assert lexical.generation == store.generation
        assert lexical.num_docs() == len(ids)
        if graph:
            from llmc.graph.query import load_graph

            assert load_graph(root).generation == store.generation
    finally:
        store.close()


__all__ = ["assert_index_consistent"]


def index_killing_the_worker_on(root: Path, name: str) -> tuple[dict, int | None]:
    """Index ``root`` (no vectors) in a thread and SIGKILL the chunk worker seen parsing
    ``name`` (its journal entry names it), as the OOM killer or a grammar crash would;
    returns ``({"report": ...} or {"error": ...}, the pid killed or None)``."""
    import os
    import signal
    import threading
    import time

    from llmc.config import load_config
    from llmc.index.indexer import Indexer

    journal = root / ".llmc" / "chunking"
    outcome: dict = {}

    def index() -> None:
        try:
            outcome["report"] = Indexer(root, load_config(root)).run(vectors=False)
        except BaseException as e:  # noqa: BLE001 - reported by the caller's assertion
            outcome["error"] = e

    runner = threading.Thread(target=index)
    runner.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and runner.is_alive():
        for entry in journal.glob("*") if journal.is_dir() else ():
            try:
                if entry.read_text() == name and int(entry.name) != os.getpid():
                    killed = int(entry.name)
                    os.kill(killed, signal.SIGKILL)
                    break
            except (OSError, ValueError):
                continue
        time.sleep(0.002)
    runner.join(300)
    return outcome, killed
