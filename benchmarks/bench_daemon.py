"""Daemon benchmark: warm search latency through the socket, and edit → searchable time.

    python benchmarks/bench_daemon.py [--repo PATH] [--queries 200] [--edits 10] [--out FILE]

Without ``--repo`` it copies this checkout's ``llmc/``, ``docs/``, ``tests/`` and
``benchmarks/`` into a temporary git repository (offline, ~150 files). Rerank stages are
switched off (every ``search.*rerank*`` / ``hyde`` switch the config has), as the targets
are stated without rerankers on CPU.

Measures, client side, with a new connection per request as `llmc search` makes:
  * warm search through the daemon: p50 / p95 / p99 of N queries (targets: p50 <= 50 ms)
  * `llmc search --json` as a process, with the daemon vs. without (LLMC_NO_DAEMON=1)
  * one-file edit → searchable: write a new function into a file, poll the daemon until the
    new name is a result (target <= 1.5 s); the watcher's debounce (300 ms) is included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
QUERIES = [
    "where is the index writer lock taken",
    "IndexLock",
    "how are embeddings cached",
    "reciprocal rank fusion",
    "debounce file watcher events",
    "Store.replace_file",
    "parse the config file precedence",
    "what happens when a file is binary",
    "tantivy lexical index rebuild",
    "route a query to code or docs",
    "sqlite-vec knn search",
    "git hooks install",
    "how do I run the daemon",
    "skip secret files like .env",
    "walk the repository with git ls-files",
    "SearchResponse to_json",
    "installation",
    "ThreadLimiter",
    "incremental indexing by content hash",
    "bearer token for tcp",
]


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "p50_ms": round(pct(ms, 50), 2),
        "p95_ms": round(pct(ms, 95), 2),
        "p99_ms": round(pct(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "max_ms": round(max(ms), 2),
    }


def make_repo(target: Path) -> Path:
    target.mkdir(parents=True)
    for sub in ("llmc", "docs", "tests", "benchmarks"):
        if (HERE / sub).is_dir():
            shutil.copytree(
                HERE / sub,
                target / sub,
                ignore=shutil.ignore_patterns("__pycache__", ".cache", "*.pyc"),
            )
    for name in ("README.md", "pyproject.toml"):
        if (HERE / name).is_file():
            shutil.copy(HERE / name, target / name)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}  # fmt: skip
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *cmd], cwd=target, check=True, env=env, capture_output=True)
    return target


def no_rerank_config() -> tuple[str, list[str]]:
    """llmc.toml lines that switch every rerank / HyDE stage this build has off."""
    from llmc.config import Config

    off: dict[str, list[str]] = {}
    for key, value, _ in Config().items():
        section, name = key.split(".", 1)
        staged = "rerank" in section or "rerank" in name or "hyde" in section or "hyde" in name
        if isinstance(value, bool) and staged and (name == "enabled" or section == "search"):
            off.setdefault(section, []).append(name)
    text = "".join(
        f"[{section}]\n" + "".join(f"{n} = false\n" for n in names)
        for section, names in off.items()
    )
    return text, [f"{s}.{n}" for s, names in off.items() for n in names]


def llmc(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmc", *args], capture_output=True, text=True, env=env,
        check=check, timeout=3600,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, default=None, help="An existing repo (default: a copy)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--edits", type=int, default=10)
    ap.add_argument("--cli-runs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from llmc.daemon.client import request

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = None
    if args.repo is None:
        tmp = Path(tempfile.mkdtemp(prefix="llmc-bench-daemon-"))
        root = make_repo(tmp / "repo")
    else:
        root = args.repo.resolve()
    toml, rerank_off = no_rerank_config()
    if not (root / "llmc.toml").exists():
        (root / "llmc.toml").write_text(toml)
    report: dict = {
        "repo": str(root),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "rerank_switches_off": rerank_off,
    }
    started = time.perf_counter()
    llmc("index", str(root), "-q")
    report["initial_index_s"] = round(time.perf_counter() - started, 2)

    started = time.perf_counter()
    llmc("daemon", "start", "--repo", str(root), "--no-tcp")
    report["daemon_start_s"] = round(time.perf_counter() - started, 2)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            st = request(root, "status")
            q = st["queue"]
            if st["ready"] and not q["running"] and not q["pending"]:
                break
            time.sleep(0.2)
        report["daemon_ready_s"] = round(time.perf_counter() - started, 2)
        st = request(root, "status")
        report["index"] = st["index"]
        report["models"] = st["models"]

        # -- warm search through the socket --------------------------------------------------
        for q in QUERIES:  # one untimed pass
            request(root, "search", {"query": q})
        wall, server = [], []
        for i in range(args.queries):
            q = QUERIES[i % len(QUERIES)]
            t = time.perf_counter()
            out = request(root, "search", {"query": q})
            wall.append(time.perf_counter() - t)
            server.append(out["took_ms"] / 1000)
        report["warm_search_via_daemon"] = summary(wall)
        report["warm_search_server_took"] = summary(server)

        # -- the CLI as a process, with and without the daemon -------------------------------
        def cli_runs(env: dict) -> list[float]:
            times = []
            for i in range(args.cli_runs):
                t = time.perf_counter()
                llmc("search", QUERIES[i % len(QUERIES)], "--json", "--repo", str(root), env=env)
                times.append(time.perf_counter() - t)
            return times

        report["cli_search_with_daemon"] = summary(cli_runs(dict(os.environ)))
        report["cli_search_without_daemon"] = summary(
            cli_runs({**os.environ, "LLMC_NO_DAEMON": "1"})
        )

        # -- one-file edit → searchable -------------------------------------------------------
        targets = sorted((root / "llmc").rglob("*.py"))[:8] or sorted(root.rglob("*.py"))[:8]
        latencies, runs = [], []
        for i in range(args.edits):
            path = targets[i % len(targets)]
            rel = path.relative_to(root).as_posix()
            name = f"bench_marker_{i}_{os.getpid()}"
            text = path.read_text(encoding="utf-8")
            t = time.perf_counter()
            path.write_text(text + f"\n\ndef {name}(value):\n    return value\n", "utf-8")
            while True:
                hits = request(root, "search", {"query": name, "k": 3})["results"]
                if any(h["path"] == rel and h["symbol"] == name for h in hits):
                    latencies.append(time.perf_counter() - t)
                    break
                if time.perf_counter() - t > 60:
                    raise SystemExit(f"edit {i} not searchable after 60 s")
                time.sleep(0.01)
            while True:  # let the run finish before the next edit
                q = request(root, "status")["queue"]
                if not q["running"] and not q["pending"]:
                    runs.append(q["last"]["summary"]["seconds"])
                    break
                time.sleep(0.05)
            time.sleep(0.5)
        report["edit_to_searchable"] = summary(latencies)
        report["reindex_run"] = summary(runs)
        report["daemon_rss_mib"] = round(request(root, "status")["memory"]["rss_bytes"] / 2**20)
    finally:
        llmc("daemon", "stop", "--repo", str(root), check=False)
        report["loadavg_end"] = os.getloadavg()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
