"""Helpers for the daemon tests: fixture repositories, the CLI in a subprocess, raw HTTP
on the socket, bounded waits, and starting/stopping real daemons."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from waiting import wait_for

READY_TIMEOUT_S = 180.0  # model loading on a busy 2-core CI machine
FILES: dict[str, str] = {
    "app/store.py": '''"""Persistence for the sample app."""

import sqlite3

DEFAULT_PATH = "app.db"


class SessionStore:
    """Keeps user sessions in SQLite."""

    def __init__(self, path=DEFAULT_PATH):
        self.conn = sqlite3.connect(path)

    def save_session(self, user_id, token):
        """Persist a session token for a user."""
        self.conn.execute("INSERT INTO sessions VALUES (?, ?)", (user_id, token))


def open_store(path):
    """Open the session store at path."""
    return SessionStore(path)
''',
    "app/server.js": """// HTTP server for the sample app
const http = require('http');

class Router {
  constructor() { this.routes = {}; }
  addRoute(path, handler) { this.routes[path] = handler; }
}

function startServer(port) {
  return http.createServer().listen(port);
}

module.exports = { Router, startServer };
""",
    "docs/guide.md": """# Guide

Welcome to the sample app.

## Installation

Install with pip and run the server.

## Sessions

Sessions are stored in SQLite; set the path with `DEFAULT_PATH`.
""",
    "README.txt": "Sample app.\n\nIt stores sessions and routes requests.\n",
    ".gitignore": "build/\n*.log\n",
}


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=check, timeout=60
    )


def make_git_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "fixture")
    return root


def child_env(xdg: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMC_", "GIT_"))}
    env.update(
        XDG_CONFIG_HOME=str(xdg), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra
    )
    return env


def llmc(
    *args: str, env: dict[str, str], timeout: float = 240, check: bool = True
) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "llmc", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"llmc {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out


def raw_http(sock_path: Path | str, data: bytes, timeout: float = 10.0) -> tuple[int, dict]:
    """Send raw bytes on the Unix socket; return (status, JSON body)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock_path))
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                None,
            )
            if length is not None and len(body) >= length:
                break
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body else {}


class DaemonHandle:
    """A running daemon: its repository, environment and API helpers."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root = root
        self.env = env
        self.sock = root / ".llmc" / "daemon.sock"

    def call(self, endpoint: str, payload: dict | None = None, method: str | None = None):
        from llmc.daemon.client import request

        return request(self.root, endpoint, payload, method=method, timeout=120)

    def status(self) -> dict:
        return self.call("status")

    def idle(self) -> bool:
        st = self.status()
        q = st["queue"]
        # A daemon started with --no-watch reports no watcher counters.
        watcher = st.get("watcher") or {}
        return not q["pending"] and not q["running"] and not watcher.get("pending_paths")

    def wait_idle(self, timeout: float = 120.0, settle: float = 0.6) -> None:
        """Idle twice, ``settle`` apart (a late watcher event may still be in debounce)."""

        def quiet() -> bool:
            if not self.idle():
                return False
            time.sleep(settle)
            return self.idle()

        wait_for(quiet, timeout, "the daemon to be idle", interval=0.1)

    def search(self, query: str, **kw: Any) -> dict:
        return self.call("search", {"query": query, **kw})

    def pid(self) -> int:
        return int((self.root / ".llmc" / "daemon.pid").read_text().split()[0])


def stop_daemon(root: Path, env: dict[str, str]) -> None:
    """Stop via the CLI; SIGKILL if that fails. Never raises."""
    pid_file = root / ".llmc" / "daemon.pid"
    pid = None
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().split()[0])
    with contextlib.suppress(Exception):
        llmc("daemon", "stop", "--repo", str(root), env=env, timeout=60, check=False)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def start_daemon(root: Path, env: dict[str, str], *args: str) -> DaemonHandle:
    llmc("daemon", "start", "--repo", str(root), *args, env=env, timeout=120)
    handle = DaemonHandle(root, env)

    def ready() -> bool:
        st = handle.status()
        return st["ready"] and st["index"].get("exists") and handle.idle()

    wait_for(ready, READY_TIMEOUT_S, "the daemon to index and load its models", interval=0.2)
    return handle


# -- the daemon's connection protocol on a bare uvicorn (no daemon, no models) ----------------
async def echo_app(scope, receive, send) -> None:
    """A tiny ASGI app: answers with the body it read (or says it saw a disconnect)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            SEEN.append("disconnect")
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    SEEN.append(body)
    data = json.dumps({"echo": body.decode()}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


SEEN: list = []
