"""The daemon's parts without a daemon: watcher batching and filtering, the reindex queue,
the shared-model embedder wrapper, the connection protocol on a real uvicorn. Real
watchdog and git; no models."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

import numpy as np
import pytest
from daemon_helpers import SEEN, git, make_git_repo, wait_for
from waiting import HANG_S

from llmc.config import Config, load_config
from llmc.daemon.reindex import LockedEmbedder, Reindexer
from llmc.daemon.watcher import PathFilter, Watcher, git_ignored
from llmc.types import IndexSummary

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

    def run(progress, job):
        started.set()
        gate.wait(10)
        runs.append(1)
        return IndexSummary(files_seen=1, files_indexed=1, generation=1, seconds=0.01)

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


def test_has_pending_tells_a_running_backfill_that_an_edit_waits():
    gate, started = threading.Event(), threading.Event()
    seen: list[bool] = []

    def run(progress, job):
        started.set()
        gate.wait(10)
        seen.append(r.has_pending())  # what the run's stop callback would answer
        return IndexSummary()

    r = Reindexer(run)
    try:
        assert not r.has_pending()
        r.request("a")
        assert started.wait(5) and not r.has_pending()  # the running job is not pending
        r.request("b")
        assert r.has_pending()
        gate.set()
        assert r.wait_idle(10) and not r.has_pending()
        assert seen == [True, False]
    finally:
        gate.set()
        r.stop()


def test_a_failing_run_is_reported_and_the_queue_goes_on():
    calls = []

    def run(progress, job):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")
        return IndexSummary(files_seen=1, files_indexed=1, generation=1, seconds=0.01)

    r = Reindexer(run)
    try:
        job = r.request("a")
        assert job.done.wait(10) and job.error == "disk full"
        assert r.request("b").done.wait(10) and r.to_json()["last"]["error"] is None
    finally:
        r.stop()


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


class _Loading(_Inner):
    """Records whether the lock was held while the passage model loaded, and while each
    chunk was embedded."""

    def __init__(self, lock: threading.Lock):
        super().__init__()
        self.lock = lock
        self.held_while_loading: list[bool] = []
        self.held_while_embedding: list[bool] = []

    def prepare_passages(self):
        self.held_while_loading.append(self.lock.locked())

    def embed_passages(self, texts, progress=None):
        self.held_while_embedding.append(self.lock.locked())
        return super().embed_passages(texts, progress)


def test_locked_embedder_loads_the_passage_model_outside_the_lock():
    """Searches wait on the lock: the seconds of loading torch must not be spent under it
    (the daemon's first edit blocked searches 6-9 s), each chunk's embedding must."""
    lock = threading.Lock()
    inner = _Loading(lock)
    LockedEmbedder(inner, lock, chunk=2).embed_passages(["a", "bb", "ccc"])
    assert inner.held_while_loading == [False]
    assert inner.held_while_embedding == [True, True]


# -- the connection protocol (llmc/daemon/protocol.py) on a real uvicorn, short deadline ----------


def _connect(path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(HANG_S)  # a hang guard, never the thing tested
    s.connect(str(path))
    return s


def _read_all(s: socket.socket) -> bytes:
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := s.recv(65536):
            out += chunk
    return out


def _trickle(s: socket.socket, data: bytes, every_s: float, stop: threading.Event) -> None:
    """Send ``data`` a byte at a time (a slow-loris client) until the server cuts us off."""
    try:
        for b in data:
            if stop.is_set():
                return
            s.sendall(bytes([b]))
            time.sleep(every_s)
    except OSError:
        pass  # the server gave up and closed: that is the point


@pytest.mark.parametrize("how", ["line", "body"])
def test_a_trickling_client_cannot_outlast_the_request_deadline(tiny_server, how):
    """Each byte comes well within any per-read timeout, and the request is never complete,
    so only the deadline for the whole request can answer it (without one, nothing would
    come until the hang guard fails the test): 408, then the close. The app waiting for the
    body sees a disconnect."""
    path, statuses = tiny_server
    head, data = b"", b"POST /" + b"x" * 600
    if how == "body":  # the head at once, then the body trickles
        head, data = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n", b"y" * 600
    stop = threading.Event()
    with _connect(path) as s:
        s.sendall(head)
        writer = threading.Thread(target=_trickle, args=(s, data, 0.05, stop), daemon=True)
        writer.start()
        try:
            raw = _read_all(s)
        finally:
            stop.set()
            writer.join(HANG_S)
    head = raw.split(b"\r\n", 1)[0]
    assert b" 408 " in head, raw
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "timeout"
    assert statuses == [408]
    if how == "body":
        wait_for(lambda: SEEN == ["disconnect"], 30, "the app to see the disconnect")


def test_a_request_within_its_deadline_is_answered_and_the_next_one_too(tiny_server):
    """The deadline is per request: after an answer it starts again for the next one, and
    an idle keep-alive connection is closed at it without a word."""
    path, _ = tiny_server
    with _connect(path) as s:
        for body in (b"body", b"again"):
            s.sendall(
                b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            got = b""
            while not got.endswith(b"}"):
                got += s.recv(65536)
            assert b" 200 " in got.split(b"\r\n", 1)[0]
            assert json.loads(got.partition(b"\r\n\r\n")[2]) == {"echo": body.decode()}
        assert _read_all(s) == b""  # idle past the deadline: closed, no unasked-for 408
    assert SEEN == [b"body", b"again"]


def test_a_silent_client_is_closed_without_an_answer(tiny_server):
    path, statuses = tiny_server
    with _connect(path) as s:
        assert _read_all(s) == b""
    assert statuses == []


def test_a_malformed_request_gets_json(tiny_server):
    path, statuses = tiny_server
    with _connect(path) as s:
        s.sendall(b"HELLO\r\n\r\n")
        raw = _read_all(s)
    assert b" 400 " in raw.split(b"\r\n", 1)[0]
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "bad_request"
    assert statuses == [400]


def test_connections_beyond_the_limit_get_503(serve):
    path, _ = serve(deadline_s=HANG_S, max_connections=2)
    with _connect(path) as a, _connect(path) as b:  # two idle connections fill the limit
        with _connect(path) as c:  # accepted after them (the backlog is in order)
            raw = _read_all(c)
        for s in (a, b):  # and they are still served
            s.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok")
            assert b" 200 " in s.recv(65536).split(b"\r\n", 1)[0]
    assert b" 503 " in raw.split(b"\r\n", 1)[0], raw
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"]["code"] == "busy"


def test_a_half_closed_client_still_gets_its_answer(tiny_server):
    path, _ = tiny_server
    with _connect(path) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi")
        s.shutdown(socket.SHUT_WR)
        raw = _read_all(s)
    assert raw.count(b"HTTP/1.1 200") == 1 and raw.endswith(b'{"echo": "hi"}')
