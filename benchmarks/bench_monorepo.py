"""Memory and time of a cold `llmc index --no-vectors` on a monorepo: nine projects side by side.

    python benchmarks/bench_monorepo.py [--copies N] [--reruns] [--out FILE] [--keep DIR]
        [--min-free-gb 4] [--tracemalloc]

Issue 26: peak RSS must not grow with the tree. The tree is nine real projects' sdists
(pinned below: name, version, sha256), each unpacked under its own root (``django/``,
``sympy/``, ...) in one git repository. The archives are fetched once into
``benchmarks/.cache/nine/`` (git-ignored): ``pip download --no-deps --no-binary :all:``
first (``llmc.corpora.pip_download``); an sdist whose metadata pip cannot prepare without
its build toolchain (matplotlib, scikit-learn, astropy) is taken from the file PyPI's JSON
API names for that version. Either way its sha256 must match the pin.

``--copies N`` lays the nine projects out N times, copy 1 under ``<name>/`` as above and
copy k under ``copy<k>/<name>/`` (``--copies 5``: 122,640 files, the issue's 100k-file
tree). The copies are byte-identical: llmc's content-hash checks are per path (a file is
skipped only when *its own* row has the same hash; the graph's facts cache is keyed by
path too), and the one by-content cache, the embeddings' (model, text hash), hashes the
span's embed text, whose header starts with the file's path; so every copy is read,
parsed, written and resolved like a distinct file, and nothing short-circuits. Only git
stores them once (blobs by content), which makes the tree cheap to commit, not to index.

Measured (one cold process, ``HF_HUB_OFFLINE=1``, no daemon): wall time, when BM25 and
exact symbols answered (``searchable_seconds``), the phases, the peak RSS of the largest
process (``ru_maxrss`` of the children) and of the whole process tree (bench_scale.py's
/proc sampler, every 0.2 s), and the size of ``.llmc/``. ``--tracemalloc`` runs the index in
this process instead, with tracemalloc, and prints the Python heap's peak (not RSS).
Also measured: the walk alone (``llmc.index.walk.walk`` in this process, after the tree is
on disk) and, with ``--reruns``, two more ``llmc index --no-vectors`` processes after the
cold one: a no-op rerun and a rerun after one file's edit (a function appended to
``django/django/utils/text.py``, put back afterwards). The sampler stops the run (kills
its process group) if the machine's ``MemAvailable`` falls under ``--min-free-gb``: the
box is shared, and the result then says so instead of a figure.

These projects are reserved for quality work; a speed and memory benchmark may use them.
Nothing here is a test and nothing asserts a time or a memory figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import dir_mb  # noqa: E402
from bench_searchable import machine  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache" / "nine"

# name, version, sha256 of the sdist (the latest on PyPI on 2026-11-27)
NINE = (
    ("django", "6.1.3", "b5d2d9e35295065d13b1927b3f19a59bd119f737aa6299def14ccca1ae3c8c0d"),
    ("sympy", "1.14.0", "d3d3fe8df1e5a0b42f0e7bdf50541697dbe7d23746e894990c030e2b05e72517"),
    ("matplotlib", "3.11.2", "cec596316640f2b394b8f0daa0ea61a8eae82d017b620b9f202befb972a59ea4"),
    ("scikit-learn", "1.9.1", "629cada3e33e2b9bf376cdc7614a47a4140b8aedc1d836579e359736fbd82977"),
    ("astropy", "8.0.2", "e6af35823099ad6a40b57dbe5ff845f577374ea131925c9fa4b49eeab06c5310"),
    ("sphinx", "9.2.0", "90470459f3cab15d9dfed146c71cf77694b0445df17b2e0e69059cb9f7fc9ee4"),
    ("xarray", "2026.9.0", "6abc69694c22fa1f0fb2f357ff4e41d88beb4477ed71091f944b7dbf67ed54fe"),
    ("pytest", "9.2.0", "97c4f3b1f3c7414aa36465e09b8220f1d03627993bd51b1282e193753c80557b"),
    ("pylint", "4.1.4", "4c9176dc6c9f1b98b742195f01899b290369d5a27b4b41d1014c17f2f96b26f1"),
)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _from_json_api(name: str, version: str, dest: Path) -> None:
    api = f"https://pypi.org/pypi/{name}/json"
    with urllib.request.urlopen(api, timeout=60) as r:
        urls = json.load(r)["releases"][version]
    sdist = next(u for u in urls if u["packagetype"] == "sdist")
    url = urllib.parse.urljoin(api, sdist["url"])  # a mirror may answer relative URLs
    with urllib.request.urlopen(url, timeout=300) as r, open(dest / sdist["filename"], "wb") as f:
        shutil.copyfileobj(r, f)


def sdist(name: str, version: str, sha256: str) -> Path:
    """The pinned sdist in the cache, fetched on first use; its sha256 checked."""
    dest = CACHE / "sdists"
    dest.mkdir(parents=True, exist_ok=True)
    for p in dest.iterdir():
        if p.suffixes[-2:] in ([".tar", ".gz"], [".zip"]) and _sha256(p) == sha256:
            return p
    from llmc.corpora import pip_download
    from llmc.errors import LlmcError

    try:
        pip_download(f"{name}=={version}", dest)
    except LlmcError as e:  # its metadata needs a build toolchain: the file itself
        print(f"{name}: pip download failed ({str(e)[:80]}...); PyPI's JSON API", file=sys.stderr)
        _from_json_api(name, version, dest)
    for p in dest.iterdir():
        if p.is_file() and _sha256(p) == sha256:
            return p
    raise SystemExit(f"{name}=={version}: no sdist with sha256 {sha256} in {dest}")


def build_tree(repo: Path, copies: int = 1) -> dict:
    """The nine sdists unpacked under ``repo/<name>/`` and, for copies 2..N, copied under
    ``repo/copy<k>/<name>/``; one git commit."""
    from llmc.corpora import extract_archive

    repo.mkdir(parents=True)
    for name, version, sha in NINE:
        with tempfile.TemporaryDirectory(dir=repo.parent) as tmp:
            top = extract_archive(sdist(name, version, sha), Path(tmp))
            shutil.move(str(top), repo / name)
    for k in range(2, copies + 1):
        for name, _, _ in NINE:
            shutil.copytree(repo / name, repo / f"copy{k}" / name, symlinks=True)
    started = time.perf_counter()
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"nine projects x{copies}"], check=True)
    git_s = time.perf_counter() - started
    files = [p for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts]
    return {
        "projects": [f"{n}=={v}" for n, v, _ in NINE],
        "copies": copies,
        "files_in_tree": len(files),
        "tree_mb": round(sum(p.stat().st_size for p in files) / 2**20, 1),
        "git_add_commit_s": round(git_s, 1),
    }


def walk_alone(repo: Path) -> dict:
    """``llmc.index.walk.walk`` in this process: what the index's scan starts with."""
    from llmc.config import load_config
    from llmc.index.walk import walk

    cfg = load_config(repo).index
    runs = []
    for _ in range(2):
        started = time.perf_counter()
        result = walk(repo, cfg)
        runs.append(round(time.perf_counter() - started, 2))
    return {"seconds": runs, "files_listed": len(result.files), "skipped": len(result.skipped)}


