"""No socket squatting: llmc never talks to a daemon socket another local user could own.

These tests run as root, so "another user" is uid 65534 (nobody): a directory or socket
made by the test and ``chown``-ed to it, a directory open to everyone (0777), a symlinked
directory, and a listener process that really runs as 65534. In each case the client
refuses with one line and sends nothing (the squatter's listener sees no connection or no
byte), and `llmc daemon start` / `llmc daemon run` refuse to serve there. The good cases
start real daemons (no index, no model: about a second each).
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from daemon_helpers import llmc, make_git_repo, stop_daemon

from llmc.cli import main
from llmc.daemon.client import health, request, try_daemon
from llmc.daemon.pidfile import lock_held, private_socket_dir, socket_path
from llmc.errors import UnsafeSocketError

NOBODY = 65534
# The daemon's settings are the user's (a repository's llmc.toml may not set them).
QUIET = {"LLMC_DAEMON__INDEX_ON_START": "0", "LLMC_DAEMON__WATCH": "0"}


@pytest.fixture
def daemon_env(daemon_env):
    """The shared daemon environment with watching and the start-up index off."""
    return {**daemon_env, **QUIET}


REFUSAL = "refusing to use the daemon socket"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="simulating another user needs root")


def _repo(path: Path) -> Path:
    root = make_git_repo(path, {"a.py": "def a():\n    return 1\n"})
    return root


@pytest.fixture
def runtime(tmp_path, monkeypatch) -> Path:
    """A private XDG_RUNTIME_DIR for this test, for this process and its children."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


@pytest.fixture
def long_repo(tmp_path) -> Path:
    """A repository whose `.llmc/daemon.sock` is too long: its socket is in the runtime dir."""
    root = _repo(tmp_path / ("d" * 60) / ("e" * 60))
    assert socket_path(root).parent == private_socket_dir()
    return root


@pytest.fixture
def env(daemon_env, runtime) -> dict[str, str]:
    return {**daemon_env, "XDG_RUNTIME_DIR": str(runtime)}


def _listen(path: Path) -> socket.socket:
    """A squatter's listening socket at ``path``."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    srv.setblocking(False)
    return srv


def _nothing_reached(srv: socket.socket) -> bool:
    """True when no client connected to the squatter (so no byte can have been sent)."""
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def _assert_refused(root: Path, srv: socket.socket, caplog) -> None:
    with pytest.raises(UnsafeSocketError) as err:
        request(root, "search", {"query": "secret plans"})
    message = str(err.value)
    assert message.startswith(REFUSAL) and "\n" not in message
    assert health(root) is None
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="llmc"):
        assert try_daemon(root, "search", {"query": "secret plans"}) is None
        assert try_daemon(root, "search", {"query": "more secret plans"}) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(REFUSAL)
    assert _nothing_reached(srv)


def _squat_owner(d: Path) -> None:
    d.mkdir(mode=0o700)
    os.chown(d, NOBODY, NOBODY)


def _squat_mode(d: Path) -> None:
    d.mkdir()
    d.chmod(0o777)


def _squat_symlink(d: Path) -> None:
    target = d.parent / "elsewhere"
    target.mkdir(mode=0o700)
    d.symlink_to(target, target_is_directory=True)


SQUATS = {
    "owned by another user": (_squat_owner, "owned by uid 65534"),
    "open to everyone": (_squat_mode, "mode 0777"),
    "a symlink": (_squat_symlink, "is a symlink"),
}


@pytest.fixture(params=sorted(SQUATS))
def squatted(request, runtime, long_repo) -> Iterator[tuple[Path, socket.socket, str]]:
    """``long_repo`` whose private socket directory was prepared by someone else."""
    make, why = SQUATS[request.param]
    make(runtime / "llmc")
    srv = _listen(socket_path(long_repo))
    try:
        yield long_repo, srv, why
    finally:
        srv.close()


def test_client_refuses_a_squatted_socket_directory(squatted, caplog):
    root, srv, why = squatted
    _assert_refused(root, srv, caplog)
    with pytest.raises(UnsafeSocketError, match=why):
        request(root, "health")


def test_daemon_refuses_to_serve_in_a_squatted_directory(squatted, env):
    root, srv, why = squatted
    out = CliRunner().invoke(main, ["daemon", "start", "--repo", str(root)])
    assert out.exit_code == 1
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and REFUSAL in lines[0] and why in lines[0], out.output
    # The server checks too, for whoever runs it directly.
    run = subprocess.run(
        [sys.executable, "-m", "llmc", "daemon", "run", "--repo", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode != 0 and REFUSAL in run.stderr and why in run.stderr, run.stderr
    assert not lock_held(root) and not (root / ".llmc" / "daemon.pid").exists()
    assert _nothing_reached(srv)


def test_socket_of_another_user_in_llmc_dir_is_refused(tmp_path, caplog):
    root = _repo(tmp_path / "repo")
    path = socket_path(root)
    path.parent.mkdir(exist_ok=True)
    srv = _listen(path)
    try:
        os.chown(path, NOBODY, NOBODY)
        _assert_refused(root, srv, caplog)
    finally:
        srv.close()


def test_symlinked_socket_is_refused(tmp_path, caplog):
    root = _repo(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere.sock"
    srv = _listen(elsewhere)
    try:
        socket_path(root).parent.mkdir(exist_ok=True)
        socket_path(root).symlink_to(elsewhere)
        _assert_refused(root, srv, caplog)
    finally:
        srv.close()


def _python_for(uid: int) -> str | None:
    """An interpreter that ``uid`` can run (the venv's may sit under root's home)."""
    for exe in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            ok = subprocess.run([exe, "-c", "pass"], user=uid, group=uid, timeout=60)
        except OSError:
            continue
        if ok.returncode == 0:
            return exe
    return None


LISTENER = """
import socket, sys
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(8)
print("ready", flush=True)
conn, _ = srv.accept()
got = b""
while chunk := conn.recv(65536):
    got += chunk
