"""Load benchmark: a daemon under concurrent mixed traffic while a writer changes the tree.

    python benchmarks/bench_load.py [--files 1000] [--clients 16] [--requests 2000]
                                    [--changes 200] [--seed 0] [--out FILE]

A generated git repository (``--files`` Python modules and docs) is served by a real
``llmc daemon`` (Unix socket, plus TCP on 127.0.0.1 with a token). ``--clients`` threads
send ``--requests`` requests in all, mixed: search, graph where-used, status, feedback,
malformed JSON, oversized bodies, a wrong token over TCP, and slow-loris connections that
trickle a request line. Meanwhile a writer edits, renames and deletes ``--changes`` files
and the daemon's watcher reindexes them. Every loop is bounded in count and in time.

Checked afterwards (the run fails if any check fails):
  * zero 5xx; every request got an answer (no drop), and each answer is its request's
    (a search echoes its query, where-used its symbol);
  * every malformed request (bad JSON, oversized, wrong token) got its 4xx; every
    slow-loris connection was closed by the server (408 or EOF) within the bound;
  * no search result named a file that did not exist at some moment between sending the
    request and reading the answer (the daemon drops results of deleted files at answer
    time; a file deleted while the request was in flight may honestly appear);
  * the daemon's index equals a fresh index of the final tree (same spans, every span with
    a vector, lexical docs = spans).

Reported: throughput, p50/p95/p99 latency per request kind, and the machine (CPU model).
``run_load`` is also what ``tests/faults/test_load_short.py`` runs, at a small size, where
only the correctness checks are asserted, never a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SOCKET_TIMEOUT_S = 120.0
SLOW_LORIS_BOUND_S = 30.0  # the server's deadline for a whole request is 10 s
TRICKLE_S = 15.0
READY_TIMEOUT_S = 900.0
IDLE_TIMEOUT_S = 600.0
KINDS = (
    ("search", 45),
    ("where_used", 10),
    ("status", 10),
    ("feedback", 5),
    ("bad_json", 10),
    ("oversized", 7),
    ("wrong_token", 10),
    ("slow_loris", 2),
    ("trickle", 1),
)
EXPECTED_4XX = {"bad_json": 400, "oversized": 413, "wrong_token": 401}
WORDS = (
    "ledger invoice upload report archive session cache queue token config parser "
    "router backoff checksum stream batch merge split render schedule"
).split()


# -- the repository and the writer -----------------------------------------------------------
def module_text(i: int, version: int) -> str:
    rng = random.Random(i * 7919 + version)
    a, b = rng.sample(WORDS, 2)
    return (
        f'"""Module {i}: {a} and {b} helpers."""\n\n\n'
        f"def {a}_{b}_{i}_v{version}(items):\n"
        f'    """Handle the {a} {b} items of module {i}."""\n'
        f"    return [x for x in items if x % {i + 2}]\n\n\n"
        f"def stable_helper_{i}(x):\n"
        f'    """A helper of module {i} that the writer never changes."""\n'
        f"    return x + {i}\n"
    )


def make_repo(root: Path, n_files: int) -> Path:
    root.mkdir(parents=True)
    for i in range(n_files):
        path = root / f"pkg{i % 20}" / f"mod_{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(module_text(i, 0))
    (root / "docs").mkdir()
    for i in range(max(1, n_files // 20)):
        (root / "docs" / f"guide_{i}.md").write_text(
            f"# Guide {i}\n\nHow {WORDS[i % len(WORDS)]} works.\n"
        )
    (root / "llmc.toml").write_text("[learn]\nlog_queries = false\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", **_committer()}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "gen"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def _committer() -> dict[str, str]:
    return {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}


@dataclass
class Timeline:
    """When each path was created and deleted (monotonic, conservative bounds)."""

    deleted: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    created: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, path: str, start: float, end: float) -> None:
        with self.lock:
            getattr(self, kind).setdefault(path, []).append((start, end))

    def existed_between(self, path: str, t0: float, t1: float, initial: bool) -> bool:
        """Could ``path`` have existed at some instant of [t0, t1]? A create or delete that
        overlaps the window counts as yes: it happened while the request was in flight."""
        with self.lock:
            events = [(s, e, "c") for s, e in self.created.get(path, [])]
            events += [(s, e, "d") for s, e in self.deleted.get(path, [])]
        exists = initial
        for start, end, kind in sorted(events):
            if start > t1:
                break
            if end >= t0:
                return True
            exists = kind == "c"
        return exists


def writer(
    root: Path,
    paths: list[str],
    n_changes: int,
    timeline: Timeline,
    seed: int,
    stop: threading.Event,
    pace_s: float,
) -> list[str]:
    """Edit, rename and delete ``n_changes`` files, one change per ``pace_s``."""
    rng = random.Random(seed)
    live = list(paths)
    log: list[str] = []
    for step in range(n_changes):
        if stop.is_set():
            break
        kind = rng.choice(("edit", "edit", "rename", "delete"))
        rel = live.pop(rng.randrange(len(live)))
        path = root / rel
        t0 = time.monotonic()
        if kind == "edit":
            i = int(path.stem.split("_")[1])
            path.write_text(module_text(i, step + 1))
            live.append(rel)
        elif kind == "rename":
            new_rel = f"{Path(rel).parent}/moved_{step}_{Path(rel).name}"
            path.rename(root / new_rel)
            t1 = time.monotonic()
            timeline.record("created", new_rel, t0, t1)
            timeline.record("deleted", rel, t0, t1)
            live.append(new_rel)
        else:
            path.unlink()
            timeline.record("deleted", rel, t0, time.monotonic())
        log.append(f"{kind} {rel}")
        time.sleep(pace_s)
    return log


# -- the clients -----------------------------------------------------------------------------
@dataclass
class Outcome:
    kind: str
    status: int  # HTTP status; 0 for a connection the server closed without an answer
    latency_s: float
    problem: str = ""


def _http(sock: socket.socket, data: bytes) -> tuple[int, dict]:
    sock.sendall(data)
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        head, sep, body = b"".join(chunks).partition(b"\r\n\r\n")
        if sep:
            length = _content_length(head)
            if length is not None and len(body) >= length:
                break
    raw = b"".join(chunks)
    if not raw:
        return 0, {}
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body else {}


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return None


def _request(
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    length: int | None = None,
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: llmc", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if method == "POST":
        lines += ["Content-Type: application/json", f"Content-Length: {length or len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class Target:
    sock_path: str
    tcp_port: int
    symbols: list[str]
    queries: list[str]
    timeline: Timeline
    initial: set[str]


def _unix() -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(SOCKET_TIMEOUT_S)
    return s


def one_request(kind: str, target: Target, rng: random.Random) -> Outcome:
    started = time.monotonic()
    try:
        status, problem = _DISPATCH[kind](target, rng, started)
    except (OSError, ValueError) as e:
        return Outcome(kind, -1, time.monotonic() - started, f"{type(e).__name__}: {e}")
    return Outcome(kind, status, time.monotonic() - started, problem)


def _post_unix(target: Target, path: str, payload: bytes, **kw) -> tuple[int, dict]:
    with _unix() as s:
        s.connect(target.sock_path)
        return _http(s, _request("POST", path, payload, **kw))


def _search(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    query = rng.choice(target.queries)
    status, body = _post_unix(target, "/v1/search", json.dumps({"query": query, "k": 5}).encode())
    done = time.monotonic()
    if status != 200:
        return status, f"search answered {status}: {body}"
    if body.get("query") != query:
        return status, f"misrouted: sent {query!r}, answer is for {body.get('query')!r}"
    for r in body.get("results", []):
        if not target.timeline.existed_between(
            r["path"], started, done, r["path"] in target.initial
        ):
            return status, f"result names {r['path']}, deleted before the request was sent"
    return status, ""


def _where_used(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    symbol = rng.choice(target.symbols)
    status, body = _post_unix(
        target, "/v1/graph/where-used", json.dumps({"symbol": symbol}).encode()
    )
    if status != 200:
        return status, f"where-used answered {status}: {body}"
    if symbol not in json.dumps(body):
        return status, f"misrouted: the answer does not name {symbol!r}"
    return status, ""


def _status(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    with _unix() as s:
        s.connect(target.sock_path)
        status, body = _http(s, _request("GET", "/v1/status"))
    ok = status == 200 and "queue" in body
    return status, "" if ok else f"status answered {status}: {str(body)[:200]}"


def _feedback(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    path = rng.choice(sorted(target.initial))
    payload = {
        "query": rng.choice(target.queries),
        "path": path,
        "start_line": 1,
        "end_line": 2,
        "vote": "up",
        "client": "bench_load",
    }
    status, body = _post_unix(target, "/v1/feedback", json.dumps(payload).encode())
    return status, "" if status == 200 else f"feedback answered {status}: {body}"


def _bad_json(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    status, body = _post_unix(target, "/v1/search", b'{"query": "x", ')
    return status, "" if status == 400 else f"bad JSON answered {status}"


def _oversized(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    status, body = _post_unix(target, "/v1/search", b'{"query": "', length=64 * 1024 * 1024)
    return status, "" if status == 413 else f"oversized body answered {status}"


def _wrong_token(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", target.tcp_port), timeout=SOCKET_TIMEOUT_S) as s:
        status, _ = _http(
            s, _request("GET", "/v1/status", headers={"Authorization": "Bearer nope"})
        )
    return status, "" if status == 401 else f"wrong token answered {status}"


def _slow_loris(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    """Half a request head, then silence: the server must cut us off (its request deadline:
    a 408, or before the uvicorn server a bare close, status 0)."""
    with _unix() as s:
        s.connect(target.sock_path)
        s.sendall(b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\n")
        s.settimeout(SLOW_LORIS_BOUND_S)
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            return -1, f"slow loris connection still open after {SLOW_LORIS_BOUND_S:g}s"
        except (BrokenPipeError, ConnectionResetError):
            return 0, ""
    if not chunk:
        return 0, ""  # closed by the server
    status = int(chunk.split(b" ", 2)[1]) if chunk.startswith(b"HTTP/") else -1
    return status, "" if 400 <= status < 500 else f"slow loris answered {status}"


def _trickle(target: Target, rng: random.Random, started: float) -> tuple[int, str]:
    """One byte a second: each byte comes well inside any read timeout, but the request
    never completes. The server's deadline for a whole request (10 s) answers 408 and
    closes it (0: closed without an answer). Observed, not judged (the short test must not
    hang on a time): -2 says it was still held when the client stopped after ``TRICKLE_S``."""
    data = b"POST /v1/search HTTP/1.1\r\nHost: llmc\r\nX-Pad: " + b"a" * 64
    with _unix() as s:
        s.connect(target.sock_path)
        s.settimeout(1.0)
        for i in range(int(TRICKLE_S)):
            try:
                s.sendall(data[i : i + 1])
                chunk = s.recv(4096)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                return 0, ""
            if not chunk:
                return 0, ""
            return int(chunk.split(b" ", 2)[1]), ""
    return -2, ""


_DISPATCH: dict[str, Callable[[Target, random.Random, float], tuple[int, str]]] = {
    "search": _search,
    "where_used": _where_used,
    "status": _status,
    "feedback": _feedback,
    "bad_json": _bad_json,
    "oversized": _oversized,
    "wrong_token": _wrong_token,
    "slow_loris": _slow_loris,
    "trickle": _trickle,
}


def clients(
    target: Target, n_clients: int, n_requests: int, seed: int, deadline_s: float
) -> list[Outcome]:
    plan_rng = random.Random(seed)
    names, weights = zip(*KINDS, strict=True)
    plan = plan_rng.choices(names, weights=weights, k=n_requests)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    cursor = iter(range(n_requests))
    end = time.monotonic() + deadline_s

    def work(worker: int) -> None:
        rng = random.Random(seed * 1000 + worker)
        while time.monotonic() < end:
            with lock:
                i = next(cursor, None)
            if i is None:
                return
            outcome = one_request(plan[i], target, rng)
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, end - time.monotonic() + SLOW_LORIS_BOUND_S))
    return outcomes


# -- the daemon --------------------------------------------------------------------------------
def llmc(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmc", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def _api(root: Path, endpoint: str) -> dict:
    with _unix() as s:
        s.connect(str(root / ".llmc" / "daemon.sock"))
        status, body = _http(s, _request("GET", f"/v1/{endpoint}"))
    if status != 200:
        raise RuntimeError(f"{endpoint} answered {status}: {body}")
    return body


def _idle(root: Path) -> bool:
    st = _api(root, "status")
    q = st["queue"]
    return bool(not q["pending"] and not q["running"] and not st["watcher"]["pending_paths"])


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (OSError, RuntimeError, KeyError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


def wait_settled(root: Path) -> None:
    """Idle twice, a second apart (a late watcher event may still be in debounce)."""
    wait_until(lambda: _idle(root) and (time.sleep(1.0) or _idle(root)), IDLE_TIMEOUT_S, "idle")


def start_daemon(root: Path, env: dict[str, str]) -> None:
    out = llmc("daemon", "start", "--repo", str(root), "--tcp", env=env)
    if out.returncode != 0:
        raise RuntimeError(f"daemon start failed: {out.stderr}")
    wait_until(lambda: _api(root, "status")["ready"] and _idle(root), READY_TIMEOUT_S, "ready")


def stop_daemon(root: Path, env: dict[str, str]) -> None:
    llmc("daemon", "stop", "--repo", str(root), env=env, timeout=120)


# -- the checks at the end -----------------------------------------------------------------------
def index_fingerprint(root: Path) -> tuple[set[tuple], int, int]:
    """(spans as (path, start, end, kind, text), spans with a vector, lexical docs)."""
    from llmc.paths import db_path, lexical_path
    from llmc.store.db import Store
    from llmc.store.lexical import LexicalIndex

    store = Store(db_path(root), readonly=True)
    try:
        spans = {
            (s.span.path, s.span.start_line, s.span.end_line, s.span.kind, s.span.text)
            for s in store.iter_spans()
        }
        vectors = sum(
            int(store.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
            for t in ("emb_code", "emb_docs")
        )
        docs = LexicalIndex(lexical_path(root), readonly=True).num_docs()
    finally:
        store.close()
    return spans, vectors, docs


def fresh_index_equal(root: Path, scratch: Path, env: dict[str, str]) -> str:
    """'' when the daemon's index equals a fresh index of the final tree; else why not."""
    shutil.copytree(root, scratch, ignore=shutil.ignore_patterns(".llmc"))
    out = llmc("index", str(scratch), "--quiet", env=env)
    if out.returncode != 0:
        return f"fresh index failed: {out.stderr[-500:]}"
    live, fresh = index_fingerprint(root), index_fingerprint(scratch)
    spans, vectors, docs = live
    if spans != fresh[0]:
        only_live = sorted(spans - fresh[0])[:3]
        only_fresh = sorted(fresh[0] - spans)[:3]
        return f"spans differ: only in the daemon's {only_live}, only in the fresh {only_fresh}"
    if vectors != len(spans) or docs != len(spans):
        return f"{len(spans)} spans, {vectors} vectors, {docs} lexical docs"
    return ""


