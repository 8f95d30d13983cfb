"""The daemon's parts without a daemon: watcher batching and filtering, the reindex queue,
the shared-model embedder wrapper. Real watchdog and git; no models."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from daemon_helpers import git, make_git_repo, wait_for

from llmc.config import Config, load_config
from llmc.daemon.engine import LockedEmbedder, Reindexer
from llmc.daemon.watcher import PathFilter, Watcher, git_ignored

# A checkout of 1,000 files: each pause of git longer than the debounce may cut a batch.
# Twenty batches still means fifty files a reindex; a watcher without batching makes ~1,000.
MAX_CHECKOUT_BATCHES = 20


def _batched(batches: list[list[str]], path: str, since: int = 0) -> bool:
    return any(path in b for b in batches[since:])


def test_path_filter_uses_the_indexer_rules():
    cfg = Config()
    cfg.index.exclude = ["generated/**"]
    f = PathFilter(cfg)
    assert f("src/app.py") and f("docs/guide.md") and f("llmc.toml")
    assert not f("node_modules/x/index.js") and not f("pkg/__pycache__/m.pyc")
    assert not f(".git/HEAD") and not f(".llmc/index.db")
    assert not f(".env") and not f("keys/id_rsa") and not f("certs/server.pem")
    assert not f("src/.app.py.swp") and not f("src/app.py~") and not f("src/4913")
    assert not f("generated/out.py")
    assert f("src", is_dir=True) and not f("node_modules", is_dir=True)
    cfg.index.include = ["src/**"]
    assert PathFilter(cfg)("src/a.py") and not PathFilter(cfg)("docs/a.md")


def test_git_ignored(tmp_path):
    root = make_git_repo(tmp_path / "r", {".gitignore": "build/\n*.log\n", "a.py": "a = 1\n"})
    assert git_ignored(root, ["a.py", "build/x.py", "x.log", "new.py"]) == {"build/x.py", "x.log"}
    assert git_ignored(tmp_path, ["x.log"]) == set()  # not a repository: nothing known


def test_a_checkout_of_a_thousand_files_is_coalesced(tmp_path):
    """A checkout is a handful of reindex batches, not a storm of one per file; ignored
    paths make none. On a busy machine git may pause longer than the debounce mid-checkout,
    so the count is bounded (far fewer batches than files), not pinned to one."""
    root = make_git_repo(tmp_path / "r", {"README.md": "hi\n", ".gitignore": "*.log\n"})
    git(root, "checkout", "-q", "-b", "big")
    for i in range(1000):
        d = root / "pkg" / f"m{i % 20}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "big")
    git(root, "checkout", "-q", "main")
    batches: list[list[str]] = []
    w = Watcher(root, load_config(root), batches.append, debounce_s=0.3, max_delay_s=30)
    w.start()
    try:
        git(root, "checkout", "-q", "big")  # 1,000 files appear
        # Files created before their new directory's watch existed arrive as the directory
        # ("pkg"); the indexer's walk finds them all.
        wait_for(lambda: _batched(batches, "pkg"), 60, "the checkout's batch")
        # Each watched directory reports on its own thread, in order: once a file written
        # after the checkout is batched, every event of the checkout has been.
        (root / "pkg" / "m0" / "after.py").write_text("after = 1\n")
        wait_for(lambda: _batched(batches, "pkg/m0/after.py"), 60, "the file after the checkout")
        after_checkout = len(batches)
        assert 1 <= after_checkout <= MAX_CHECKOUT_BATCHES, [len(b) for b in batches]
        # Ignored paths cause no batch: a secret is filtered before batching, and a batch of
        # only git-ignored paths is dropped. Events arrive in order, so once the dropped
        # batch is counted, a leaked ``.env`` would already have made a batch of its own.
        (root / ".env").write_text("SECRET=1\n")
        (root / "debug.log").write_text("ignored by git\n")
        wait_for(lambda: w.to_json()["ignored_batches"] >= 1, 60, "the ignored batch")
        assert len(batches) == after_checkout and w.batches == after_checkout
        (root / "pkg" / "m0" / "after.py").unlink()
        git(root, "checkout", "-q", "main")  # they all go: a few more batches, naming pkg
        wait_for(lambda: _batched(batches, "pkg", after_checkout), 60, "the removal")
        (root / "after.py").write_text("after = 2\n")
        wait_for(lambda: _batched(batches, "after.py", after_checkout), 60, "a file after it")
        assert len(batches) - after_checkout <= MAX_CHECKOUT_BATCHES
        # A new top-level directory is watched too, and a rename of one is followed. (The
        # directory's own event is batched after its watch exists, so the reindex it causes
        # walks every file that came before the watch.)
        (root / "newtop").mkdir()
        wait_for(lambda: any("newtop" in b for b in batches), 30, "the new directory")
        (root / "newtop" / "x.py").write_text("x = 1\n")
        wait_for(lambda: any("newtop/x.py" in b for b in batches), 30, "a file in it")
        (root / "newtop").rename(root / "renamed")
        wait_for(lambda: any("renamed" in b for b in batches), 30, "the rename")
        (root / "renamed" / "y.py").write_text("y = 1\n")
        wait_for(lambda: any("renamed/y.py" in b for b in batches), 30, "a file in the renamed dir")
    finally:
        w.stop()


def test_reindex_requests_coalesce_into_one_pending_run():
    gate = threading.Event()
    started = threading.Event()
    runs: list[int] = []

    def run(progress):
        started.set()
        gate.wait(10)
        runs.append(1)
        return _Summary()

    r = Reindexer(run)
    try:
        first = r.request("a", ["x.py"])
        assert started.wait(5)
        jobs = [r.request("b", ["y.py"]), r.request("c", None), r.request("d", ["z.py"])]
        assert len({j.id for j in jobs}) == 1 and jobs[0].id != first.id
        assert r.to_json()["pending"]["reasons"] == ["b", "c", "d"]
        gate.set()
        assert jobs[0].done.wait(10) and r.wait_idle(10)
        assert len(runs) == 2 and jobs[0].all_paths and jobs[0].summary["files_indexed"] == 1
    finally:
        gate.set()
        r.stop()


def test_a_failing_run_is_reported_and_the_queue_goes_on():
    calls = []

    def run(progress):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")
        return _Summary()

    r = Reindexer(run)
    try:
        job = r.request("a")
        assert job.done.wait(10) and job.error == "disk full"
        assert r.request("b").done.wait(10) and r.to_json()["last"]["error"] is None
    finally:
        r.stop()


class _Summary:
    files_seen = files_indexed = 1
    files_unchanged = files_removed = spans_written = spans_total = embedded = embed_cached = 0
    skipped: list = []
    generation = 1
    repaired: list = []
    model_changed = False
    seconds = 0.01


class _Inner:
    model_id = "fake"
    dim = 2

    def __init__(self):
        self.calls: list[int] = []

    def embed_passages(self, texts, progress=None):
        self.calls.append(len(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_locked_embedder_chunks_under_the_lock_and_keeps_order():
    inner, lock = _Inner(), threading.Lock()
    wrapped = LockedEmbedder(inner, lock, chunk=3)
    texts = ["a" * n for n in (5, 1, 9, 3, 7, 2, 8)]
    seen: list[int] = []
    out = wrapped.embed_passages(texts, progress=seen.append)
    assert out[:, 0].tolist() == [5, 1, 9, 3, 7, 2, 8]
    assert inner.calls == [3, 3, 1] and sum(seen) == 7
    assert wrapped.embed_passages([]).shape == (0, 2)


def _trickle(sock, data: bytes, every_s: float) -> None:
    """Send ``data`` a byte at a time, then close (a slow-loris client)."""
    try:
        for b in data:
            sock.sendall(bytes([b]))
            time.sleep(every_s)
    except OSError:
        pass  # the reader gave up and closed: that is the point
    finally:
        sock.close()


@pytest.mark.parametrize("how", ["line", "body"])
def test_a_trickling_client_cannot_outlast_the_request_deadline(how):
    """Each byte comes well within the per-read timeout, but the request as a whole does
    not arrive by its deadline: the reader gives up (without the deadline it would read
    the whole trickle and return)."""
    import socket

    from llmc.daemon.server import DeadlineReader

    server, client = socket.socketpair()
    writer = threading.Thread(target=_trickle, args=(client, b"x" * 60, 0.1), daemon=True)
    writer.start()
    reader = DeadlineReader(server.makefile("rb"), server)
    reader.start(0.5)
    try:
        with pytest.raises(TimeoutError):
            reader.readline(65537) if how == "line" else reader.read(60)
    finally:
        reader.stop()
        server.close()
        writer.join(30)


def test_a_request_within_its_deadline_is_read_whole():
    import socket

    from llmc.daemon.server import DeadlineReader

    server, client = socket.socketpair()
    client.sendall(b"GET /v1/health HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody")
    reader = DeadlineReader(server.makefile("rb"), server)
    reader.start(60)
    try:
        assert reader.readline(65537) == b"GET /v1/health HTTP/1.1\r\n"
        assert reader.readline(10) == b"Content-Le"  # a limit cuts the line, as io does
        assert reader.readline() == b"ngth: 4\r\n"
        assert reader.readline() == b"\r\n"
        assert reader.read(4) == b"body"
    finally:
        reader.stop()
        server.close()
        client.close()
