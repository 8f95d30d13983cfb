"""`.llmc/` is llmc's own, private state: never a committed symlink or file, never state
that came with the repository, never readable by another local user."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, git, make_repo

from llmc.cli import main


def _index(root: Path, *args: str):
    return CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json", *args])


def _search(root: Path, query: str):
    return CliRunner().invoke(main, ["search", "--repo", str(root), "--json", "--no-hyde", query])


def _one_line_error(result) -> str:
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_a_committed_llmc_symlink_is_refused_and_nothing_is_written_through_it(tmp_path):
    # The link points at a real index elsewhere (say, one the attacker planted).
    other = make_repo(tmp_path / "other", {"other.py": "def planted():\n    return 1\n"})
    assert _index(other).exit_code == 0
    elsewhere = other / ".llmc"
    before = sorted(p.name for p in elsewhere.iterdir())
    root = make_repo(tmp_path / "repo", SAMPLE_FILES, use_git=False)
    os.symlink(elsewhere, root / ".llmc")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "symlinked state")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert (clone / ".llmc").is_symlink()
    mtime = (elsewhere / "index.db").stat().st_mtime_ns

    assert "symbolic link" in _one_line_error(_index(clone))
    assert "symbolic link" in _one_line_error(_search(clone, "planted"))
    assert sorted(p.name for p in elsewhere.iterdir()) == before
    assert (elsewhere / "index.db").stat().st_mtime_ns == mtime


def test_llmc_as_a_regular_file_is_one_line(tmp_path):
    root = make_repo(tmp_path / "repo", {**SAMPLE_FILES, ".llmc": "not a directory\n"})
    assert "not a directory" in _one_line_error(_index(root))
    assert (root / ".llmc").read_text() == "not a directory\n"  # bad input loses nothing


def test_the_index_is_private(sample_repo):
    assert _index(sample_repo).exit_code == 0
    assert _search(sample_repo, "session store").exit_code == 0  # the query log, too
    assert (sample_repo / ".llmc" / "queries.jsonl").exists()
    state = sample_repo / ".llmc"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    loose = []
    for dirpath, dirnames, filenames in os.walk(state):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISSOCK(st.st_mode) or stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & 0o077:
                loose.append((os.path.join(dirpath, name), oct(st.st_mode)))
    assert loose == []
    assert (state / "index.db").exists()


def test_an_older_world_readable_index_is_tightened_on_the_next_run(sample_repo):
    assert _index(sample_repo).exit_code == 0
    state = sample_repo / ".llmc"
    os.chmod(state, 0o755)
    os.chmod(state / "index.db", 0o644)
    (sample_repo / "app" / "extra.py").write_text("def extra():\n    return 1\n")
    assert _index(sample_repo).exit_code == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "index.db").stat().st_mode) == 0o600


def test_state_that_came_with_the_repository_is_removed_not_read(tmp_path, caplog):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    planted = root / ".llmc" / "planted.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps({"from": "the repository"}))
    git(root, "add", "-f", ".llmc/planted.json")
    git(root, "commit", "-q", "-m", "commit some state")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert (clone / ".llmc" / "planted.json").exists()

    with caplog.at_level("WARNING"):
        result = _index(clone)
    assert result.exit_code == 0, result.output
    assert not (clone / ".llmc" / "planted.json").exists()
    assert any("tracked by git" in r.getMessage() for r in caplog.records)
    found = _search(clone, "session store")
    assert found.exit_code == 0, found.output
    paths = [r["path"] for r in json.loads(found.output)["results"]]
    assert "app/store.py" in paths


def test_two_processes_making_the_state_dir_at_once_both_succeed(tmp_path, monkeypatch):
    """The race two `llmc daemon start` hit: both saw no `.gitignore`, the second's
    exclusive create failed. Replayed here by making the file between the check and the
    create; a non-file in its place is still refused with a clear error."""
    import pytest

    from llmc.errors import LlmcError
    from llmc.paths import ensure_state_dir

    real_exists = Path.exists

    def raced(self: Path, *a, **k) -> bool:
        if self.name == ".gitignore" and self.parent.name == ".llmc":
            if not real_exists(self):
                self.write_text("# the other process\n*\n")
            return False  # as this process saw it, just before the other made it
        return real_exists(self, *a, **k)

    monkeypatch.setattr(Path, "exists", raced)
    state = ensure_state_dir(tmp_path)
    assert (state / ".gitignore").read_text() == "# the other process\n*\n"
    assert ensure_state_dir(tmp_path) == state  # and again, with it there

    other = tmp_path / "other"
    other.mkdir()
    (other / ".llmc").mkdir(mode=0o700)
    (other / ".llmc" / ".gitignore").mkdir()  # not a file: refused, one clear error
    with pytest.raises(LlmcError, match="not a regular file"):
        ensure_state_dir(other)