# -- the run ------------------------------------------------------------------------------------
@dataclass
class LoadReport:
    outcomes: list[Outcome]
    wall_s: float
    changes: list[str]
    index_problem: str

    def problems(self) -> list[str]:
        out = [f"{o.kind}: {o.problem}" for o in self.outcomes if o.problem]
        out += [f"{o.kind}: 5xx ({o.status})" for o in self.outcomes if o.status >= 500]
        if self.index_problem:
            out.append(f"index: {self.index_problem}")
        return out

    def summary(self) -> dict:
        lat = [o.latency_s * 1000 for o in self.outcomes]
        slow = ("slow_loris", "trickle")  # slow on purpose: their time is the client's
        served = [o.latency_s * 1000 for o in self.outcomes if o.kind not in slow]
        by_kind: dict[str, dict] = {}
        for kind, _ in KINDS:
            ms = [o.latency_s * 1000 for o in self.outcomes if o.kind == kind]
            if ms:
                by_kind[kind] = {"n": len(ms), **_percentiles(ms)}
        statuses: dict[str, int] = {}
        for o in self.outcomes:
            statuses[str(o.status)] = statuses.get(str(o.status), 0) + 1
        return {
            "requests": len(self.outcomes),
            "wall_s": round(self.wall_s, 2),
            "throughput_rps": round(len(self.outcomes) / self.wall_s, 1) if self.wall_s else 0,
            "latency_ms": _percentiles(lat) if lat else {},
            "latency_ms_served": _percentiles(served) if served else {},
            "by_kind": by_kind,
            "statuses": statuses,
            "changes": len(self.changes),
            "problems": self.problems()[:20],
            "n_problems": len(self.problems()),
        }


