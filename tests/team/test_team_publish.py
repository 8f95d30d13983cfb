"""`llmc team push|list` against a real PostgreSQL + pgvector: incremental publishing by
content hash (vectors sent as the local index holds them), all-or-nothing versions (a
publish killed before its switch leaves the previous version in place), and the faults a
user meets: the server down, wrong credentials, a store of another schema version, a
password in the URL, a repository's llmc.toml naming a server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from repo_fixtures import make_repo, user_config
from team_cli import run as _run

from llmc.cli import main

FILES = {
    "shop/cart.py": (
        "class Cart:\n"
        "    '''A shopping cart: items and their prices.'''\n\n"
        "    def total(self):\n"
        "        '''The sum of the prices of every item in the cart.'''\n"
        "        return sum(i.price for i in self.items)\n"
    ),
    "shop/discount.py": (
        "def apply_discount(total, code):\n"
        "    '''Take a discount code off the total.'''\n"
        "    return total * 0.9 if code else total\n"
    ),
    "docs/guide.md": "# Guide\n\nCarts hold items; `Cart.total` adds their prices.\n",
}


@pytest.fixture
def repo(tmp_path, team_url) -> Path:
    root = make_repo(tmp_path / "shop", FILES)
    user_config(f'[team]\nurl = "{team_url}"\nrepo = "shop"\n')
    assert CliRunner().invoke(main, ["index", str(root), "-q"]).exit_code == 0
    return root


def _current(team_url: str, repo: str = "shop") -> tuple[str, int]:
    with psycopg.connect(team_url) as conn:
        return conn.execute(
            "SELECT shard, generation FROM llmc.repos WHERE name = %s", (repo,)
        ).fetchone()


def _local_spans(root: Path) -> dict[int, tuple[str, str]]:
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(root), readonly=True)
    try:
        return {s.id: (s.span.path, s.span.text) for s in store.iter_spans()}
    finally:
        store.close()


def test_push_sends_everything_once_then_nothing(repo, team_url):
    first = _run(repo, "team", "push", "--json")
    spans = _local_spans(repo)
    assert first["files_changed"] == 3 and first["spans_sent"] == len(spans) > 3
    assert first["vectors_sent"] == len(spans) and first["generation"] == 1
    assert "@" not in first["store"] and first["commit"]
    again = _run(repo, "team", "push", "--json")
    assert (again["files_changed"], again["spans_sent"], again["vectors_sent"]) == (0, 0, 0)
    assert again["generation"] == 1
    shard, _ = _current(team_url)
    with psycopg.connect(team_url) as conn:
        rows = dict(conn.execute(f"SELECT id, text FROM {shard}.spans").fetchall())
        vectors = conn.execute(f"SELECT count(*) FROM {shard}.vec_code").fetchone()[0]
        vectors += conn.execute(f"SELECT count(*) FROM {shard}.vec_doc").fetchone()[0]
        hit = conn.execute(  # the built posting list of a symbol's term names its span
            f"SELECT s.path FROM {shard}.postings p JOIN (SELECT row_number() OVER (ORDER BY "
            f"id) - 1 AS n, path FROM {shard}.spans) s ON s.n = ANY(p.ids) "
            "WHERE p.term = 'apply_discount' AND p.field = 0"
        ).fetchall()
    assert rows == {i: text for i, (_, text) in spans.items()}  # span ids carry over
    assert vectors == len(spans)
    assert ("shop/discount.py",) in hit
    listed = _run(repo, "team", "list", "--json")["repos"]
    assert [(r["repo"], r["generation"], r["spans"]) for r in listed] == [("shop", 1, len(spans))]


def test_a_changed_file_is_all_that_is_sent(repo, team_url):
    _run(repo, "team", "push", "--json")
    old_shard, _ = _current(team_url)
    (repo / "shop" / "discount.py").write_text(
        "def apply_discount(total, code):\n    '''Take a coupon off the total.'''\n"
        "    return total * 0.8 if code else total\n"
    )
    (repo / "docs" / "guide.md").unlink()
    assert CliRunner().invoke(main, ["index", str(repo), "-q"]).exit_code == 0
    spans = _local_spans(repo)
    changed = [i for i, (path, _) in spans.items() if path == "shop/discount.py"]
    out = _run(repo, "team", "push", "--json")
    assert (out["files_changed"], out["files_removed"], out["generation"]) == (1, 1, 2)
    assert out["spans_sent"] == len(changed) == out["vectors_sent"]
    assert out["spans_kept"] == len(spans) - len(changed)
    shard, _ = _current(team_url)
    with psycopg.connect(team_url) as conn:
        texts = dict(conn.execute(f"SELECT id, text FROM {shard}.spans").fetchall())
        code = conn.execute(f"SELECT span_id, v FROM {shard}.vec_code ORDER BY span_id").fetchall()
        gone = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (old_shard,)
        ).fetchone()[0]
    assert texts == {i: text for i, (_, text) in spans.items()}
    assert gone == 0  # the previous version's shard is dropped after the switch
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(repo), readonly=True)
    try:
        local = store.vectors("code", [i for i, _ in code])
    finally:
        store.close()
    for span_id, text in code:  # the vectors the local index holds, not new ones
        sent = np.array(json.loads(text), dtype=np.float32)
        assert np.allclose(sent, local[span_id], atol=1e-6)


def test_a_publish_killed_before_its_switch_leaves_the_last_version(repo, team_url, tmp_path):
    _run(repo, "team", "push", "--json")
    shard, generation = _current(team_url)
    (repo / "shop" / "cart.py").write_text(FILES["shop/cart.py"] + "\n\ndef empty():\n    pass\n")
    assert CliRunner().invoke(main, ["index", str(repo), "-q"]).exit_code == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with psycopg.connect(team_url) as blocker:
        # the switch takes the repository's row FOR UPDATE: hold it off, kill the publisher
        blocker.execute("LOCK TABLE llmc.repos IN EXCLUSIVE MODE")
        child = subprocess.Popen(
            [sys.executable, "-m", "llmc", "team", "push", "--repo", str(repo)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            _wait_for_switch(team_url, child)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(30)
    assert _current(team_url) == (shard, generation)  # still the last version
    searched = _run(repo, "search", "--team", "empty cart", "--json")  # and it is searched
    assert searched["repos"][0]["generation"] == generation
    assert searched["results"] and "empty" not in {r["symbol"] for r in searched["results"]}
    with psycopg.connect(team_url) as conn:
        files = conn.execute(f"SELECT count(*) FROM {shard}.files").fetchone()[0]
    assert files == 3
    out = _run(repo, "team", "push", "--json")  # the next one drops the half-written shard
    assert (out["generation"], out["files_changed"]) == (generation + 1, 1)
    with psycopg.connect(team_url) as conn:
        shards = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'r_shop_%'")
        assert [r[0] for r in shards.fetchall()] == [_current(team_url)[0]]


def _wait_for_switch(team_url: str, child: subprocess.Popen) -> None:
    """Until the publisher waits on the row lock of its switch (its shard fully loaded)."""
    deadline = time.monotonic() + 120
    with psycopg.connect(team_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            assert child.poll() is None, child.stderr.read().decode()
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%FOR UPDATE%'"
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.05)
    raise AssertionError("the publish never reached its switch")


def test_a_store_of_another_schema_version_is_refused(repo, team_url):
    _run(repo, "team", "push", "--json")
    with psycopg.connect(team_url) as conn:
        conn.execute("UPDATE llmc.meta SET value = '99' WHERE key = 'schema_version'")
    before = _local_spans(repo)
    out = _run(repo, "team", "push", ok=False)
    assert "schema is version 99" in out and len(out.strip().splitlines()) == 1
    assert _local_spans(repo) == before  # nothing lost locally


def test_server_down_and_wrong_credentials_are_one_clear_line(repo, team_url, socket_dir, tmp_path):
    down = tmp_path / "nothing-here"
    down.mkdir()
    user_config(f'[team]\nurl = "postgresql://postgres@/x?host={down}"\n')
    out = _run(repo, "team", "push", ok=False)
    assert "cannot reach the team store" in out and len(out.strip().splitlines()) == 1
    with psycopg.connect(team_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE alice LOGIN PASSWORD 'right-horse-battery'")
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        original = hba.read_text()
        hba.write_text("local all alice scram-sha-256\n" + original)
        conn.execute("SELECT pg_reload_conf()")
    url = team_url.replace("postgresql://postgres:@", "postgresql://alice@")
    _wait_until_refused(url)  # the reload is a signal: the server applies it a moment later
    try:
        user_config(f'[team]\nurl = "{url}"\npassword_env = "SHOP_TEAM_PW"\n')
        os.environ["SHOP_TEAM_PW"] = "wrong-horse"
        out = _run(repo, "team", "push", ok=False)
        assert "refused the credentials (password from $SHOP_TEAM_PW)" in out
        assert "wrong-horse" not in out and "right-horse" not in out
        os.environ["SHOP_TEAM_PW"] = "right-horse-battery"
        with psycopg.connect(team_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # a superuser's job, once
            conn.execute("GRANT ALL ON SCHEMA public TO alice")
            database = team_url.split("?", 1)[0].rsplit("/", 1)[1]
            conn.execute(f"ALTER DATABASE {database} OWNER TO alice")
        assert _run(repo, "team", "push", "--json")["generation"] == 1
    finally:
        os.environ.pop("SHOP_TEAM_PW", None)
        hba.write_text(original)
        with psycopg.connect(team_url, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def _wait_until_refused(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            psycopg.connect(url, password="not-the-password", connect_timeout=5).close()
        except psycopg.OperationalError:
            return
        time.sleep(0.1)
    raise AssertionError("the server never applied the new pg_hba.conf")


def test_the_url_is_the_users_alone_and_holds_no_password(repo, tmp_path):
    user_config('[team]\nurl = "postgresql://bob:hunter2@db.example/llmc"\n')
    out = _run(repo, "team", "push", ok=False)
    assert "holds a password" in out and "hunter2" not in out
    user_config("")
    (repo / "llmc.toml").write_text('[team]\nurl = "postgresql://evil.example/steal"\n')
    out = _run(repo, "team", "push", ok=False)
    assert "no team store configured" in out  # a repository cannot point publishing anywhere


def test_a_git_hook_publishes_after_indexing_when_asked(repo, team_url):
    from llmc import hooks

    _run(repo, "team", "push", "--json")
    (repo / "shop" / "discount.py").write_text("def apply_discount(total):\n    return total\n")
    assert hooks.notify(repo, "post-commit") == "indexed"  # team.publish is off: not sent
    assert _current(team_url)[1] == 1
    user_config(f'[team]\nurl = "{team_url}"\nrepo = "shop"\npublish = true\n')
    (repo / "shop" / "discount.py").write_text("def apply_discount(total):\n    return 0\n")
    assert hooks.notify(repo, "post-commit") == "indexed"
    shard, generation = _current(team_url)
    assert generation == 2
    with psycopg.connect(team_url) as conn:
        text = conn.execute(
            f"SELECT text FROM {shard}.spans WHERE path = 'shop/discount.py'"
        ).fetchone()[0]
    assert "return 0" in text


def test_rm_takes_a_repository_out_of_the_store(repo, team_url):
    _run(repo, "team", "push", "--json")
    shard, _ = _current(team_url)
    assert _run(repo, "team", "rm", "shop", "--json") == {"repo": "shop", "removed": True}
    assert _run(repo, "team", "list", "--json") == {"repos": []}
    with psycopg.connect(team_url) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (shard,))
        assert left.fetchone()[0] == 0
    out = _run(repo, "team", "rm", "shop", ok=False)
    assert "no repository named 'shop'" in out
    assert _run(repo, "team", "push", "--json")["generation"] == 1  # published anew


def test_a_new_embedding_space_resends_every_vector_and_no_span(repo, team_url):
    _run(repo, "team", "push", "--json")
    with psycopg.connect(team_url) as conn:  # as if the store held another model's vectors
        conn.execute(
            "UPDATE llmc.repos SET spaces = jsonb_set(spaces, '{code,model}', '\"other\"')"
        )
    spans = _local_spans(repo)
    out = _run(repo, "team", "push", "--json")
    assert (out["files_changed"], out["spans_sent"], out["generation"]) == (0, 0, 2)
    assert out["spans_kept"] == len(spans) == out["vectors_sent"]
    shard, _ = _current(team_url)
    with psycopg.connect(team_url) as conn:
        n = conn.execute(f"SELECT count(*) FROM {shard}.vec_code").fetchone()[0]
        n += conn.execute(f"SELECT count(*) FROM {shard}.vec_doc").fetchone()[0]
    assert n == len(spans)


def test_vectors_come_when_the_index_has_them_and_half_embedded_runs_wait(tmp_path, team_url):
    root = make_repo(tmp_path / "plain", FILES)
    user_config(f'[team]\nurl = "{team_url}"\n')
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    first = _run(root, "team", "push", "--json")  # no embedding space yet: spans alone
    assert first["vectors_sent"] == 0 and first["spans_sent"] > 0
    assert CliRunner().invoke(main, ["index", str(root), "-q"]).exit_code == 0
    spans = _local_spans(root)
    second = _run(root, "team", "push", "--json")  # the space appeared: vectors, no span
    assert (second["spans_sent"], second["vectors_sent"]) == (0, len(spans))
    (root / "shop" / "cart.py").write_text(FILES["shop/cart.py"] + "\n\ndef empty():\n    pass\n")
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    out = _run(root, "team", "push", ok=False)  # some spans of the space lack their vector
    assert "have no vector yet" in out and len(out.strip().splitlines()) == 1
    assert _current(team_url, "plain")[1] == 2  # the store kept its last whole version
