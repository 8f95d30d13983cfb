"""Helpers for the fault-injection tests: a good index to break, the CLI run like a user
runs it, and checks that a failure is one line and the last good index still answers.

Each test copies a repository indexed once per session (``good_repo``), breaks something
real (a file, a mount, a resource limit), and runs ``python -m llmc`` in a subprocess, so
stderr and the exit status are exactly what a user sees.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from index_checks import assert_index_consistent
from repo_fixtures import SAMPLE_FILES, make_repo

QUERIES = ("save session token", "start the http server", "configuration sessions path")
CLI_TIMEOUT_S = 240.0


def make_good_repo(root: Path) -> Path:
    """The sample repository, indexed by a real ``llmc index``."""
    make_repo(root, SAMPLE_FILES)
    index_in_process(root)
    return root


def index_in_process(root: Path, *args: str) -> dict:
    """``llmc index --json`` through click in this process: the embedder loads once per
    test session, so healing runs cost what indexing costs, not a model load each."""
    from click.testing import CliRunner

    from llmc.cli import main

    result = CliRunner().invoke(main, ["index", str(root), "--json", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def copy_repo(src: Path, dst: Path) -> Path:
    """A copy with the same mtimes, so the copied index sees every file as unchanged."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMC_", "GIT_"))}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def llmc(
    *args: str,
    prefix: Sequence[str] = (),
    preexec_fn: Callable[[], None] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``python -m llmc ARGS`` in a subprocess (behind ``prefix``, e.g. ``unshare``)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "llmc", *args],
        capture_output=True,
        text=True,
        env=env or child_env(),
        timeout=CLI_TIMEOUT_S,
        preexec_fn=preexec_fn,
    )


def assert_one_line_failure(out: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 1, no traceback, and one ``Error:`` line naming every needle."""
    assert out.returncode == 1, (out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, out.stderr[-3000:]
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def assert_clean_success(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, (out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr, out.stderr[-3000:]


def search_json(
    root: Path, query: str, *flags: str, prefix: Sequence[str] = (), dense: bool = False
) -> tuple[list[tuple[str, int, int]], dict]:
    """(path, start, end) of each result and the whole JSON answer; BM25 only, ranked by
    RRF, unless ``dense`` (loading the embedder costs seconds a process). RRF reads ranks
    only, so an edit elsewhere that nudges BM25's scores leaves the order as it was; the
    learned ranker (the default) reads the scores and may swap two near ties."""
    extra = () if dense else ("--no-dense", "--no-hyde", "--fusion", "rrf")
    out = llmc("search", "--json", "--repo", str(root), *extra, *flags, query, prefix=prefix)
    assert_clean_success(out)
    answer = json.loads(out.stdout)
    return [(r["path"], r["start_line"], r["end_line"]) for r in answer["results"]], answer


def top_results(root: Path, prefix: Sequence[str] = ()) -> dict[str, list]:
    return {q: search_json(root, q, prefix=prefix)[0] for q in QUERIES}


def assert_consistent(root: Path) -> None:
    assert_index_consistent(root, graph=True)


def file_size_limit(limit_bytes: int) -> Callable[[], None]:
    """A ``preexec_fn``: files may not grow past ``limit_bytes`` (a full disk, as the
    process sees it: writes fail with EFBIG); SIGXFSZ is ignored so the write fails
    instead of killing the process."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return apply


_RO_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def read_only_prefix(path: Path) -> list[str]:
    """Run behind this to see ``path`` as a read-only mount, in a private mount namespace
    (nothing leaks to other processes; root ignores file modes, so chmod would not do)."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        _RO_MOUNT,
        "sh",
        str(path),
    ]


def read_only_mount_works(probe_dir: Path) -> str | None:
    """None when ``read_only_prefix`` works here; else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    probe_dir.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [
            *read_only_prefix(probe_dir),
            "sh",
            "-c",
            'touch "$0/x" 2>/dev/null && exit 7; exit 0',
            str(probe_dir),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if out.returncode == 0:
        return None
    return (
        f"cannot make a read-only bind mount here (rc {out.returncode}: {out.stderr.strip()[:200]})"
    )


__all__ = [
    "QUERIES",
    "assert_clean_success",
    "assert_consistent",
    "assert_one_line_failure",
    "copy_repo",
    "file_size_limit",
    "index_in_process",
    "llmc",
    "make_good_repo",
    "read_only_mount_works",
    "read_only_prefix",
    "search_json",
    "top_results",
]
