"""Reranker latency on realistic candidates: ``python -m lab.train.bench``.

For queries mined from a (held-out) project, BM25 over the project's real spans (as
``llmc index`` makes them, docstrings included) gives the top-k candidates; the reranker
scores them exactly as the search pipeline would (``span_passage``, cut to max_length).
Reports p50/p90 wall and CPU milliseconds per query for each max_length, precision and
torch thread count asked for, after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("lab.train.bench")


def candidates(root: Path, queries: list[str], top_k: int) -> list[tuple[str, list[str]]]:
    """(query, top-k span passages by BM25) for each query."""
    from llmc.learn.mine import chunk_project
    from llmc.models.reranker import span_passage
    from llmc.store.lexical import LexicalIndex
    from llmc.types import StoredSpan

    spans, _ = chunk_project(root)
    with tempfile.TemporaryDirectory(prefix="llmc-bench-") as tmp:
        lexical = LexicalIndex(Path(tmp))
        lexical.rebuild((StoredSpan(i, s) for i, s in enumerate(spans)), generation=1)
        out = []
        for q in queries:
            hits = lexical.search(q, top_k)
            if len(hits) == top_k:
                out.append((q, [span_passage(spans[h.span_id]) for h in hits]))
    return out


def measure(
    work: list[tuple[str, list[str]]],
    model: str,
    precision: str,
    max_length: int,
    threads: int,
    batch_size: int,
    warmup: int = 3,
) -> dict:
    import torch

    from llmc.models.reranker import CrossEncoderReranker

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        reranker = CrossEncoderReranker(
            model, precision=precision, max_length=max_length, batch_size=batch_size
        )
        for q, texts in work[:warmup]:
            reranker.score(q, texts)
        wall, cpu = [], []
        for q, texts in work[warmup:]:
            c, w = time.process_time(), time.perf_counter()
            reranker.score(q, texts)
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    finally:
        torch.set_num_threads(before)

    def pct(xs: list[float], q: float) -> float:
        return round(statistics.quantiles(xs, n=100)[int(q) - 1], 1) if len(xs) > 1 else xs[0]

    return {
        "precision": reranker.choice.precision,
        "max_length": max_length,
        "threads": threads,
        "queries": len(wall),
        "wall_ms_p50": round(statistics.median(wall), 1),
        "wall_ms_p90": pct(wall, 90),
        "cpu_ms_p50": round(statistics.median(cpu), 1),
    }


def main(argv: list[str] | None = None) -> int:
    from lab.train.projects import default_cache_dir, fetch, parse_project
    from llmc.learn.mine import mine_project

    p = argparse.ArgumentParser(prog="python -m lab.train.bench", description=__doc__)
    p.add_argument("--project", default="structlog", help="a pinned project (default: held-out structlog)")  # fmt: skip
    p.add_argument("--model", default="default")
    p.add_argument("--queries", type=int, default=30)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, nargs="+", default=[128, 192, 256])
    p.add_argument("--precision", nargs="+", default=["auto"], help="auto, fp32, bf16, fp16")
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    project = parse_project(args.project)
    root = fetch(project, default_cache_dir())
    mined = mine_project(project.name, root, random.Random(0))
    queries = [e.query for e in mined.examples]
    random.Random(0).shuffle(queries)
    work = candidates(root, queries[: args.queries + 3], args.top_k)
    results = []
    for precision in args.precision:
        for threads in args.threads:
            for length in args.max_length:
                r = measure(work, args.model, precision, length, threads, args.batch_size)
                log.info("%s", r)
                results.append(r)
    print(json.dumps({"project": project.requirement, "top_k": args.top_k, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
