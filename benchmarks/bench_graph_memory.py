"""Peak memory of a cold graph update alone, in one process, on an indexed tree.

    python benchmarks/bench_graph_memory.py TREE [--json] [--phases]

``TREE`` is a repository already indexed by ``llmc index`` (for instance the nine-project
tree ``bench_monorepo.py --keep DIR`` leaves), whose ``.llmc/graph_facts.jsonl`` holds every
file's facts. The facts lines are copied to a spool file once (``.llmc/bench_facts.spool``,
the same bytes the chunk workers spool), then the update runs as a cold ``llmc index``
runs it in the graph's worker: every file changed, its facts from the spool
(``SpooledFacts``), no facts cache, no previous graph. The graph and the facts cache are
written to a copy of ``.llmc/`` (``.llmc-bench/``, hard links to the store), so the
tree's own files are left as they were.

With ``--again PATH``, the update is an incremental one instead (as a one-shot
``llmc index`` after an edit of PATH): the graph and cache of the last run are read from
``.llmc-bench/``, PATH's facts come from the spool, and only what it can affect is
resolved again.

Reports the process's peak RSS (``VmHWM``), the RSS before the update (Python, the store,
the imports), the update's seconds, and nodes / edges; with ``--phases`` also the RSS
after each step (sampled by a thread every 10 ms, with the step it is in from the log).
Nothing here asserts a figure: numbers go to stdout.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))  # (last: PYTHONPATH may name a snapshot to measure)

SPOOL = "bench_facts.spool"


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in MB."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    return 0


def _spool(llmc_dir: Path) -> tuple[Path, dict[str, tuple[int, int]]]:
    """The facts lines of the cache, as the chunk workers spool them: (file, offsets)."""
    import orjson

    src = llmc_dir / "graph_facts.jsonl"
    out = llmc_dir / SPOOL
    offsets: dict[str, tuple[int, int]] = {}
    end = 0
    with open(src, "rb") as fh, open(out, "wb") as spool:
        fh.readline()  # the header
        for line in fh:
            if not line.startswith(b'["f",'):
                continue
            path_end = line.index(b",", 5)
            # the path is a JSON string that may hold commas: decode until it parses
            while True:
                try:
                    path = orjson.loads(line[5:path_end])
                    break
                except ValueError:
                    path_end = line.index(b",", path_end + 1)
            raw = line[path_end + 1 : -2]  # drop "]\n"
            spool.write(raw)
            offsets[path] = (end, len(raw))
            end += len(raw)
    return out, offsets


def _bench_dir(tree: Path) -> Path:
    """``.llmc-bench/``: the store and the lexical index linked, the graph files absent
    (the graph and the facts cache this run writes are left there, to compare)."""
    src, dst = tree / ".llmc", tree / ".llmc-bench"
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(mode=0o700)
    for p in src.iterdir():
        if p.name.startswith(("rag_graph", "graph_facts", "bench_")) or p.is_dir():
            continue
        os.link(p, dst / p.name)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--phases", action="store_true", help="RSS at each step of the update")
    ap.add_argument(
        "--again",
        metavar="PATH",
        help="an incremental update instead: PATH changed (its facts as spooled), on the "
        "graph and cache the last run left in .llmc-bench/",
    )
    args = ap.parse_args()
    tree = args.tree.resolve()

    from llmc.config import load_config
    from llmc.graph.build import update_graph
    from llmc.index.facts_spool import SpooledFacts
    from llmc.store.db import Store

    llmc_dir = tree / ".llmc"
    lock = open(tree.parent / f".{tree.name}.graph-bench.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)  # one run at a time on a tree: they share its dirs
    spool_file = llmc_dir / SPOOL
    if not spool_file.exists() or not (llmc_dir / (SPOOL + ".json")).exists():
        spool_file, offsets = _spool(llmc_dir)
        (llmc_dir / (SPOOL + ".json")).write_text(json.dumps(offsets))
    offsets = {
        k: tuple(v) for k, v in json.loads((llmc_dir / (SPOOL + ".json")).read_text()).items()
    }
    bench = tree / ".llmc-bench"
    if not args.again or not (bench / "graph_facts.jsonl").exists():
        bench = _bench_dir(tree)

    # The update runs on a root whose .llmc/ is the bench copy: a symlinked root.
    root = tree.parent / (tree.name + ".graph-bench")
    if root.is_symlink() or root.exists():
        root.unlink()
    root.mkdir()
    try:
        for p in tree.iterdir():
            if p.name not in (".llmc", ".llmc-bench"):
                os.symlink(p, root / p.name)
        os.symlink(bench, root / ".llmc")
        cfg = load_config(root).graph
        store = Store(bench / "index.db", readonly=True)
        records = store.files()
        changed = [args.again] if args.again else sorted(records)
        given = SpooledFacts(spool_file, offsets)
        del records
        import gc

        gc.collect()
        rss_before = _status("VmRSS")
        samples: list[tuple[float, int, str]] = []
        step = ["start"]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append((time.perf_counter(), _status("VmRSS"), step[0]))
                time.sleep(0.01)

        if args.phases:
            import logging

            class _Steps(logging.Handler):
                def emit(self, record: logging.LogRecord) -> None:
                    step[0] = record.getMessage()[:60]

            logging.getLogger("llmc.graph").addHandler(_Steps())
            logging.getLogger("llmc.graph").setLevel(logging.DEBUG)
            threading.Thread(target=sample, daemon=True).start()
        t0 = time.perf_counter()
        written: list[float] = []
        stats = update_graph(
            root,
            store,
            changed,
            [],
            1,
            cfg,
            given,
            on_written=lambda s: written.append(time.perf_counter() - t0),
        )
        seconds = time.perf_counter() - t0
        rss_after = _status("VmRSS")
        stop.set()
        store.close()
    finally:
        for p in root.iterdir():
            p.unlink()
        root.rmdir()
    import llmc

    out = {
        "llmc_from": str(Path(llmc.__file__).parent),
        "tree": str(tree),
        "files": stats.files,
        "files_resolved": stats.files_resolved,
        "nodes": stats.nodes,
        "edges": stats.edges,
        "rss_before_mb": rss_before,
        "peak_rss_mb": _status("VmHWM"),
        "update_peak_over_before_mb": _status("VmHWM") - rss_before,
        "rss_after_update_mb": rss_after,
        "seconds": round(seconds, 2),
        "graph_written_s": round(written[0], 2) if written else None,
        "graph_bytes": (bench / "rag_graph.json").stat().st_size,
    }
    if args.phases:
        peaks: dict[str, int] = {}
        for _, rss, name in samples:
            peaks[name] = max(peaks.get(name, 0), rss)
        out["peak_rss_by_step_mb"] = peaks
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    main()
