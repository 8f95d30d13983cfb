"""`llmc index --vectors later` beside a running daemon: the command returns once BM25 and
exact symbols answer, and the daemon (its model loaded) updates the graph and embeds the
new spans; nothing else embeds them."""

from __future__ import annotations

import json

from daemon_helpers import (
    FILES,
    READY_TIMEOUT_S,
    DaemonHandle,
    child_env,
    llmc,
    make_git_repo,
    stop_daemon,
)
from waiting import wait_for

NEW = '''

def settle_invoice_disputes(invoice, claims):
    """Resolve each customer claim against the invoice lines it names."""
    return [c for c in claims if c.line in invoice.lines]
'''


def test_the_daemon_takes_the_graph_and_the_vectors_an_index_run_hands_over(tmp_path_factory):
    root = make_git_repo(tmp_path_factory.mktemp("handoff") / "repo", FILES)
    env = child_env(tmp_path_factory.mktemp("xdg"))
    # No watcher: only the hand-off makes the daemon reindex
    llmc("daemon", "start", "--repo", str(root), "--no-tcp", "--no-watch", env=env, timeout=120)
    daemon = DaemonHandle(root, env)

    def idle() -> bool:
        st = daemon.status()
        q = st["queue"]
        return st["ready"] and st["index"].get("exists") and not q["pending"] and not q["running"]

    try:
        wait_for(idle, READY_TIMEOUT_S, "the daemon to index and warm up", interval=0.2)
        runs = daemon.status()["queue"]["runs"]
        with (root / "app/store.py").open("a") as f:
            f.write(NEW)
        out = json.loads(llmc("index", str(root), "--vectors", "later", "--json", env=env).stdout)
        assert out["files_indexed"] == 1 and out["embedded"] == 0
        assert out["backfill"] == "daemon"
        assert out["handoff"] == {"where": "daemon", "spans": out["vectors"]["missing"],
                                  "pid": None, "graph": True}  # fmt: skip
        assert not (root / ".llmc" / "backfill.log").exists()  # no background process
        wait_for(lambda: daemon.status()["queue"]["runs"] > runs and idle(), 240, "the run")
        st = daemon.status()
        assert st["queue"]["runs"] == runs + 1
        last = st["queue"]["last"]
        assert last["error"] is None and "index:vectors" in last["reasons"]
        assert last["summary"]["files_indexed"] == 0  # the run parsed nothing again
        status = json.loads(llmc("status", "--repo", str(root), "--json", env=env).stdout)
        assert status["vectors"]["complete"] and status["searchable"]["graph"] == "yes"
        assert status["fresh"]
        hits = daemon.search("settle invoice disputes against customer claims")["results"]
        assert hits[0]["symbol"] == "settle_invoice_disputes"
        assert any(s.startswith("dense") for s in hits[0]["sources"])
    finally:
        stop_daemon(root, env)
