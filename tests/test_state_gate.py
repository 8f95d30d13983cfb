"""The gate before `.llmc/`: state that came with a repository never answers, never runs.

Each test replays a reproduction from a hostile repository (issue 41): a `git pull` that
plants a `.llmc/hooks.log` symlink, `.llmc` committed as a submodule, a committed
`index.db` with edited span text, a database whose tables are recursive views, a sibling
worktree whose committed index carries swapped vectors. Every entry point that reads
`.llmc/` (search, MCP, status, the hook, the worktree cache) goes through one gate first.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, git, make_repo

from llmc.cli import main

INJECTED = "INJECTED_BY_ATTACKER"


def _index(root: Path, *args: str):
    return CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json", "-q", *args])


def _llmc(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed CLI in a child process, so a hang is a timeout, not a stuck suite."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["LLMC_NO_DAEMON"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "llmc", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _publish(tmp_path: Path, files: dict, commit_state) -> tuple[Path, Path]:
    """An upstream repository and a clone of it; ``commit_state(upstream)`` then adds the
    hostile state upstream, to arrive in the clone by ``git pull``."""
    upstream = make_repo(tmp_path / "upstream", files)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    commit_state(upstream)
    return upstream, clone


# -- the hook log ------------------------------------------------------------------------------
def test_git_pull_with_a_planted_hook_log_symlink_writes_nothing_outside_llmc(tmp_path):
    victim = tmp_path / "site-packages" / "x.pth"
    victim.parent.mkdir()
    victim.write_text("# a .pth file python runs at start\n")
    before = victim.read_bytes()

    def plant(upstream: Path) -> None:
        (upstream / ".llmc").mkdir()
        os.symlink(os.path.relpath(victim, upstream / ".llmc"), upstream / ".llmc" / "hooks.log")
        os.symlink("/nonexistent/elsewhere", upstream / ".llmc" / "hooks.pending.lock")
        (upstream / "x\nimport os; os.system('touch PWNED')\n.env").write_text("K=1\n")
        git(upstream, "add", "-f", "-A")
        git(upstream, "commit", "-q", "-m", "planted")

    _, clone = _publish(tmp_path, SAMPLE_FILES, plant)
    assert _index(clone).exit_code == 0  # opted in: `.llmc/` exists, as after `hooks install`
    git(clone, "pull", "-q", "--no-rebase", "origin", "main")
    assert (clone / ".llmc" / "hooks.log").is_symlink()  # what a pull leaves for the hook

    done = _llmc(clone, "hooks", "notify", "post-merge")
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == before
    assert not (clone / "PWNED").exists()
    log = clone / ".llmc" / "hooks.log"
    assert not log.is_symlink() and stat.S_ISREG(log.lstat().st_mode)
    for line in log.read_text(encoding="utf-8").splitlines():  # one record a line, no forgery
        assert line[:4].isdigit(), line
    assert not (clone / ".llmc" / "hooks.pending.lock").is_symlink()


def test_llmc_committed_as_a_submodule_is_dropped_before_the_hook_writes(tmp_path):
    state = make_repo(tmp_path / "state", {"placeholder": "x\n"})
    os.symlink("../.git/hooks/post-commit", state / "hooks.log")
    (state / "tuned").mkdir()
    (state / "tuned" / "tuned.json").write_text('{"planted": true}')
    git(state, "add", "-A")
    git(state, "commit", "-q", "-m", "state")

    def plant(upstream: Path) -> None:
        git(upstream, "-c", "protocol.file.allow=always", "submodule", "add", "-q",
            str(state), ".llmc")  # fmt: skip
        git(upstream, "commit", "-q", "-m", "state as a submodule")

    upstream, _ = _publish(tmp_path, SAMPLE_FILES, plant)
    clone = tmp_path / "victim"
    git(tmp_path, "-c", "protocol.file.allow=always", "clone", "-q", "--recurse-submodules",
        str(upstream), str(clone))  # fmt: skip
    assert (clone / ".llmc" / "hooks.log").is_symlink()
    assert "160000" in git(clone, "ls-files", "-s", "--", ".llmc")  # a gitlink
    hook = clone / ".git" / "hooks" / "post-commit"
    assert not hook.exists()

    done = _llmc(clone, "hooks", "notify", "post-commit")
    assert done.returncode == 0, done.stderr
    assert not hook.exists()
    assert not (clone / ".llmc" / "tuned" / "tuned.json").exists()
    assert not (clone / ".llmc" / "hooks.log").is_symlink()
    assert not (clone / ".llmc" / ".git").exists()


# -- a committed index -------------------------------------------------------------------------
def _poisoned_upstream(tmp_path: Path) -> Path:
    """An upstream whose committed `.llmc/index.db` serves text that is in no file."""

    def plant(upstream: Path) -> None:
        assert _index(upstream).exit_code == 0
        conn = sqlite3.connect(upstream / ".llmc" / "index.db")
        with conn:
            conn.execute(
                "UPDATE spans SET text = replace(text, 'return SessionStore(path)', "
                f"'return {INJECTED}(card, amount)') WHERE path = 'app/store.py'"
            )
        conn.close()
        assert INJECTED in (upstream / ".llmc" / "index.db").read_bytes().decode("latin-1")
        git(upstream, "add", "-f", ".llmc")
        git(upstream, "commit", "-q", "-m", "ship the index")

    upstream = make_repo(tmp_path / "upstream", SAMPLE_FILES)
    plant(upstream)
    return upstream


def test_a_committed_index_never_answers_a_search_or_status(tmp_path):
    upstream = _poisoned_upstream(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    assert (clone / ".llmc" / "index.db").exists()

    assert stat.S_IMODE((clone / ".llmc").stat().st_mode) == 0o755  # as git made it
    found = _llmc(clone, "search", "--json", "--no-hyde", "open the session store")
    assert INJECTED not in found.stdout
    assert not (clone / ".llmc" / "index.db").exists()
    assert stat.S_IMODE((clone / ".llmc").stat().st_mode) == 0o700  # tightened by the gate
    status = _llmc(clone, "status", "--json")
    assert INJECTED not in status.stdout
    # the user's own index, made next, answers from the working tree
    assert _index(clone).exit_code == 0
    found = _llmc(clone, "search", "--json", "--no-hyde", "open the session store")
    assert found.returncode == 0, found.stderr
    assert INJECTED not in found.stdout
    assert "app/store.py" in {r["path"] for r in json.loads(found.stdout)["results"]}


def test_a_committed_index_never_answers_an_mcp_call(tmp_path):
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    upstream = _poisoned_upstream(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))

    async def call() -> str:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "llmc", "mcp", "--repo", str(clone)],
            env={**os.environ, "LLMC_NO_DAEMON": "1"},
        )
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                out = await s.call_tool("search", {"query": "open the session store"})
                return json.dumps([getattr(c, "text", "") for c in out.content])

    text = anyio.run(call)
    assert INJECTED not in text
    assert not (clone / ".llmc" / "index.db").exists()


# -- views in a database -----------------------------------------------------------------------
def _views_for_tables(db: Path, tables: tuple[str, ...]) -> None:
    """Each table replaced by a view with its columns that never ends."""
    conn = sqlite3.connect(db)
    with conn:
        for table in tables:
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            conn.execute(f"DROP TABLE {table}")
            conn.execute(
                f"CREATE VIEW {table} AS WITH RECURSIVE r(n) AS "
                "(SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT "
                + ", ".join(f"n AS {c}" for c in columns)
                + " FROM r"
            )
    conn.close()


def test_a_recursive_view_in_the_index_hangs_nothing(tmp_path):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert _index(root).exit_code == 0
    _views_for_tables(root / ".llmc" / "index.db", ("spans",))

    found = _llmc(root, "search", "--json", "--no-hyde", "session store", timeout=60)
    assert found.returncode != 0
    assert "view" in found.stderr and "Traceback" not in found.stderr
    status = _llmc(root, "status", timeout=60)
    assert "Traceback" not in status.stderr


# -- a sibling worktree's committed index ------------------------------------------------------
WT_FILES = {
    "payments.py": 'def charge(card, amount):\n    """Charge a card."""\n    return 1\n',
    "backdoor.py": 'def exfiltrate(data):\n    """Send data away."""\n    return 2\n',
}


def _embed_index(root: Path):
    result = CliRunner().invoke(main, ["index", str(root), "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_sibling_worktrees_committed_index_never_feeds_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    first = make_repo(tmp_path / "main", WT_FILES)
    sibling = tmp_path / "sibling"
    git(first, "worktree", "add", "-q", "-b", "hostile", str(sibling))
    assert _embed_index(sibling)["embedded"] == 2
    conn = sqlite3.connect(sibling / ".llmc" / "index.db")
    rows = conn.execute("SELECT text_hash, vector FROM embedding_cache").fetchall()
    assert len(rows) == 2
    with conn:  # swap the two vectors: a dense query for one finds the other
        for (text_hash, _), (_, vector) in zip(rows, rows[::-1], strict=True):
            conn.execute(
                "UPDATE embedding_cache SET vector = ? WHERE text_hash = ?", (vector, text_hash)
            )
    conn.close()
    git(sibling, "add", "-f", ".llmc/index.db")
    git(sibling, "commit", "-q", "-m", "ship an index")

    summary = _embed_index(first)
    assert summary["embedded"] == 2, summary  # nothing borrowed from a tracked index


def test_a_recursive_view_in_a_sibling_cache_is_a_miss_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    first = make_repo(tmp_path / "main", WT_FILES)
    sibling = tmp_path / "sibling"
    git(first, "worktree", "add", "-q", "-b", "other", str(sibling))
    assert _embed_index(sibling)["embedded"] == 2
    _views_for_tables(sibling / ".llmc" / "index.db", ("embedding_cache",))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = subprocess.run(
        [sys.executable, "-m", "llmc", "index", str(first), "--json", "-q"],
        capture_output=True, text=True, timeout=180, env={**env, "LLMC_NO_DAEMON": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["embedded"] == 2


# -- locks -------------------------------------------------------------------------------------
def test_a_lock_file_planted_as_a_symlink_is_never_written_through(tmp_path):
    from llmc.index.lock import IndexLock

    target = tmp_path / "target.txt"
    target.write_text("keep me\n")
    state = tmp_path / "repo" / ".llmc"
    state.mkdir(parents=True)
    os.symlink(target, state / "index.lock")
    with IndexLock(state / "index.lock", timeout=5):
        pass
    assert target.read_text() == "keep me\n"
    assert not (state / "index.lock").is_symlink()


def test_hooks_install_never_writes_through_a_planted_temp_file(tmp_path):
    """A tracked hooks folder (core.hooksPath = .githooks, as husky sets it) can carry a
    link where `llmc hooks install` writes its temp file."""
    target = tmp_path / "authorized_keys"
    target.write_text("ssh-ed25519 AAAA the-users-key\n")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    hooks_dir = root / ".githooks"
    hooks_dir.mkdir()
    for hook in ("post-commit", "post-merge", "post-checkout", "post-rewrite"):
        os.symlink(target, hooks_dir / f".{hook}.llmc-tmp")
    git(root, "config", "core.hooksPath", ".githooks")

    result = CliRunner().invoke(main, ["hooks", "install", "--repo", str(root)])
    assert result.exit_code == 0, result.output
    assert target.read_text() == "ssh-ed25519 AAAA the-users-key\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert "hooks notify post-commit" in (hooks_dir / "post-commit").read_text()
    assert not any(p.name.endswith(".llmc-tmp") for p in hooks_dir.iterdir())


def test_a_fifo_in_place_of_a_state_file_is_refused_not_waited_on(tmp_path):
    from llmc.paths import open_state_file

    fifo = tmp_path / "hooks.log"
    os.mkfifo(fifo)
    with pytest.raises(OSError):  # no reader: ENXIO at once, where a plain open would block
        open_state_file(fifo, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with pytest.raises(OSError, match="not a regular file"):
        open_state_file(fifo, os.O_RDONLY)
