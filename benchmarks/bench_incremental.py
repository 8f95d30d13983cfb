"""One-file edit → searchable, as a new `llmc index` process and through the daemon.

    python benchmarks/bench_incremental.py --repo DIR [--src DIR] [--modes default,later]
        [--runs 3] [--daemon-edits 5] [--file REL] [--no-daemon] [--out FILE]

Issue 26: a one-file reindex in ≤ 2 s as a new `llmc index` process and ≤ 1 s through the
daemon, at monorepo size. ``DIR`` must be indexed already (with its vectors, as after a
day's work); each timed run appends one new function to one file (``--file``, default:
the first Python file git lists), so every run parses one file and writes its spans.

CLI: ``python -P -m llmc index DIR --json [--vectors MODE]`` per mode (``default``: no
flag, which off a terminal and without a daemon embeds here, the behaviour before the
hand-off; ``later``: the new spans' vectors go to a background process; ``none``:
``--no-vectors``, the same first phase on a tree whose vectors are not all there, where
``later`` would start embedding all of them). Measured: the
process's wall time (start-up and imports included), ``searchable_seconds`` and the phases
it reports, and for ``later`` when the background process brought the graph up and when
the vectors were complete (``--graph-only``: it is stopped once the graph is up, for a tree
whose vectors were never computed).
``--src`` runs another checkout's llmc (``PYTHONPATH``; e.g. the code before a change).

Daemon: ``llmc daemon start``, ready and idle, then per edit the time from the write to the
first search (over the socket) that returns the new function, and the reindex run's own
``seconds`` / ``searchable_seconds``.

The machine (``lscpu``) and the load average before and after are in the output; run it
under ``flock /tmp/llmc-cpu.lock`` on a shared machine. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_searchable import machine  # noqa: E402


def llmc_cmd(src: Path | None) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "LLMC_"))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return [sys.executable, "-P", "-m", "llmc"], env


def run(cmd: list[str], env: dict[str, str], timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=tempfile.gettempdir()
    )


def target_file(root: Path, rel: str | None) -> Path:
    if rel:
        return root / rel
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    return root / sorted(listed)[0]


def append_function(path: Path, name: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(f"\n\ndef {name}(value):\n    '''Benchmark edit {name}.'''\n    return value\n")


def status(base: list[str], env: dict[str, str], root: Path) -> dict:
    out = run([*base, "status", "--repo", str(root), "--json"], env)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def wait_background(base, env, root: Path, handoff: dict, t: float, graph_only: bool) -> dict:
    """When the background process brought the graph up, and its vectors (or, with
    ``graph_only``, stop it once the graph is up: a tree whose vectors were never computed
    would keep it embedding for an hour)."""
    out: dict = {}
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        st = status(base, env, root)
        searchable = st.get("searchable") or {}
        if "graph" not in out and searchable.get("graph") == "yes":
            out["graph"] = time.perf_counter() - t
            if graph_only:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(handoff["pid"], signal.SIGTERM)
                while Path(f"/proc/{handoff['pid']}").exists():
                    time.sleep(0.1)
                return out
        if st.get("vectors", {}).get("complete") and "graph" in out:
            out["vectors"] = time.perf_counter() - t
            return out
        time.sleep(0.5)
    raise SystemExit("the background process did not finish in 900 s")


def stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def bench_cli(
    root: Path, base: list[str], env: dict, mode: str, runs: int, path: Path, graph_only: bool
) -> dict:
    walls, searchable, seconds, embedded_after, graph_after, phases = [], [], [], [], [], []
    for i in range(runs):
        append_function(path, f"bench_cli_{mode}_{i}_{os.getpid()}_{int(time.time())}")
        flag = {"default": [], "none": ["--no-vectors"]}.get(mode, ["--vectors", mode])
        t = time.perf_counter()
        out = run([*base, "index", str(root), "--json", *flag], env)
        walls.append(time.perf_counter() - t)
        if out.returncode != 0:
            raise SystemExit(f"llmc index failed:\n{out.stderr}")
        summary = json.loads(out.stdout)
        searchable.append(summary["searchable_seconds"])
        seconds.append(summary["seconds"])
        phases.append(summary["timings"])
        if summary.get("backfill") == "background":
            done = wait_background(base, env, root, summary["handoff"], t, graph_only)
            graph_after.append(done["graph"])
            if "vectors" in done:
                embedded_after.append(done["vectors"])
    out = {
        "wall_s": stats(walls),
        "run_seconds": stats(seconds),
        "searchable_seconds": stats(searchable),
        "phases_last": phases[-1],
    }
    if graph_after:
        out["graph_current_after_s"] = stats(graph_after)
    if embedded_after:
        out["vectors_complete_after_s"] = stats(embedded_after)
    return out


def bench_daemon(root: Path, base: list[str], env: dict, edits: int, path: Path) -> dict:
    from llmc.daemon.client import request

    rel = path.relative_to(root).as_posix()
    run([*base, "daemon", "start", "--repo", str(root), "--no-tcp"], env)

    def idle() -> dict:
        """Nothing waiting and nothing running, or only a backfill (a tree whose vectors are
        still being computed: it gives way to the next edit)."""
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            st = request(root, "status")
            q = st["queue"]
            pending = (st.get("watcher") or {}).get("pending_paths", 0)
            running = q["running"]
            embedding = running and (running.get("progress") or {}).get("phase") == "embedding"
            if st["ready"] and (not running or embedding) and not q["pending"] and not pending:
                return st
            time.sleep(0.1)
        raise SystemExit("the daemon was not idle within 900 s")

    def last_run(before: int) -> dict:
        """The summary of the edit's run: the last finished one, or the one backfilling."""
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            q = idle()["queue"]
            if q["last"] and q["last"]["id"] > before and q["last"]["summary"]:
                return q["last"]["summary"]
            if q["running"] and q["running"]["id"] > before:
                return {}  # still backfilling: its timings come at its end
            time.sleep(0.1)
        raise SystemExit("no run after the edit within 900 s")

    try:
        idle()
        latencies, runs, searchable = [], [], []
        for i in range(edits):
            name = f"bench_daemon_{i}_{os.getpid()}_{int(time.time())}"
            q = request(root, "status")["queue"]
            before = max((j or {}).get("id", 0) for j in (q["last"], q["running"], q["pending"]))
            t = time.perf_counter()
            append_function(path, name)
            while True:
                hits = request(root, "search", {"query": name, "k": 3})["results"]
                if any(h["path"] == rel and h["symbol"] == name for h in hits):
                    latencies.append(time.perf_counter() - t)
                    break
                if time.perf_counter() - t > 120:
                    raise SystemExit(f"edit {i} not searchable after 120 s")
                time.sleep(0.01)
            time.sleep(0.5)
            last = last_run(before)
            if last:
                runs.append(last["seconds"])
                searchable.append(last["searchable_seconds"])
        rss = request(root, "status")["memory"]["rss_bytes"]
    finally:
        run([*base, "daemon", "stop", "--repo", str(root)], env)
    return {
        "edit_to_searchable_s": stats(latencies),
        "reindex_run_seconds": stats(runs) if runs else None,
        "reindex_searchable_seconds": stats(searchable) if searchable else None,
        "daemon_rss_mib": round(rss / 2**20) if rss else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--src", type=Path, default=None, help="Run this checkout's llmc")
    ap.add_argument("--modes", default="default,later")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--daemon-edits", type=int, default=5)
    ap.add_argument("--no-daemon", action="store_true")
    ap.add_argument(
        "--graph-only",
        action="store_true",
        help="later: stop the background process once the graph is up (a tree never embedded)",
    )
    ap.add_argument("--file", default=None, help="The file each run edits (repo-relative)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    root = args.repo.resolve()
    base, env = llmc_cmd(args.src.resolve() if args.src else None)
    path = target_file(root, args.file)
    files = len(subprocess.run(["git", "ls-files"], cwd=root, capture_output=True,
                               text=True, check=True).stdout.splitlines())  # fmt: skip
    report: dict = {
        "machine": machine(),
        "repo": str(root),
        "git_files": files,
        "src": str(args.src) if args.src else "this checkout",
        "edited": path.relative_to(root).as_posix(),
        "loadavg_start": os.getloadavg(),
    }
    settle = ["--no-vectors"] if "none" in args.modes.split(",") or args.graph_only else []
    run([*base, "index", str(root), "-q", *settle], env)  # and compiles what changed
    for mode in args.modes.split(","):
        report[f"cli_{mode}"] = bench_cli(root, base, env, mode, args.runs, path, args.graph_only)
    if not args.no_daemon:
        report["daemon"] = bench_daemon(root, base, env, args.daemon_edits, path)
    report["loadavg_end"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
