"""A large repository end to end: Django's whole sdist by default (~2.9k files).

    HF_HUB_OFFLINE=1 python benchmarks/bench_scale.py [--package Django==5.1.4 | --src DIR] \
        [--queries 40] [--edits 5] [--out FILE]

The tree is copied into a fresh git repository and measured the way a user meets it:

  1. `llmc index` as one cold process (imports, model load, spans, BM25, graph, every
     vector): wall time, when BM25 + exact symbols answered (``searchable_seconds``, from
     the run's start), the phase timings, and memory: the largest single process
     (``ru_maxrss`` over the process and its workers) and the whole process tree's RSS
     summed, sampled from /proc every 0.2 s.
  2. The index's size on disk (``.llmc/``).
  3. Cold `llmc search` (a fresh process, no daemon): median of 3.
  4. One-file reindex with the models warm, as the daemon does it: ``--edits`` times, a
     new function appended to a different module, then ``Indexer.run()`` in this process
     (the embedder already loaded): wall time and phases, the graph included.
  5. Warm queries through one ``Searcher``: ``--queries`` developer questions, with the
     default stages, and again with the cross-encoder on (top 20): p50 / p95 of ``took_ms``.

Nothing here is a test and nothing asserts a time. The /proc sampler is a few lines of
our own (psutil would do it, but is not a dependency of llmc).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_searchable import llmc, machine, prepare, source_tree  # noqa: E402

QUESTIONS = (
    "where is the CSRF token checked on a POST request",
    "how does the ORM turn a filter into a SQL WHERE clause",
    "where are migrations applied to the database",
    "how is a URL pattern matched against the request path",
    "where does the template engine resolve a variable lookup",
    "how are signals connected and sent",
    "where is the session cookie written to the response",
    "how does the password hasher upgrade an old hash",
    "where is the admin changelist queryset built",
    "how does select_related join related tables",
    "where are model field validators run",
    "how does the cache framework pick a backend",
    "where is the middleware chain built",
    "how does the test client send a request",
    "where are static files collected",
    "how does the paginator count pages",
    "where is the email message encoded as MIME",
    "how does the form clean a field",
    "QuerySet.bulk_create",
    "get_object_or_404",
    "where does runserver reload on code changes",
    "how are database transactions made atomic",
    "where is the login view defined",
    "how does the auth backend authenticate a user",
    "where is the Content-Security-Policy or X-Frame-Options header set",
    "how do model managers get attached to a model class",
    "where is the settings module loaded lazily",
    "how are translations looked up for a language",
    "where is the SQL compiler for aggregates",
    "how does the file upload handler stream to disk",
    "where is a model instance serialized to JSON",
    "how does prefetch_related batch queries",
    "where is the timezone converted for display",
    "how is the HttpResponse streaming implemented",
    "how does the async view adapter run sync code",
    "where are management commands discovered",
    "how does the contenttypes framework map models",
    "where is the database connection closed at request end",
    "slugify",
    "how are composite primary keys handled",
)

EDIT_TARGETS = (
    "django/utils/text.py",
    "django/db/models/query.py",
    "django/http/response.py",
    "django/template/base.py",
    "django/forms/fields.py",
    "django/core/cache/backends/base.py",
    "django/contrib/auth/models.py",
)


def tree_rss_mb(root_pid: int) -> float:
    """RSS of ``root_pid`` and all its descendants, summed (Linux /proc)."""
    total, todo, seen = 0, [root_pid], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            total += next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
            )
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total / 1024


def index_with_memory(repo: Path) -> dict:
    """One cold `llmc index --json` process, its tree's RSS sampled while it runs."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(repo), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"llmc index failed:\n{err[-2000:]}")
    report = json.loads(out)
    return {
        "process_wall_s": round(wall, 1),
        "searchable_s_in_run": report["searchable_seconds"],
        "seconds_in_run": report["seconds"],
        "phases_s": report["timings"],
        "files_indexed": report["files_indexed"],
        "skipped": report["skipped_by_reason"],
        "spans": report["spans_total"],
        "embedded": report["embedded"],
        "spans_per_s": report["spans_per_second"],
        "vectors": report["vectors"]["line"],
        "peak_tree_rss_mb": round(peak[0], 0),
        "peak_single_process_rss_mb": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 0
        ),
    }


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def percentiles(xs: list[float]) -> dict:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return {"p50_ms": round(statistics.median(xs), 1), "p95_ms": round(p95, 1), "n": len(xs)}


def one_file_reindex(repo: Path, edits: int) -> dict:
    """Append a function to one module and reindex in this (warm) process, ``edits`` times."""
    from llmc.config import load_config
    from llmc.graph import warm
    from llmc.index.indexer import Indexer
    from llmc.models.embedder import embedder_from_config

    warm.enable()  # the daemon keeps the graph's state between updates
    cfg = load_config(repo)
    for category in ("code", "doc"):  # warm, as in the daemon: the models are loaded
        embedder_from_config(cfg.embedding, category).embed_passages(["def warm(): pass"])
    Indexer(repo, cfg).run()
    runs = []
    targets = [repo / t for t in EDIT_TARGETS if (repo / t).is_file()]
    targets = targets or sorted(repo.rglob("*.py"))[:edits]
    for i in range(edits):
        target = targets[i % len(targets)]
        target.write_text(
            target.read_text() + f"\n\ndef llmc_bench_added_{i}(x):\n    return x * {i + 2}\n"
        )
        t = time.perf_counter()
        report = Indexer(repo, cfg).run()
        runs.append(
            {
                "file": str(target.relative_to(repo)),
                "wall_s": round(time.perf_counter() - t, 3),
                "phases_s": report.timings,
                "embedded": report.embedded,
            }
        )
    return {"median_wall_s": statistics.median(r["wall_s"] for r in runs), "runs": runs}


def warm_queries(repo: Path, n: int) -> dict:
    from llmc.config import load_config
    from llmc.search import Searcher

    out = {}
    for label, rerank in (("default stages", False), ("cross-encoder on, top 20", True)):
        cfg = load_config(repo)
        cfg.search.rerank = rerank
        searcher = Searcher(repo, cfg)
        searcher.search(QUESTIONS[0])  # load models, open the index
        took = [searcher.search(q).took_ms for q in (QUESTIONS * 2)[:n]]
        out[label] = percentiles(took)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", default="Django==5.1.4")
    ap.add_argument("--src", type=Path, default=None, help="an unpacked tree instead")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    src = source_tree(args.package, args.src)
    out: dict = {
        "machine": machine(),
        "python": platform.python_version(),
        "source": args.package if args.src is None else str(src),
    }
    with tempfile.TemporaryDirectory(prefix="llmc-scale-") as tmp:
        repo = prepare(src, Path(tmp) / "repo")
        out["files_in_tree"] = sum(
            1 for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
        )
        out["full_index"] = index_with_memory(repo)
        out["index_on_disk_mb"] = round(dir_mb(repo / ".llmc"), 1)
        colds = []
        for _ in range(3):
            wall, _, answer = llmc("search", "--repo", str(repo), "-k", "5", QUESTIONS[0])
            colds.append(wall)
        out["cold_search"] = {
            "median_wall_s": round(statistics.median(colds), 2),
            "runs_s": [round(c, 2) for c in colds],
            "top": [f"{r['path']}:{r['start_line']}" for r in answer["results"]][:3],
        }
        out["one_file_reindex_warm"] = one_file_reindex(repo, args.edits)
        out["warm_queries"] = warm_queries(repo, args.queries)
        out["load_average_at_end"] = round(os.getloadavg()[0], 1)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
