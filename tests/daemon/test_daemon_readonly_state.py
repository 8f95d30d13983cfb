"""`llmc daemon start` with a `.llmc/` it cannot write: one line, no traceback (issue 40, 8)."""

from __future__ import annotations

import subprocess

import pytest
from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def _immutable(path, on: bool) -> bool:
    """``chattr +i``: read-only even for root (the suite may run as root, where modes do
    not stop a write). False where the file system or the container does not allow it."""
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    return done.returncode == 0


def test_a_read_only_state_dir_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    state = root / ".llmc"
    if not _immutable(state, True):
        pytest.skip("chattr +i is not available here")
    try:
        result = CliRunner().invoke(main, ["daemon", "start", "--repo", str(root)])
    finally:
        _immutable(state, False)
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "must be writable" in lines[0], result.output
    assert "Traceback" not in result.output
