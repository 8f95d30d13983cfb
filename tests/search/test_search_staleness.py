"""A search without a daemon says when the working tree moved on since the index (issue 40, 6)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def _search(root, *args: str) -> dict:
    result = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--json", "--no-hyde", "--no-dense", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[0])


def test_a_stale_index_is_said_and_a_fresh_one_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    assert not any("llmc index" in w for w in _search(root, "session store")["warnings"])

    store = root / "app" / "store.py"
    store.write_text(store.read_text() + "\n\ndef purge_sessions(days):\n    return days\n")
    (root / "app" / "server.js").unlink()
    warnings = _search(root, "purge sessions")["warnings"]
    stale = [w for w in warnings if "run `llmc index`" in w]
    assert len(stale) == 1, warnings
    assert "1 file(s) changed and 1 deleted" in stale[0] and "app/store.py" in stale[0]
    files = _search(root, "--files", "purge sessions")["warnings"]
    assert any("run `llmc index`" in w for w in files), files

    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    assert not any("llmc index" in w for w in _search(root, "purge sessions")["warnings"])
