"""An incremental run with the same embedding model is not a model change (issue 40, 2).

The check compared the stored model id with the function that names the wanted one, so
every incremental run said "embedding model for code changed", set ``model_changed`` (the
daemon then dropped its open searchers) and passed no cached vector on.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def _index(root) -> tuple[dict, str]:
    result = CliRunner().invoke(main, ["index", str(root), "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_an_incremental_run_with_the_same_model_is_no_model_change(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    first, _ = _index(root)
    assert first["embedded"] > 0
    (root / "app" / "extra.py").write_text('def extra():\n    """One more."""\n    return 1\n')
    second, stderr = _index(root)
    assert second["model_changed"] is False, second
    assert "changed from" not in stderr

    store = (root / "app" / "store.py").read_text()
    (root / "app" / "store.py").unlink()
    _index(root)
    (root / "app" / "store.py").write_text(store)
    back, _ = _index(root)  # the same spans again: their vectors come from the cache
    assert back["model_changed"] is False
    assert back["embed_cached"] > 0 and back["embedded"] == 0, back
