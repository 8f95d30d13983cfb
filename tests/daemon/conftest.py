"""One real daemon per session, shared by the daemon tests.

It is started with the CLI in a subprocess (`llmc daemon start --tcp`) on a fixture git
repository, indexes it itself (index_on_start), and is always stopped at the end, with
SIGKILL as the last resort. Every wait in these tests is bounded.
"""

from __future__ import annotations

import pytest
from daemon_helpers import FILES, DaemonHandle, child_env, make_git_repo, start_daemon, stop_daemon


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
