"""`llmc daemon start|stop|status|logs`: manage the daemon process of one repository.

``start`` spawns `python -m llmc daemon run` in a new session (detached from the
terminal, output appended to ``.llmc/daemon.log``) and returns once the socket answers.
``stop`` sends SIGTERM to the pid in the pid file, but only while the daemon lock is held
(so a recycled pid is never signalled), waits for the lock to drop, then SIGKILLs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.daemon import client
from llmc.daemon.pidfile import (
    lock_held,
    log_path,
    prepare_socket_dir,
    read_pid,
    remove_runtime_files,
    socket_path,
    stale_files,
)
from llmc.errors import LlmcError
from llmc.paths import ensure_state_dir, open_state_file, state_dir

log = logging.getLogger(__name__)

LOG_ROTATE_BYTES = 5 * 1024 * 1024
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class StartResult:
    pid: int | None
    socket: str
    already_running: bool
    cleaned: tuple[str, ...] = ()
    seconds: float = 0.0


def _child_env() -> dict[str, str]:
    # A hook may start us with git's variables set; they would point git at the wrong index.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _rotate(log: Path) -> None:
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024 * max(1, lines // 100 + 1)))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return data.splitlines()[-lines:] if lines > 0 else []


def python_m() -> list[str]:
    """``python -m`` that never imports from the current directory (the repository's own
    ``llmc/``, say): ``-P`` on 3.11+, and the child runs in ``.llmc/`` before that."""
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m"]


def start(root: Path, cfg: Config, args: Sequence[str] = ()) -> StartResult:
    """Start the daemon for ``root`` unless one runs; return once its socket answers."""
    started = time.monotonic()
    root = Path(root).resolve()
    prepare_socket_dir(socket_path(root))  # refuse in one line, before spawning anything
    if lock_held(root):
        info = client.health(root, timeout=2.0)
        return StartResult(info["pid"] if info else read_pid(root), str(socket_path(root)), True)
    stale = stale_files(root)
    cleaned = tuple(remove_runtime_files(root)) if stale else ()
    ensure_state_dir(root)
    log = log_path(root)
    _rotate(log)
    try:
        fd = open_state_file(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as e:
        raise LlmcError(
            f"cannot write the daemon's log {log} ({e.strerror or e}): llmc keeps its index "
            f"and daemon state in {state_dir(root)}, which must be writable"
        ) from None
    with os.fdopen(fd, "ab") as out:  # the log quotes file names and queries: private
        proc = subprocess.Popen(
            [*python_m(), "llmc", "daemon", "run", "--repo", str(root), *args],
            cwd=state_dir(root),  # never imports a `llmc/` of the repository (python_m)
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
            env=_child_env(),
        )
    deadline = time.monotonic() + cfg.daemon.start_timeout_s
    while time.monotonic() < deadline:
        info = client.health(root, timeout=0.5)
        if info is not None:
            return StartResult(
                info["pid"], str(socket_path(root)), info["pid"] != proc.pid, cleaned,
                time.monotonic() - started,
            )  # fmt: skip
        code = proc.poll()
        if code is not None:
            if lock_held(root):  # lost a race with another `start`: that one is ours now
                time.sleep(0.1)
                continue
            tail = _tail(log, 15)
            said = [line[len("Error: ") :] for line in tail if line.startswith("Error: ")]
            if said:  # the CLI's own one-line error (a busy port, a bad .llmc...)
                raise LlmcError(f"the daemon could not start: {said[-1]} (see {log})")
            tail_text = "\n".join(tail)
            raise LlmcError(
                f"the daemon exited with status {code} at start; {log} says:\n{tail_text}"
            )
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise LlmcError(
        f"the daemon did not answer within {cfg.daemon.start_timeout_s:g}s "
        f"(daemon.start_timeout_s); see {log}"
    )


@dataclass(frozen=True)
class StopResult:
    pid: int | None
    was_running: bool
    killed: bool = False
    cleaned: tuple[str, ...] = ()


def stop(root: Path, timeout: float = STOP_TIMEOUT_S) -> StopResult:
    """Stop the daemon of ``root`` (SIGTERM, then SIGKILL after ``timeout``)."""
    root = Path(root).resolve()
    if not lock_held(root):
        cleaned = tuple(remove_runtime_files(root)) if stale_files(root) else ()
        return StopResult(read_pid(root), False, cleaned=cleaned)
    pid = read_pid(root)
    if pid is None:
        info = client.health(root, timeout=2.0)
        pid = info["pid"] if info else None
    if pid is None:
        raise LlmcError(f"a daemon holds {root}/.llmc/daemon.lock but its pid is unknown")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_unlocked(root, timeout):
        return StopResult(pid, True)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_unlocked(root, 5.0)
    return StopResult(pid, True, killed=True, cleaned=tuple(remove_runtime_files(root)))


def _wait_unlocked(root: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not lock_held(root):
            return True
        time.sleep(0.05)
    return not lock_held(root)


def status(root: Path) -> dict[str, Any]:
    """The running daemon's /v1/status, or ``{"running": false, ...}``."""
    root = Path(root).resolve()
    if lock_held(root):
        try:
            out = client.request(root, "status", connect_timeout=2.0, timeout=10.0)
            return {"running": True, **out}
        except LlmcError as e:
            return {"running": True, "pid": read_pid(root), "error": str(e)}
    stale = stale_files(root)
    return {
        "running": False,
        "root": str(root),
        "stale": {"pid": stale.pid, "files": list(stale.files)} if stale else None,
    }


