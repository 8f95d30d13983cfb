"""`llmc hooks`: real git repositories whose hooks fire on commit, checkout, merge, amend.

Existing hooks are chained, never clobbered; core.hooksPath is honoured; a missing or
broken llmc never blocks or fails git.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from waiting import wait_for

from llmc import hooks
from llmc.cli import main
from llmc.paths import db_path
from llmc.store.db import Store


def git(root: Path, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        **kw.pop("env", {}),
    }
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, timeout=timeout,
        check=True, **kw,
    )  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "main.py").write_text("def main():\n    return 0\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def _hook(root: Path, name: str) -> Path:
    return root / ".git" / "hooks" / name


def _indexed_paths(root: Path) -> set[str]:
    store = Store(db_path(root), readonly=True)
    try:
        return set(store.files())
    finally:
        store.close()


def test_install_status_uninstall(repo):
    states = hooks.install(repo, executable="/opt/llmc/bin/llmc")
    assert [s.state for s in states] == ["installed"] * 4
    for name in hooks.HOOKS:
        path = _hook(repo, name)
        text = path.read_text()
        assert text.startswith("#!/bin/sh\n") and text.count(hooks.BEGIN) == 1
        assert f"hooks notify {name}" in text and "'/opt/llmc/bin/llmc'" in text
        assert os.access(path, os.X_OK)
        subprocess.run(["sh", "-n", str(path)], check=True)  # valid POSIX sh
    assert (repo / ".llmc").is_dir()  # opted in
    hooks.install(repo, executable="/opt/llmc/bin/llmc")  # idempotent
    assert _hook(repo, "post-commit").read_text().count(hooks.BEGIN) == 1
    out = CliRunner().invoke(main, ["hooks", "status", "--repo", str(repo), "--json"])
    assert [s["state"] for s in json.loads(out.stdout)] == ["installed"] * 4
    hooks.uninstall(repo)
    assert not any(_hook(repo, n).exists() for n in hooks.HOOKS)
    assert [s.state for s in hooks.status(repo)] == ["absent"] * 4


def test_existing_shell_hook_keeps_running_and_is_restored(repo):
    original = (
        '#!/bin/bash\nset -e\necho "$@" >> "$(git rev-parse --show-toplevel)/marker"\nexit 0\n'
    )
    path = _hook(repo, "post-commit")
    path.write_text(original)
    path.chmod(0o755)
    states = {s.hook: s for s in hooks.install(repo, executable="/nonexistent/llmc")}
    assert states["post-commit"].detail == "block added to existing hook"
    text = path.read_text()
    assert text.startswith("#!/bin/bash\n" + hooks.BEGIN)  # before `exit 0`, after shebang
    assert text.endswith(original.split("\n", 1)[1])
    (repo / "x.py").write_text("x = 1\n")
    git(repo, "add", "x.py")
    git(repo, "commit", "-q", "-m", "x")
    assert (repo / "marker").exists()  # the user's hook still ran
    hooks.uninstall(repo)
    assert path.read_text() == original
    assert os.access(path, os.X_OK)


def test_non_shell_hook_is_chained_with_args_and_stdin(repo):
    path = _hook(repo, "post-rewrite")
    path.write_text(
        f"#!{sys.executable}\nimport sys, pathlib\n"
        "pathlib.Path('rewrite.log').write_text(' '.join(sys.argv[1:]) + '|' + sys.stdin.read())\n"
    )
    path.chmod(0o755)
    disabled = _hook(repo, "post-merge")
    disabled.write_text("#!/bin/sh\necho should-not-run > merged\n")  # not executable
    states = {s.hook: s for s in hooks.install(repo, executable="/nonexistent/llmc")}
    assert states["post-rewrite"].state == "chained"
    assert states["post-merge"].state == "chained"
    assert (path.parent / "post-rewrite.llmc-chained").exists()
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    log = (repo / "rewrite.log").read_text()
    assert log.startswith("amend|") and len(log.split("|")[1].split()) == 2  # old new
    assert [s.state for s in hooks.status(repo)][1:] == ["chained", "installed", "chained"]
    git(repo, "checkout", "-q", "-b", "side")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "side")
    assert not (repo / "merged").exists()  # a disabled hook stays disabled
    hooks.uninstall(repo)
    assert path.read_text().startswith(f"#!{sys.executable}")
    assert not (path.parent / "post-rewrite.llmc-chained").exists()
    assert not os.access(disabled, os.X_OK) and "should-not-run" in disabled.read_text()


def test_core_hooks_path_is_honoured(repo):
    git(repo, "config", "core.hooksPath", ".githooks")
    states = hooks.install(repo, executable="/nonexistent/llmc")
    assert all(Path(s.path).parent == repo / ".githooks" for s in states)
    assert (repo / ".githooks" / "post-checkout").exists()
    assert not _hook(repo, "post-checkout").exists()


def test_missing_or_broken_llmc_never_blocks_or_fails_git(repo, tmp_path):
    """git returns while the hook's llmc still runs (it sleeps ten minutes, then fails):
    an order of events, not a timing, shows the hook never waits for llmc."""
    broken = tmp_path / "broken-llmc"
    pid_file = tmp_path / "broken.pid"
    broken.write_text(
        f"#!/bin/sh\necho $$ >> {pid_file}\necho boom; echo boom >&2\nsleep 600\nexit 1\n"
    )
    broken.chmod(0o755)
    bare_path = "/usr/bin:/bin"  # no llmc on PATH
    try:
        for exe in ("/nonexistent/llmc", str(broken)):
            hooks.install(repo, executable=exe)
            (repo / "f.txt").write_text(exe)
            git(repo, "add", "f.txt")
            out = git(repo, "commit", "-q", "-m", exe, env={"PATH": bare_path})
            assert out.returncode == 0 and out.stdout == "" and out.stderr == ""
            out = git(repo, "checkout", "-q", "HEAD~1", env={"PATH": bare_path})
            assert out.stderr == ""
            git(repo, "checkout", "-q", "main")
        wait_for(pid_file.exists, 60, "the broken llmc to start in the background")
        pids = [int(p) for p in pid_file.read_text().split()]
        assert any(_alive(pid) for pid in pids)  # still sleeping: git did not wait for it
    finally:
        with contextlib.suppress(OSError):
            for pid in pid_file.read_text().split():
                with contextlib.suppress(ValueError, ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_notify_only_where_opted_in_and_at_most_one_waits(repo):
    assert hooks.notify(repo, "post-commit") == "disabled"  # no .llmc/ here
    (repo / ".llmc").mkdir()
    fd = os.open(repo / ".llmc" / hooks.PENDING_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another hook run is already waiting
        assert hooks.notify(repo, "post-commit") == "queued-behind"
    finally:
        os.close(fd)
    assert "already waiting" in (repo / ".llmc" / hooks.HOOK_LOG).read_text()


def test_hooks_fire_on_commit_checkout_and_merge(repo):
    result = CliRunner().invoke(main, ["index", str(repo), "-q"])
    assert result.exit_code == 0, result.output
    installed = CliRunner().invoke(main, ["hooks", "install", "--repo", str(repo)])
    assert installed.exit_code == 0 and "installed" in installed.stdout
    block = _hook(repo, "post-commit").read_text()
    assert str(Path(sys.executable).parent / "llmc") in block

    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "feature.py").write_text("def wombat_tracker(burrow):\n    return burrow\n")
    git(repo, "add", "feature.py")
    git(repo, "commit", "-q", "-m", "feature")  # post-commit: no daemon, so index here
    wait_for(lambda: "feature.py" in _indexed_paths(repo), 240, "post-commit to index feature.py")

    git(repo, "checkout", "-q", "main")  # post-checkout: feature.py is gone
    wait_for(lambda: "feature.py" not in _indexed_paths(repo), 120, "post-checkout to drop it")

    git(repo, "merge", "-q", "feature")  # post-merge: back again
    wait_for(lambda: "feature.py" in _indexed_paths(repo), 120, "post-merge to index it")

    def log() -> str:
        return (repo / ".llmc" / hooks.HOOK_LOG).read_text()

    # Every hook fired; each one indexed, or found a waiting run that would see its change.
    for name in ("post-commit", "post-checkout", "post-merge"):
        wait_for(lambda name=name: f" {name}: " in log(), 60, f"{name} to log")
    assert "post-merge: indexed" in log() or "post-merge: another hook run" in log()
    mode = stat.S_IMODE(_hook(repo, "post-merge").stat().st_mode)
    assert mode & 0o100
