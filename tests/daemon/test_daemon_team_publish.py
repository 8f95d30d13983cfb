"""`team.publish` in the daemon: a real daemon indexes a repository, publishes it to a real
PostgreSQL + pgvector once its vectors are in, and publishes again after an edit."""

from __future__ import annotations

import time

import psycopg
from daemon_helpers import FILES, child_env, make_git_repo, start_daemon, stop_daemon


def _generation(team_url: str) -> int:
    with psycopg.connect(team_url) as conn:
        exists = conn.execute("SELECT to_regclass('llmc.repos')").fetchone()[0]
        if exists is None:
            return 0
        row = conn.execute("SELECT generation FROM llmc.repos WHERE name = 'app'").fetchone()
    return row[0] if row else 0


def _wait_generation(team_url: str, want: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _generation(team_url) >= want:
            return
        time.sleep(0.2)
    raise AssertionError(f"the daemon never published version {want}")


def test_the_daemon_publishes_after_reindexing(tmp_path, team_url):
    root = make_git_repo(tmp_path / "app", FILES)
    xdg = tmp_path / "xdg"
    (xdg / "llmc").mkdir(parents=True)
    (xdg / "llmc" / "config.toml").write_text(
        f'[team]\nurl = "{team_url}"\nrepo = "app"\npublish = true\n'
    )
    env = child_env(xdg)
    try:
        daemon = start_daemon(root, env)
        _wait_generation(team_url, 1)
        (root / "app" / "store.py").write_text('def open_store(path):\n    return "moved"\n')
        daemon.wait_idle()
        _wait_generation(team_url, 2)
    finally:
        stop_daemon(root, env)
    with psycopg.connect(team_url) as conn:
        shard = conn.execute("SELECT shard FROM llmc.repos WHERE name = 'app'").fetchone()[0]
        text = conn.execute(f"SELECT text FROM {shard}.spans WHERE path = 'app/store.py'")
        assert any("moved" in t for (t,) in text.fetchall())
