"""Time to searchable and time to a full index, on a ~1k-file project from PyPI.

    HF_HUB_OFFLINE=1 python benchmarks/bench_searchable.py \
        [--package SQLAlchemy==2.0.36 | --src DIR] [--no-full] [--one-shot] [--out FILE]

The project's files are copied into a fresh git repository (so the walk is `git ls-files`,
as in a real checkout) and indexed by `llmc index` as separate processes, cold, the way a
user runs them; the wall clock of each process is measured from outside:

  1. `llmc index --no-vectors`: spans, BM25 (tantivy), exact-symbol data and the graph,
     committed. Its wall time is the time to searchable, imports and exit included; the
     run's own phase timings (walk, parse, write, lexical, graph) say where it goes. The
     graph update runs in a chunk worker from the end of the parse, beside the span writes
     and the lexical update (``llmc.graph.early``), so its phase is what is left of it
     once the lexical index is committed, up to ``rag_graph.json`` written;
     ``graph_own_s`` is its own time up to that write (the JSON and the facts cache not
     included).
  2. `llmc search` on that index (a cold process): it answers, and says how many spans
     dense search covers (0% here).
  3. `llmc index`: the backfill of every vector. (1) + (3) is the time to a full index.
     With ``--backfill-budget-s N`` the backfill is SIGKILLed after N s instead (what it
     committed stays) and the full time is extrapolated from its rate, model load included.
  4. with ``--one-shot``: a second copy indexed by one plain `llmc index`, which commits
     the searchable index first and then backfills in the same process; its reported
     ``searchable_seconds`` (from the start of the run, after imports) and total.

Nothing here is a test and nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

QUERY = "create an engine from a database url"


def machine() -> str:
    """``lscpu``'s model name and the CPU's avx2 / avx512* flags, cores, load."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    model = re.search(r"^Model name:\s*(.+)$", out, re.M)
    flags = re.search(r"^Flags:\s*(.+)$", out, re.M)
    wanted = sorted(
        f
        for f in (flags.group(1).split() if flags else [])
        if f == "avx2" or f.startswith("avx512") or f.startswith("amx")
    )
    load = os.getloadavg()[0]
    return (
        f"{model.group(1).strip() if model else 'unknown CPU'}; {os.cpu_count()} cores; "
        f"flags: {' '.join(wanted) or 'no avx2/avx512'}; load average {load:.1f} at start"
    )


def prepare(src: Path, dst: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", ".venv*", ".llmc", "__pycache__", ".cache")
    shutil.copytree(src, dst, symlinks=True, ignore=ignore)
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=dst, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dst, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], cwd=dst, check=True)
    return dst


