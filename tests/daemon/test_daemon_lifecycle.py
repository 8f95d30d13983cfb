"""Daemon processes: start/status/stop, SIGKILL leftovers cleaned on the next start, one
daemon per repository even when two starts race, sockets on over-long paths.

These repositories have no index and set ``index_on_start = false``, so their daemons
load no model: each start costs about a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_helpers import llmc, make_git_repo, stop_daemon
from waiting import returns, wait_for

from llmc.daemon.client import health, try_daemon
from llmc.daemon.pidfile import lock_held, socket_path

# The daemon's settings are the user's (a repository's llmc.toml may not set them).
QUIET = {"LLMC_DAEMON__INDEX_ON_START": "0", "LLMC_DAEMON__WATCH": "0"}


@pytest.fixture
def daemon_env(daemon_env):
    """The shared daemon environment with watching and the start-up index off."""
    return {**daemon_env, **QUIET}


@pytest.fixture
def repo(tmp_path, daemon_env):
    root = make_git_repo(tmp_path / "repo", {"a.py": "def a():\n    return 1\n"})
    yield root
    stop_daemon(root, daemon_env)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); ask /proc where there is one.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def test_start_status_stop(repo, daemon_env):
    out = llmc("daemon", "start", "--repo", str(repo), env=daemon_env)
    assert "started" in out.stdout
    pid = int((repo / ".llmc" / "daemon.pid").read_text())
    st = llmc("daemon", "status", "--repo", str(repo), "--json", env=daemon_env)
    data = json.loads(st.stdout)
    assert data["running"] and data["pid"] == pid and data["uptime_s"] >= 0
    assert data["watcher"] == {"enabled": False}
    human = llmc("daemon", "status", "--repo", str(repo), env=daemon_env).stdout
    assert f"pid {pid}" in human and "queue: idle" in human
    again = llmc("daemon", "start", "--repo", str(repo), env=daemon_env)
    assert "already running" in again.stdout and str(pid) in again.stdout
    stopped = llmc("daemon", "stop", "--repo", str(repo), env=daemon_env)
    assert f"pid {pid}" in stopped.stdout
    wait_for(lambda: not _alive(pid), 10, "the daemon to exit")
    for name in ("daemon.pid", "daemon.sock", "daemon.json"):
        assert not (repo / ".llmc" / name).exists()
    st = llmc("daemon", "status", "--repo", str(repo), env=daemon_env, check=False)
    assert st.returncode == 3 and "no daemon running" in st.stdout
    assert "no daemon running" in llmc("daemon", "stop", "--repo", str(repo), env=daemon_env).stdout
    logs = llmc("daemon", "logs", "--repo", str(repo), "-n", "5", env=daemon_env).stdout
    assert "stopped" in logs


def test_sigkill_leaves_stale_files_that_the_next_start_cleans(repo, daemon_env):
    llmc("daemon", "start", "--repo", str(repo), env=daemon_env)
    pid = int((repo / ".llmc" / "daemon.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not lock_held(repo), 10, "the kernel to drop the daemon lock")
    assert (repo / ".llmc" / "daemon.pid").exists() and socket_path(repo).exists()
    # Refused, not a wait for the connect timeout (an hour here: a wait would hang).
    ask = lambda: try_daemon(repo, "search", {"query": "a"}, connect_timeout=3600)  # noqa: E731
    assert returns(ask, "try_daemon on a killed daemon's socket") is None
    st = llmc("daemon", "status", "--repo", str(repo), "--json", env=daemon_env, check=False)
    data = json.loads(st.stdout)
    assert st.returncode == 3 and not data["running"] and data["stale"]["pid"] == pid
    out = llmc("daemon", "start", "--repo", str(repo), env=daemon_env)
    assert "removed stale" in out.stderr and "started" in out.stdout
    new_pid = int((repo / ".llmc" / "daemon.pid").read_text())
    assert new_pid != pid and health(repo)["pid"] == new_pid


def test_two_racing_starts_make_one_daemon(repo, daemon_env):
    cmd = [sys.executable, "-m", "llmc", "daemon", "start", "--repo", str(repo), "--json"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=daemon_env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    results = [json.loads(o[0]) for o in outs]
    assert results[0]["pid"] == results[1]["pid"]
    assert sorted(r["already_running"] for r in results) in ([False, True], [True, True])


def test_direct_run_refuses_a_second_daemon(repo, daemon_env):
    llmc("daemon", "start", "--repo", str(repo), env=daemon_env)
    second = llmc("daemon", "run", "--repo", str(repo), env=daemon_env, check=False, timeout=60)
    assert second.returncode == 1 and "already runs" in second.stderr
    assert health(repo) is not None  # the first one's files were left alone


def test_overlong_repository_path_gets_a_short_socket(tmp_path, daemon_env):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    root = make_git_repo(deep, {"a.py": "def a():\n    return 1\n"})
    try:
        llmc("daemon", "start", "--repo", str(root), env=daemon_env)
        sock = socket_path(root)
        assert not str(sock).startswith(str(root)) and sock.exists()
        assert health(root)["ok"]
    finally:
        stop_daemon(root, daemon_env)
    assert not socket_path(root).exists()
