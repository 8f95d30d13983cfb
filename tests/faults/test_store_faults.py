"""Faults in the source of truth, ``.llmc/index.db``, and in the disk under it.

For each: the message is one line (no traceback), the exit status is right, and either the
last good index still answers or the next ``llmc index`` heals it.
"""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys

import pytest
from fault_helpers import (
    assert_consistent,
    assert_one_line_failure,
    file_size_limit,
    index_in_process,
    llmc,
    read_only_mount_works,
    read_only_prefix,
    top_results,
)
from repo_fixtures import make_repo, write_files
from waiting import wait_for

from llmc.paths import db_path, state_dir
from llmc.store.db import Store

PAGE = 4096
# The spans table, and the first chunk table of the code vectors (sqlite-vec).
SPANS, VECTORS = "spans", "emb_code_vector_chunks00"


def smash_root_page(db, table: str) -> None:
    """Overwrite the b-tree header of ``table``'s root page: what a bad sector or a stray
    write leaves."""
    store = Store(db, readonly=True)
    try:
        page_size = store.conn.execute("PRAGMA page_size").fetchone()[0]
        (page,) = store.conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    finally:
        store.close()
    with open(db, "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(b"\xff" * 16)


def heal(repo) -> dict:
    return index_in_process(repo)


def test_truncated_index_db_is_one_line_then_rebuilt(repo, good_answers):
    with open(db_path(repo), "r+b") as f:
        f.truncate(PAGE)
    failed = llmc("search", "--no-dense", "--no-hyde", "--repo", str(repo), "save session token")
    assert_one_line_failure(failed, "index.db", "malformed")
    assert "corrupt-db" in heal(repo)["repaired"]
    assert (state_dir(repo) / "index.db.corrupt").is_file()
    assert top_results(repo) == good_answers
    assert_consistent(repo)


@pytest.mark.parametrize("table", [SPANS, VECTORS])
def test_damaged_index_db_pages_are_healed_by_the_next_run(repo, good_answers, table):
    smash_root_page(db_path(repo), table)
    (repo / "app/store.py").write_text((repo / "app/store.py").read_text() + "\n# edited\n")
    assert "corrupt-db" in heal(repo)["repaired"]
    assert top_results(repo) == good_answers
    assert_consistent(repo)
    assert heal(repo)["files_indexed"] == 0


def test_disk_full_mid_index_keeps_the_last_good_index(repo, good_answers):
    """RLIMIT_FSIZE makes every write past the limit fail (EFBIG), as a full disk would."""
    write_files(
        repo,
        {
            f"gen/mod_{i}.py": "".join(
                f"def generated_{i}_{j}(x):\n    return x * {j}\n\n\n" for j in range(10)
            )
            for i in range(6)
        },
    )
    limit = 128 * 1024  # the WAL outgrows this at the first batch of new spans
    failed = llmc("index", str(repo), preexec_fn=file_size_limit(limit))
    assert_one_line_failure(failed, "stopped", "disk")
    assert top_results(repo) == good_answers  # the last good index still answers
    heal(repo)
    assert_consistent(repo)
    assert Store(db_path(repo), readonly=True).counts()["files"] == 11


def test_read_only_state_dir_still_answers_and_index_says_why(repo, good_answers, tmp_path):
    why_not = read_only_mount_works(tmp_path / "probe")
    if why_not:
        print(f"skipping: {why_not}")
        pytest.skip(why_not)
    prefix = read_only_prefix(state_dir(repo))
    assert top_results(repo, prefix=prefix) == good_answers
    (repo / "app/store.py").write_text((repo / "app/store.py").read_text() + "\n# edited\n")
    failed = llmc("index", str(repo), prefix=prefix)
    assert_one_line_failure(failed, "Read-only file system")
    heal(repo)  # writable again: the edit is indexed
    assert_consistent(repo)


def test_state_dir_deleted_between_and_during_runs(tmp_path):
    files = {
        f"pkg/mod_{i}.py": "".join(
            f"def func_{i}_{j}(value):\n    '''Item {j} of module {i}.'''\n"
            f"    return value * {j} + {i}\n\n\n"
            for j in range(12)
        )
        for i in range(10)
    }
    repo = make_repo(tmp_path / "r", files)
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _generation(repo) >= 1 or proc.poll() is not None, 180, "a first write")
        deleted_mid_run = proc.poll() is None
        wait_for(lambda: _deleted(state_dir(repo)), 180, "the state directory deleted")
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    if deleted_mid_run and proc.returncode != 0:
        assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
        assert len([line for line in stderr.splitlines() if line.startswith("Error:")]) == 1
    missing = llmc("search", "--no-dense", "--no-hyde", "--repo", str(repo), "func_3_4")
    assert_one_line_failure(missing, "llmc index")
    heal(repo)
    assert_consistent(repo)


def _deleted(path) -> bool:
    """One ``rm -rf`` of ``path``; True once it is gone. Under a running indexer rmtree can
    fail as ``rm -rf`` does (a file appears in a directory being emptied, or vanishes
    before its unlink): then the caller deletes again."""
    try:
        shutil.rmtree(path)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.ENOENT):
            raise
    return not path.exists()


def _generation(repo) -> int:
    try:
        store = Store(db_path(repo), readonly=True)
    except Exception:  # noqa: BLE001 - not there yet, or half-created
        return 0
    try:
        return store.generation
    except Exception:  # noqa: BLE001
        return 0
    finally:
        store.close()
