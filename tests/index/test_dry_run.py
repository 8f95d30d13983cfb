"""`llmc index --dry-run` plans what the run would do (issue 40, item 10)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def _index(root, *args: str) -> dict:
    result = CliRunner().invoke(main, ["index", str(root), "--json", "-q", "--no-vectors", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_dry_run_counts_each_file_once_and_full_plans_every_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    planned = _index(root, "--dry-run")
    assert planned["files_indexed"] == planned["files_seen"] > 0
    assert sum(planned["files_by_lang"].values()) == planned["files_indexed"], planned

    done = _index(root)
    assert done["files_by_lang"] == planned["files_by_lang"]
    assert _index(root, "--dry-run")["files_indexed"] == 0  # nothing changed since
    full = _index(root, "--dry-run", "--full")
    assert full["files_indexed"] == done["files_indexed"], full
    assert sum(full["files_by_lang"].values()) == full["files_indexed"]


def test_outside_git_the_state_dir_is_not_reported_as_a_skipped_vendored_dir(tmp_path):
    root = make_repo(tmp_path / "plain", SAMPLE_FILES, use_git=False)
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "node_modules" / "x" / "i.js").write_text("module.exports = 1\n")
    _index(root)
    again = _index(root)  # `.llmc/` exists now
    skipped = {s["path"] for s in again["skipped"]}
    assert "node_modules/" in skipped
    assert ".llmc/" not in skipped, skipped