class DaemonLink:
    """How `llmc index` hands its new spans' vectors to this repository's daemon
    (``llmc.index.handoff``): a daemon runs when it holds its lock and its socket is there
    (``LLMC_NO_DAEMON=1``: never); it takes the job when it accepts a vectors-only reindex
    (``engine.VECTORS_REASON`` with no paths)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()

    def running(self) -> bool:
        if client.daemon_disabled():
            return False
        try:
            if not socket_path(self.root).exists():
                return False
        except LlmcError:
            return False
        return lock_held(self.root)

    def embed(self) -> bool:
        from llmc.daemon.reindex import VECTORS_REASON

        if not self.running():
            return False
        try:
            client.request(
                self.root, "reindex", {"reason": VECTORS_REASON, "paths": []},
                connect_timeout=1.0, timeout=10.0,
            )  # fmt: skip
        except LlmcError as e:
            log.info("the daemon did not take the vectors (%s): embedding in the background", e)
            return False
        return True


def logs(root: Path, lines: int = 50, follow: bool = False) -> Iterator[str]:
    """The last ``lines`` lines of ``.llmc/daemon.log``; with ``follow``, then new ones."""
    path = log_path(Path(root).resolve())
    yield from _tail(path, lines)
    if not follow:
        return
    pos = path.stat().st_size if path.exists() else 0
    buf = b""
    while True:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        if size < pos:
            pos = 0  # rotated
        if size > pos:
            with open(path, "rb") as f:
                f.seek(pos)
                buf += f.read()
                pos = f.tell()
            *complete, buf = buf.split(b"\n")
            for line in complete:
                yield line.decode("utf-8", "replace")
        else:
            time.sleep(0.2)


def _ago(ts: float | None) -> str:
    from llmc.index.status import age

    return age(ts)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def status_lines(st: dict[str, Any]) -> list[str]:
    """`llmc daemon status` for people."""
    if not st.get("running"):
        lines = [f"no daemon running for {st.get('root')}"]
        if st.get("stale"):
            lines.append(
                f"  stale files of a dead daemon (pid {st['stale']['pid']}) will be removed "
                "on the next start: " + ", ".join(st["stale"]["files"])
            )
        return lines
    if "error" in st:
        return [f"daemon pid {st.get('pid')} holds the lock but does not answer: {st['error']}"]
    ep = st.get("endpoints", {})
    lines = [f"daemon running for {st['root']} (pid {st['pid']}, up {_duration(st['uptime_s'])})"]
    tcp = ep.get("tcp")
    lines.append(
        f"  socket: {ep.get('socket')}"
        + (f"; tcp: 127.0.0.1:{tcp['port']} (token in {tcp['token_file']})" if tcp else "")
    )
    idx = st.get("index", {})
    if idx.get("exists"):
        lines.append(
            f"  index: generation {idx.get('generation')}, {idx.get('files')} files, "
            f"{idx.get('spans')} spans, indexed {_ago(idx.get('indexed_at'))}"
        )
    else:
        lines.append("  index: none yet")
    q = st.get("queue") or {}
    running, pending, last = q.get("running"), q.get("pending"), q.get("last")
    state = "idle"
    if running:
        pr = running.get("progress", {})
        total = f"/{pr['total']}" if pr.get("total") else ""
        state = f"reindex #{running['id']} running ({pr.get('phase')} {pr.get('done')}{total})"
    if pending:
        state += f", 1 run pending ({pending['paths']} paths)"
    lines.append(f"  queue: {state}")
    if last:
        s = last.get("summary") or {}
        what = (
            f"failed: {last['error']}"
            if last.get("error")
            else f"{s.get('files_indexed')} indexed, {s.get('files_removed')} removed "
            f"in {s.get('seconds')}s"
        )
        lines.append(f"  last reindex: #{last['id']} {_ago(last.get('finished_at'))}: {what}")
    w = st.get("watcher") or {}
    lines.append(
        f"  watcher: {w.get('events', 0)} events, {w.get('batches', 0)} batches"
        if w.get("enabled")
        else "  watcher: off"
    )
    models = st.get("models") or {}
    if models:
        for cat, m in sorted(models.items()):
            lines.append(f"  model {cat}: {m['model']} on {m['device']}")
    else:
        lines.append("  models: " + ("not loaded" if st.get("ready") else "loading"))
    if st.get("warm_error"):
        lines.append(f"  warm-up failed: {st['warm_error']}")
    mem = st.get("memory") or {}
    if mem.get("rss_bytes"):
        lines.append(f"  memory: {mem['rss_bytes'] / 2**20:.0f} MiB resident")
    r = st.get("requests") or {}
    lines.append(f"  requests: {r.get('served', 0)} served, {r.get('errors', 0)} errors")
    return lines


__all__ = [
    "DaemonLink",
    "StartResult",
    "StopResult",
    "logs",
    "start",
    "status",
    "status_lines",
    "stop",
]
