"""The learned ranker's cost per query, and warm search latency with it and without it.

    HF_HUB_OFFLINE=1 python benchmarks/bench_ranker.py [--project attrs] [--queries 60]

Runs the protocol's docstring queries of one validation project (its stripped corpus must
be indexed: `python -m lab protocol --split validation` does that) through llmc's Searcher,
warm, alternating ``search.ranker = learned`` and ``fusion`` query by query so both see the
same machine load. Prints per-query p50/p95 of the ranking stage (``features`` + ``ranker``
timings for learned, ``fusion`` for fusion), of the whole query (``took_ms``), the pool size,
and the machine (lscpu model name, AVX flags). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the lab runs from a checkout


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = (len(xs) - 1) * q / 100
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return platform.processor()
    model = re.search(r"Model name:\s*(.+)", out)
    flags = re.search(r"Flags:\s*(.+)", out)
    avx = sorted(f for f in (flags.group(1).split() if flags else []) if f.startswith("avx"))
    cpus = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M)
    return (
        f"{model.group(1).strip() if model else '?'}, {cpus.group(1) if cpus else '?'} CPUs, "
        f"flags {' '.join(avx)}"
    )


def main() -> None:
    from lab.protocol.docstring import docstring_queries
    from lab.protocol.splits import select_projects
    from llmc import corpora
    from llmc.config import load_config
    from llmc.search import Searcher

    ap = argparse.ArgumentParser()
    ap.add_argument("--project", default="attrs")
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args()
    project = select_projects("validation", [args.project])[0].project
    work = corpora.default_cache_dir("eval") / "protocol" / project.dir_name
    original = corpora.default_cache_dir("eval") / project.dir_name
    queries, _ = docstring_queries(original, work, project.name, 60, 0)
    texts = [q.query for q in queries][: args.queries]
    corpus = work / "corpus"
    base = load_config(corpus)
    searchers = {}
    for ranker in ("learned", "fusion"):
        cfg = copy.deepcopy(base)
        cfg.search.ranker = ranker
        searchers[ranker] = Searcher(corpus, cfg)
        searchers[ranker].warm()
        for t in texts[:3]:
            searchers[ranker].search(t)
    stage = {"learned": [], "fusion": []}
    total = {"learned": [], "fusion": []}
    pool = []
    for t in texts:
        for ranker, s in searchers.items():
            r = s.search(t)
            ms = r.timings_ms
            if ranker == "learned":
                stage[ranker].append(ms.get("features", 0.0) + ms.get("ranker", 0.0))
                pool.append(len(s.candidate_pool(t)))
            else:
                stage[ranker].append(ms.get("fusion", 0.0))
            total[ranker].append(r.took_ms)
    out = {
        "machine": machine(),
        "project": project.dir_name,
        "queries": len(texts),
        "pool_median": statistics.median(pool),
    }
    for ranker in searchers:
        out[ranker] = {
            "rank_stage_p50_ms": round(percentile(stage[ranker], 50), 2),
            "rank_stage_p95_ms": round(percentile(stage[ranker], 95), 2),
            "took_p50_ms": round(percentile(total[ranker], 50), 1),
            "took_p95_ms": round(percentile(total[ranker], 95), 1),
        }
    for s in searchers.values():
        s.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