def mem_available_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return 1 << 30


def tree_rss_kb(root_pid: int) -> dict[int, int]:
    """VmRSS (kB) of ``root_pid`` and each of its descendants (bench_scale.py's /proc walk,
    kept per process: which one holds the memory)."""
    out, todo = {}, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            out[pid] = next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
            )
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return out


def index_cold(repo: Path, min_free_mb: int = 0, max_s: float = 0) -> dict:
    """One `llmc index --no-vectors --json` process, its tree's RSS sampled; stopped (its
    process group killed) if the machine's available memory falls under ``min_free_mb``
    or it runs past ``max_s`` seconds (0: no limit)."""
    import llmc

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"}
    started = time.perf_counter()
    started_epoch = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(repo), "--no-vectors", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # `-m` puts the working directory first on sys.path, before PYTHONPATH: run from
        # the folder of the llmc this script imported (a snapshot on PYTHONPATH, or the
        # checkout), or a checkout's llmc/ is measured instead of the snapshot
        cwd=Path(llmc.__file__).parent.parent,
        start_new_session=True,  # its own process group: the guard kills workers too
    )
    peak = [0.0]
    low = [mem_available_mb()]  # the machine's lowest MemAvailable during the run
    stopped: list[str] = []
    per_pid: dict[int, int] = {}  # each process's peak, kB
    at_peak: list = [0.0, {}]  # (seconds, {pid: kB}) when the tree's RSS peaked
    # (seconds, tree MB, the indexer's MB, the largest other process's MB), every 2 s
    timeline: list[tuple[float, int, int, int]] = []

    def sample() -> None:
        last = -2.0
        while proc.poll() is None:
            rss = tree_rss_kb(proc.pid)
            total = sum(rss.values()) / 1024
            if total > peak[0]:
                peak[0] = total
                at_peak[:] = [time.perf_counter() - started, rss]
            for pid, kb in rss.items():
                per_pid[pid] = max(per_pid.get(pid, 0), kb)
            now = time.perf_counter() - started
            if now - last >= 2.0:
                own = rss.get(proc.pid, 0)
                other = max((kb for pid, kb in rss.items() if pid != proc.pid), default=0)
                timeline.append((round(now, 1), round(total), own >> 10, other >> 10))
                last = now
            low[0] = min(low[0], mem_available_mb())
            if low[0] < min_free_mb and not stopped:
                stopped.append(f"MemAvailable {low[0]} MB < {min_free_mb} MB at {now:.0f} s")
                os.killpg(proc.pid, 9)
            if max_s and now > max_s and not stopped:
                stopped.append(f"time limit {max_s:.0f} s")
                os.killpg(proc.pid, 9)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    sampler.join()
    if stopped:
        gate = repo / ".llmc" / "graph.gate"  # its token is written once the writes commit
        return {
            "stopped": stopped[0],
            "process_wall_s": round(wall, 1),
            "graph_gate_written_s": (
                round(gate.stat().st_mtime - started_epoch, 1) if gate.exists() else None
            ),
            "peak_tree_rss_mb_until_stopped": round(peak[0]),
            "tree_rss_mb_every_2s": timeline,
        }
    if proc.returncode != 0:
        raise SystemExit(f"llmc index failed:\n{err[-2000:]}")
    report = json.loads(out)
    return {
        "process_wall_s": round(wall, 1),
        "min_mem_available_mb": low[0],
        "searchable_s_in_run": round(report["searchable_seconds"], 1),
        "seconds_in_run": round(report["seconds"], 1),
        "phases_s": report["timings"],
        "files_indexed": report["files_indexed"],
        "spans": report["spans_total"],
        "peak_tree_rss_mb": round(peak[0]),
        "peak_rss_mb_by_process": {
            ("indexer" if pid == proc.pid else f"worker {pid}"): round(kb / 1024)
            for pid, kb in sorted(per_pid.items(), key=lambda x: -x[1])
        },
        "tree_peak_at_s": round(at_peak[0], 1),
        "tree_peak_by_process_mb": {
            ("indexer" if pid == proc.pid else f"worker {pid}"): round(kb / 1024)
            for pid, kb in sorted(at_peak[1].items(), key=lambda x: -x[1])
        },
        "tree_rss_mb_every_2s": timeline,
        "peak_single_process_rss_mb": round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        ),
    }