print(len(got), flush=True)
"""


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="peer credentials: Linux only")
def test_listener_running_as_another_user_is_refused_before_sending():
    """The socket file passes the checks (it was chown-ed back to us), the process does not."""
    exe = _python_for(NOBODY)
    if exe is None:
        pytest.skip("no Python interpreter that uid 65534 may run")
    base = Path(tempfile.mkdtemp(prefix="llmc-peer-"))
    try:
        base.chmod(0o755)
        root = _repo(base / "repo")
        root.chmod(0o755)
        state = root / ".llmc"
        state.mkdir(exist_ok=True)
        state.chmod(0o777)
        path = socket_path(root)
        child = subprocess.Popen(
            [exe, "-c", LISTENER, str(path)],
            user=NOBODY,
            group=NOBODY,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout.readline().strip() == "ready"
            os.chown(path, 0, 0)
            with pytest.raises(UnsafeSocketError, match="runs as uid 65534"):
                request(root, "search", {"query": "secret plans"})
            received, _ = child.communicate(timeout=120)
            assert received.strip() == "0"  # connected, then closed before one byte
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=60)
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False, timeout=60)


def test_daemon_in_the_private_directory_answers(long_repo, runtime, env):
    try:
        llmc("daemon", "start", "--repo", str(long_repo), env=env)
        sock = socket_path(long_repo)
        d = os.lstat(sock.parent)
        assert sock.parent == runtime / "llmc" and stat.S_ISDIR(d.st_mode)
        assert d.st_uid == os.geteuid() and stat.S_IMODE(d.st_mode) == 0o700
        assert os.lstat(sock).st_uid == os.geteuid()
        assert health(long_repo)["ok"]
        assert request(long_repo, "status")["pid"] > 0
    finally:
        stop_daemon(long_repo, env)
    assert not socket_path(long_repo).exists()


def test_daemon_in_llmc_dir_answers(tmp_path, daemon_env):
    root = _repo(tmp_path / "repo")
    try:
        llmc("daemon", "start", "--repo", str(root), env=daemon_env)
        assert socket_path(root) == root / ".llmc" / "daemon.sock"
        assert health(root)["ok"]
    finally:
        stop_daemon(root, daemon_env)


CONNECTOR = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
try:
    s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\n\\r\\nhi")
    got = s.recv(65536)
except OSError:
    got = b""
print(len(got), flush=True)
"""


@pytest.mark.skipif(not hasattr(socket, "SO_PEERCRED"), reason="peer credentials: Linux only")
def test_daemon_drops_a_connection_from_another_uid(serve):
    """The server side of the same check: a process of another uid that reaches the socket
    (here it is opened to everyone on purpose) is dropped before a byte is read or written;
    our own connections are served."""
    from daemon_helpers import SEEN

    exe = _python_for(NOBODY)
    if exe is None:
        pytest.skip("no Python interpreter that uid 65534 may run")
    base = Path(tempfile.mkdtemp(prefix="llmc-peer-"))
    try:
        base.chmod(0o755)
        path, _ = serve(deadline_s=60.0, directory=base)
        path.chmod(0o777)
        out = subprocess.run(
            [exe, "-c", CONNECTOR, str(path)], user=NOBODY, group=NOBODY, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "0"  # connected, then dropped: no answer
        assert SEEN == []  # and the app never saw its request
        mine = subprocess.run(
            [sys.executable, "-c", CONNECTOR, str(path)], capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert int(mine.stdout.strip()) > 0 and SEEN == [b"hi"]
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False, timeout=60)
