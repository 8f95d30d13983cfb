"""Read scaling: a streaming replica of the team store answers team searches.

The store is published to the primary; ``[team] search_url`` points searches at a replica
(``pg_basebackup -R``, started by the suite); what a publish switches to reaches the
replica by streaming, and the replica never gets a write (it would refuse one).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
from click.testing import CliRunner
from repo_fixtures import make_repo, user_config

from llmc.cli import main

FILES = {
    "billing/invoice.py": (
        "def retry_invoice_webhook(event):\n"
        "    '''Retry the invoice webhook delivery with backoff.'''\n"
        "    return event\n"
    ),
}


def _cli(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, [*args, "--repo", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _caught_up(replica: str, generation: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with psycopg.connect(replica) as conn:
            row = (
                conn.execute("SELECT to_regclass('llmc.repos')").fetchone()[0]
                and conn.execute(
                    "SELECT generation FROM llmc.repos WHERE name = 'billing'"
                ).fetchone()
            )
        if row and row[0] >= generation:
            return
        time.sleep(0.1)
    raise AssertionError(f"the replica never reached version {generation}")


def test_a_replica_serves_team_searches(tmp_path, team_url, team_replica, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "billing", FILES)
    user_config(f'[team]\nurl = "{team_url}"\nsearch_url = "{team_replica}"\n')
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    pushed = _cli(root, "team", "push")
    _caught_up(team_replica, pushed["generation"])
    with psycopg.connect(team_replica) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]  # a real replica
    found = _cli(root, "search", "--team", "retry the invoice webhook")
    assert found["results"][0]["symbol"] == "retry_invoice_webhook"
    (root / "billing" / "invoice.py").write_text(
        "def void_invoice(invoice):\n    '''Void an unpaid invoice.'''\n    return invoice\n"
    )
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    pushed = _cli(root, "team", "push")
    _caught_up(team_replica, pushed["generation"])
    found = _cli(root, "search", "--team", "void an unpaid invoice")
    assert found["results"][0]["symbol"] == "void_invoice"
    assert found["repos"][0]["generation"] == 2