def source_tree(package: str, src: Path | None) -> Path:
    """``src`` as given, or the unpacked sdist of ``package`` (downloaded once)."""
    if src is not None:
        return src.resolve()
    from bench_index import fetch_sdist

    return fetch_sdist(package)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def llmc(*args: str, kill_after: float | None = None) -> tuple[float, float, dict | None]:
    """Run `python -m llmc ARGS --json` as its own process: (wall seconds, CPU seconds of it
    and its workers, its JSON). With ``kill_after``, SIGKILL it then (JSON None)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"}
    cpu = children_cpu()
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "llmc", *args, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=kill_after,
        )
    except subprocess.TimeoutExpired:  # subprocess.run kills (SIGKILL) and waits
        return time.perf_counter() - started, children_cpu() - cpu, None
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"llmc {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return wall, children_cpu() - cpu, json.loads(proc.stdout)


def coverage(repo: Path) -> dict:
    from llmc.index.backfill import Coverage
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(repo), readonly=True)
    try:
        return Coverage.of(store.vector_counts()).to_json()
    finally:
        store.close()


def graph_seconds(repo: Path) -> float | None:
    """The graph update's own wall time (``rag_graph.json``'s stats, taken before the JSON
    is written): with chunk workers it runs beside the span writes and the lexical update,
    so ``timings["graph"]`` is only what is left of it after the lexical index is
    committed."""
    try:
        data = json.loads((repo / ".llmc" / "rag_graph.json").read_bytes())
        return data["graph"]["stats"]["seconds"]
    except (OSError, ValueError, KeyError):
        return None


def peak_child_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", default="SQLAlchemy==2.0.36")
    ap.add_argument("--src", type=Path, default=None, help="an unpacked tree instead")
    ap.add_argument("--no-full", action="store_true", help="stop after searchable + search")
    ap.add_argument("--one-shot", action="store_true", help="also time one plain `llmc index`")
    ap.add_argument(
        "--backfill-budget-s",
        type=float,
        default=0.0,
        help="SIGKILL the backfill after this long and extrapolate from its rate",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    src = source_tree(args.package, args.src)
    out: dict = {"machine": machine(), "python": platform.python_version(), "source": str(src)}
    with tempfile.TemporaryDirectory(prefix="llmc-searchable-") as tmp:
        repo = prepare(src, Path(tmp) / "repo")
        out["files_in_tree"] = sum(
            1 for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts
        )

        wall, cpu, first = llmc("index", str(repo), "--no-vectors")
        assert first is not None
        graph = first["timings"].get("graph", 0.0)
        out["searchable"] = {
            "process_wall_s": round(wall, 2),
            "process_cpu_s": round(cpu, 2),
            "bm25_exact_in_run_s": first["searchable_seconds"],
            "graph_s": graph,
            "with_graph_in_run_s": round(first["searchable_seconds"] + graph, 3),
            "graph_own_s": graph_seconds(repo),
            "phases_wall_s": first["timings"],
            "phases_cpu_s_main_process": first["cpu_timings"],
            "files_indexed": first["files_indexed"],
            "skipped": first["skipped_by_reason"],
            "spans": first["spans_total"],
        }
        wall, _, answer = llmc("search", "--repo", str(repo), "-k", "5", QUERY)
        assert answer is not None
        out["search_at_0pct"] = {
            "wall_s": round(wall, 2),
            "results": [f"{r['path']}:{r['start_line']}" for r in answer["results"]],
            "warnings": answer["warnings"],
        }
        if args.backfill_budget_s:
            wall, cpu, _ = llmc("index", str(repo), kill_after=args.backfill_budget_s)
            cov = coverage(repo)
            rate = cov["embedded"] / wall if wall else 0.0
            out["backfill_killed"] = {
                "killed_after_s": round(wall, 1),
                "cpu_s": round(cpu, 2),
                "coverage": cov["line"],
                "spans_per_s_incl_model_load": round(rate, 2),
                "extrapolated_full_backfill_s": round(cov["total"] / rate, 0) if rate else None,
            }
        elif not args.no_full:
            wall, cpu, rest = llmc("index", str(repo))
            assert rest is not None
            out["backfill"] = {
                "process_wall_s": round(wall, 2),
                "process_cpu_s": round(cpu, 2),
                "embedded": rest["embedded"],
                "embed_s": round(rest["timings"].get("embed", 0.0), 2),
                "spans_per_s": rest["spans_per_second"],
                "vectors": rest["vectors"]["line"],
            }
            out["full_index_s"] = round(out["searchable"]["process_wall_s"] + wall, 2)
        if args.one_shot:
            repo2 = prepare(src, Path(tmp) / "repo2")
            wall, cpu, one = llmc("index", str(repo2))
            assert one is not None
            out["one_shot"] = {
                "process_wall_s": round(wall, 2),
                "process_cpu_s": round(cpu, 2),
                "bm25_exact_in_run_s": one["searchable_seconds"],
                "seconds_in_run": one["seconds"],
                "vectors": one["vectors"]["line"],
            }
        out["peak_child_rss_mb"] = round(peak_child_rss_mb(), 1)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
