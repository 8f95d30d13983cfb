"""One real daemon per session, shared by the daemon tests.

It is started with the CLI in a subprocess (`llmc daemon start --tcp`) on a fixture git
repository, indexes it itself (index_on_start), and is always stopped at the end, with
SIGKILL as the last resort. Every wait in these tests is bounded.
"""

from __future__ import annotations

import threading

import pytest
from daemon_helpers import (
    FILES,
    SEEN,
    DaemonHandle,
    child_env,
    echo_app,
    make_git_repo,
    start_daemon,
    stop_daemon,
)
from waiting import wait_for

DEADLINE_S = 0.5


@pytest.fixture(scope="session")
def daemon_env(tmp_path_factory) -> dict[str, str]:
    return child_env(tmp_path_factory.mktemp("daemon-xdg"))


@pytest.fixture(scope="session")
def shared_daemon(tmp_path_factory, daemon_env) -> DaemonHandle:
    """A daemon with TCP on, over an indexed fixture repo; stopped at session end."""
    root = make_git_repo(tmp_path_factory.mktemp("dmn") / "repo", FILES)
    try:
        yield start_daemon(root, daemon_env, "--tcp")
    finally:
        stop_daemon(root, daemon_env)


@pytest.fixture
def serve(tmp_path):
    """``serve(deadline_s, max_connections)``: uvicorn with the daemon's protocol on a
    socket; returns (path, statuses the protocol answered itself)."""
    import uvicorn

    from llmc.daemon.protocol import make_protocol
    from llmc.daemon.server import bind_unix

    SEEN.clear()
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(deadline_s: float = DEADLINE_S, max_connections: int = 8, directory=None):
        statuses: list[int] = []
        path = (directory or tmp_path) / f"t{len(running)}.sock"
        sock = bind_unix(path)
        protocol = make_protocol(echo_app, deadline_s, max_connections, statuses.append)
        config = uvicorn.Config(
            echo_app, http=protocol, loop="asyncio", ws="none", lifespan="on", log_config=None,
            access_log=False, timeout_keep_alive=60, timeout_graceful_shutdown=1,
        )  # fmt: skip
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        running.append((server, thread))
        wait_for(lambda: server.started, 30, "the server to start")
        return path, statuses

    try:
        yield start
    finally:
        for server, thread in running:
            server.should_exit = True
            thread.join(30)


@pytest.fixture
def tiny_server(serve):
    return serve()
