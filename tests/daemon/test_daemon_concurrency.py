"""Daemon (watcher) + git hook + a manual `llmc index`, all at once, while files keep
changing: one writer at a time, no corruption, and the final index matches the disk."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from daemon_helpers import git, llmc, wait_for

from llmc.config import load_config
from llmc.index.status import index_status
from llmc.paths import db_path, lexical_path
from llmc.store.db import Store
from llmc.types import text_hash

N_FILES = 6


def _source(i: int, version: int) -> str:
    return f'def conc_{i}_v{version}(x):\n    """Version {version} of file {i}."""\n    return x\n'


def test_daemon_hook_and_manual_index_at_once(shared_daemon, daemon_env):
    root = shared_daemon.root
    shared_daemon.wait_idle()
    llmc("hooks", "install", "--repo", str(root), env=daemon_env)
    files = [root / "conc" / f"c{i}.py" for i in range(N_FILES)]
    files[0].parent.mkdir(exist_ok=True)
    final: dict[int, int] = {}

    def write(version: int) -> None:
        for i, f in enumerate(files):
            f.write_text(_source(i, version), encoding="utf-8")
            final[i] = version

    try:
        write(0)
        manual = subprocess.Popen(
            [sys.executable, "-m", "llmc", "index", str(root), "-q"],
            env=daemon_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        commit = threading.Thread(
            target=lambda: (git(root, "add", "-A"), git(root, "commit", "-q", "-m", "conc v0"))
        )
        commit.start()
        # Keep editing while the manual run loads its model and waits for / holds the lock.
        version = 1
        deadline = time.monotonic() + 120
        while manual.poll() is None and time.monotonic() < deadline:
            write(version)
            version += 1
            time.sleep(0.25)
        commit.join(60)
        _, err = manual.communicate(timeout=120)
        assert manual.returncode == 0, err.decode()
        write(version)  # the last word, committed so the hook fires again
        git(root, "commit", "-q", "-am", "conc final")
        shared_daemon.wait_idle(timeout=120, settle=1.0)

        # One consistent store...
        store = Store(db_path(root), readonly=True)
        try:
            assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            known = store.files()
            for i, f in enumerate(files):
                rel = f"conc/c{i}.py"
                assert known[rel].content_hash == text_hash(f.read_text(encoding="utf-8"))
                symbols = {s.span.symbol for s in store.spans_for_path(rel)}
                assert f"conc_{i}_v{final[i]}" in symbols, (rel, symbols)
                assert not any(s.startswith(f"conc_{i}_v") and s != f"conc_{i}_v{final[i]}"
                               for s in symbols), symbols  # fmt: skip
            generation = store.generation
        finally:
            store.close()
        # ...whose derived index caught up, with nothing stale...
        assert int((lexical_path(root) / "generation").read_text()) == generation
        assert index_status(root, load_config(root)).fresh
        # ...and which the daemon serves.
        for i in range(N_FILES):
            hits = shared_daemon.search(f"conc_{i}_v{final[i]}", k=3)["results"]
            assert hits[0]["path"] == f"conc/c{i}.py"
        hook_log = (root / ".llmc" / "hooks.log").read_text()
        assert "post-commit: asked the daemon to reindex" in hook_log
        assert version > 1  # edits really overlapped the manual run
    finally:
        llmc("hooks", "uninstall", "--repo", str(root), env=daemon_env)
        for f in files:
            f.unlink(missing_ok=True)
        wait_for(lambda: not files[0].parent.exists() or not any(files[0].parent.iterdir()), 5,
                 "cleanup")  # fmt: skip
        shared_daemon.wait_idle()