def _percentiles(ms: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return {"p50": round(qs[49], 1), "p95": round(qs[94], 1), "p99": round(qs[98], 1)}


def run_load(
    root: Path,
    env: dict[str, str],
    n_clients: int,
    n_requests: int,
    n_changes: int,
    seed: int = 0,
    deadline_s: float = 1800.0,
) -> LoadReport:
    """Serve ``root`` with a daemon, load it while a writer changes files, check, stop."""
    initial = {str(p.relative_to(root)) for p in root.rglob("*.py")}
    initial |= {str(p.relative_to(root)) for p in root.rglob("*.md")}
    start_daemon(root, env)
    try:
        info = json.loads((root / ".llmc" / "daemon.json").read_text())
        st = _api(root, "status")
        tcp_port = int(st["endpoints"]["tcp"]["port"])
        sock_path = info.get("socket") or str(root / ".llmc" / "daemon.sock")
        modules = sorted(p for p in initial if p.endswith(".py"))
        n_kept = min(50, len(modules) // 2)
        kept, modules = modules[:n_kept], modules[n_kept:]  # the writer leaves ``kept`` alone
        symbols = [f"stable_helper_{Path(p).stem.split('_')[1]}" for p in kept]
        queries = [f"{a} {b} items" for a in WORDS[:6] for b in WORDS[6:10]] + symbols[:10]
        timeline = Timeline()
        target = Target(sock_path, tcp_port, symbols, queries, timeline, initial)
        stop = threading.Event()
        changes: list[str] = []
        pace = 0.05 if n_changes <= 50 else 0.1
        edit = threading.Thread(
            target=lambda: changes.extend(
                writer(root, modules, n_changes, timeline, seed, stop, pace)
            ),
            daemon=True,
        )
        began = time.monotonic()
        edit.start()
        outcomes = clients(target, n_clients, n_requests, seed, deadline_s)
        wall = time.monotonic() - began
        stop.set()
        edit.join(120)
        wait_settled(root)
    finally:
        stop_daemon(root, env)
    with tempfile.TemporaryDirectory(prefix="llmc-load-fresh-") as scratch:
        problem = fresh_index_equal(root, Path(scratch) / "repo", env)
    missing = n_requests - len(outcomes)
    if missing:
        outcomes.append(Outcome("dropped", -1, 0.0, f"{missing} requests never answered"))
    return LoadReport(outcomes, wall, changes, problem)


def machine() -> dict[str, str]:
    info = {"python": platform.python_version(), "cpus": str(os.cpu_count())}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "Flags"):
                info[key.strip()] = " ".join(value.split())
    except (OSError, subprocess.SubprocessError):
        info["Model name"] = platform.processor()
    flags = info.pop("Flags", "").split()
    info["simd"] = " ".join(f for f in flags if f.startswith(("avx", "amx", "sse4")))
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmc-load-") as tmp:
        root = make_repo(Path(tmp) / "repo", args.files)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "XDG_CONFIG_HOME": str(Path(tmp) / "xdg")}
        started = time.monotonic()
        report = run_load(root, env, args.clients, args.requests, args.changes, args.seed)
        result = {
            "machine": machine(),
            "args": vars(args) | {"out": str(args.out)},
            "total_s": round(time.monotonic() - started, 1),
            **report.summary(),
        }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if report.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
