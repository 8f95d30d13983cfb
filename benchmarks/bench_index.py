"""Indexing benchmark on a real project downloaded from PyPI at run time.

    python benchmarks/bench_index.py [--package Django==5.1.4] [--out FILE]

Measures: full index time, spans/s, one-file incremental reindex (model already loaded),
no-change reindex, database size, peak RSS, and embedding throughput of llmc's batched
embedder against a naive one-`encode`-call-per-span loop on the same spans and machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache"


def fetch_sdist(requirement: str) -> Path:
    """Download and unpack the sdist of ``requirement`` (pinned) into the cache."""
    name = requirement.replace("==", "-").lower()
    target = CACHE / name
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    dl = CACHE / "downloads"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            "-d",
            str(dl),
            requirement,
        ],
        check=True,
    )
    archive = next(
        p
        for p in dl.iterdir()
        if p.name.lower().startswith(name.split("-")[0]) and p.name.endswith(".tar.gz")
    )
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE / "extract", filter="data")
    top = next((CACHE / "extract").iterdir())
    shutil.move(str(top), target)
    return target


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", default="Django==5.1.4")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--sample", type=int, default=256, help="spans for the throughput check")
    ap.add_argument("--include", nargs="*", default=["django/"], help="index.include globs")
    ap.add_argument("--exclude", nargs="*", default=["**/locale/"], help="index.exclude globs")
    args = ap.parse_args()

    from llmc.config import load_config
    from llmc.index.indexer import Indexer
    from llmc.models.embedder import embedder_from_config

    src = fetch_sdist(args.package)
    work = CACHE / "work" / src.name
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src, work)
    cfg = load_config(work)
    cfg.index.include = list(args.include)
    cfg.index.exclude = list(args.exclude)
    results: dict[str, object] = {
        "package": args.package,
        "include": args.include,
        "exclude": args.exclude,
    }

    t = time.perf_counter()
    embedder = embedder_from_config(cfg.embedding, "code")
    results["model_load_s"] = round(time.perf_counter() - t, 2)
    results["device"] = embedder.choice.reason

    t = time.perf_counter()
    full = Indexer(work, cfg).run()
    results["full_index_s"] = round(time.perf_counter() - t, 1)
    results["files_indexed"] = full.files_indexed
    results["spans"] = full.spans_total
    results["embed_spans_per_s"] = round(full.embedded / max(full.embed_seconds, 1e-9), 1)
    results["overall_spans_per_s"] = round(full.spans_total / max(full.seconds, 1e-9), 1)
    results["skipped"] = full.skipped_by_reason

    t = time.perf_counter()
    Indexer(work, cfg).run()
    results["noop_reindex_s"] = round(time.perf_counter() - t, 3)

    target = work / "django" / "utils" / "text.py"
    if not target.exists():
        target = next(work.rglob("*.py"))
    target.write_text(target.read_text() + "\n\ndef llmc_bench_added(x):\n    return x * 2\n")
    t = time.perf_counter()
    one = Indexer(work, cfg).run()
    results["one_file_reindex_s"] = round(time.perf_counter() - t, 3)
    results["one_file_reindex_embedded"] = one.embedded
    results["one_file_searchable_s"] = round(one.searchable_seconds, 3)
    results["one_file_phases_s"] = one.timings

    llmc_dir = work / ".llmc"
    results["db_mib"] = round(dir_size(llmc_dir) / 2**20, 1)
    results["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0)

    # Throughput: llmc's batched, length-sorted embedder vs a naive per-span encode loop
    from llmc.store.db import Store

    store = Store(llmc_dir / "index.db", readonly=True)
    texts = [
        s.span.embed_text for _, s in zip(range(args.sample), store.iter_spans(), strict=False)
    ]
    store.close()
    t = time.perf_counter()
    embedder.embed_passages(texts)
    batched = len(texts) / (time.perf_counter() - t)
    from sentence_transformers import SentenceTransformer

    # the naive baseline: the same model as loaded by default (fp32), one encode call per span
    fp32 = SentenceTransformer(embedder._source, device="cpu")
    naive_n = min(64, len(texts))
    t = time.perf_counter()
    for text in texts[:naive_n]:
        fp32.encode(text)
    naive = naive_n / (time.perf_counter() - t)
    results["throughput_batched_spans_per_s"] = round(batched, 1)
    results["throughput_naive_loop_spans_per_s"] = round(naive, 1)
    results["throughput_speedup"] = round(batched / naive, 2)

    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