def index_traced(repo: Path) -> dict:
    """The same run in this process under tracemalloc: the Python heap's peak."""
    import tracemalloc

    from llmc.config import load_config
    from llmc.index.indexer import Indexer

    tracemalloc.start()
    report = Indexer(repo, load_config(repo)).run(vectors=False)
    current, peak = tracemalloc.get_traced_memory()
    top = tracemalloc.take_snapshot().statistics("lineno")[:10]
    tracemalloc.stop()
    return {
        "spans": report.spans_total,
        "python_heap_peak_mb": round(peak / 2**20),
        "python_heap_end_mb": round(current / 2**20),
        "largest_at_end": [str(s) for s in top],
    }


EDIT_TARGET = "django/django/utils/text.py"


def reruns(repo: Path, min_free_mb: int, save) -> dict:
    """After the cold run: a no-op `llmc index` process, then one after a one-file edit."""
    out = {"no_op": index_cold(repo, min_free_mb)}
    save(out)
    target = repo / EDIT_TARGET
    original = target.read_bytes()
    target.write_bytes(original + b"\n\ndef llmc_bench_added(x):\n    return x * 2\n")
    try:
        out["one_file_edit"] = {"file": EDIT_TARGET, **index_cold(repo, min_free_mb)}
    finally:
        target.write_bytes(original)
    for run in out.values():  # ru_maxrss covers every child so far: the cold run's
        run.pop("peak_single_process_rss_mb", None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="build the tree here, keep it")
    ap.add_argument("--copies", type=int, default=1, help="the nine projects N times")
    ap.add_argument("--reruns", action="store_true", help="then a no-op and a one-edit rerun")
    ap.add_argument("--min-free-gb", type=float, default=4.0, help="stop the run under this")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop the cold run after")
    ap.add_argument("--tracemalloc", action="store_true")
    args = ap.parse_args()
    min_free_mb = int(args.min_free_gb * 1024)
    out: dict = {"machine": machine(), "python": platform.python_version()}
    out["commit"] = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    import llmc  # the one the index processes run too (PYTHONPATH may name a snapshot)

    out["llmc_from"] = str(Path(llmc.__file__).parent)
    with tempfile.TemporaryDirectory(prefix="llmc-nine-") as tmp:
        name = "nine" if args.copies == 1 else f"nine-x{args.copies}"
        repo = (args.keep or Path(tmp)) / name
        if repo.exists():
            shutil.rmtree(repo / ".llmc", ignore_errors=True)
        else:
            out["tree"] = build_tree(repo, args.copies)
        out["tree_path"] = str(repo)
        out["walk"] = walk_alone(repo)
        out["load_average_at_start"] = round(os.getloadavg()[0], 1)
        if args.tracemalloc:
            out["index"] = index_traced(repo)
        else:
            out["index"] = index_cold(repo, min_free_mb, args.max_minutes * 60)
        out["index_on_disk_mb"] = round(dir_mb(repo / ".llmc"), 1)
        out["load_average_after_cold_run"] = round(os.getloadavg()[0], 1)

        def save(partial: dict | None = None) -> None:  # each step kept as it ends
            if partial is not None:
                out["reruns"] = partial
            if args.out:
                args.out.write_text(json.dumps(out, indent=2) + "\n")

        save()
        if args.reruns and "stopped" not in out["index"]:
            out["reruns"] = reruns(repo, min_free_mb, save)
        out["load_average_at_end"] = round(os.getloadavg()[0], 1)
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
