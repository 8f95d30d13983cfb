"""A connection to the team store named in the user's config (``[team] url``).

The URL is the user's alone (a repository's ``llmc.toml`` cannot set it: llmc/repo_config.py)
and holds no password: the password comes from the environment variable ``team.password_env``
names, is handed to the driver and is never stored or printed. Every failure is one
``TeamError`` line that names the server without credentials: the server is down, refuses
the credentials, or lacks pgvector.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from llmc.config import TeamConfig
from llmc.errors import TeamError

CONNECT_TIMEOUT_S = 10


def shown_url(url: str) -> str:
    """``url`` fit to print: user and password left out (a socket path or host kept)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{host}{parts.path}{query}"


def check_url(url: str) -> None:
    """One clear line when ``url`` cannot be a team store's URL."""
    if not url.strip():
        raise TeamError("no team store configured: set [team] url in your user config")
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise TeamError(f"team.url must be a postgresql:// URL, got {shown_url(url)!r}")
    if parts.password:
        raise TeamError(
            "team.url holds a password: take it out and put it in the environment variable "
            "team.password_env names (LLMC_TEAM_PASSWORD by default)"
        )


def connect(team: TeamConfig, autocommit: bool = False, search: bool = False) -> Any:
    """A connection to the store; ``search``: to where searches read (``team.search_url``,
    a read replica, when set), where nothing is ever written."""
    url = (team.search_url or team.url) if search else team.url
    check_url(url)
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - a core dependency
        raise TeamError(f"the team store needs psycopg: {e}") from None
    password = os.environ.get(team.password_env) if team.password_env else None
    kwargs: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "autocommit": autocommit}
    if password:
        kwargs["password"] = password
    try:
        conn = psycopg.connect(url, **kwargs)
    except psycopg.OperationalError as e:
        raise TeamError(_why(team, url, str(e))) from None
    if search:  # reads only: a store with repositories in it has pgvector
        _vector_types(conn)
        return conn
    try:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        _vector_types(conn)
        if not autocommit:
            conn.commit()
    except psycopg.Error as e:
        conn.close()
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TeamError(f"the team store at {shown_url(url)} has no pgvector: {first}") from None
    return conn


def _vector_types(conn: Any) -> None:
    """Vectors to and from numpy arrays in pgvector's binary form (pgvector-python's
    adapters); nothing on a database without the extension (nothing published yet)."""
    import psycopg
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        pass


def _why(team: TeamConfig, url: str, message: str) -> str:
    """One line for a failed connection, without anything the message may echo back."""
    where = shown_url(url)
    low = message.lower()
    if "password" in low or "authentication" in low or "role" in low:
        source = f"${team.password_env}" if team.password_env else "no password"
        return f"the team store at {where} refused the credentials (password from {source})"
    if "does not exist" in low and "database" in low:
        return f"the team store at {where}: no such database"
    return f"cannot reach the team store at {where}: the server is down or unreachable"


__all__ = ["check_url", "connect", "shown_url"]
