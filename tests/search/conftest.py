"""A small multi-language repo, indexed once per session with the real embedding model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from search_fixture_files import write_repo

from llmc.cli import main


@pytest.fixture(scope="session")
def isolated_env(tmp_path_factory) -> dict[str, str]:
    """No user config, no LLMC_* variables from the machine running the tests."""
    home = tmp_path_factory.mktemp("xdg")
    env = {"XDG_CONFIG_HOME": str(home), "NO_COLOR": "1"}
    mp = pytest.MonkeyPatch()
    for key, value in env.items():
        mp.setenv(key, value)
    import os

    for key in list(os.environ):
        if key.startswith("LLMC_"):
            mp.delenv(key)
    yield env
    mp.undo()


@pytest.fixture(scope="session")
def indexed_repo(tmp_path_factory, isolated_env) -> Path:
    """The fixture repo, indexed with the real default model (loaded once per session)."""
    root = write_repo(tmp_path_factory.mktemp("shop"))
    result = CliRunner().invoke(main, ["index", str(root), "-q"])
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def repo_copy(indexed_repo, tmp_path) -> Path:
    """A private copy of the indexed repo (index included) that a test may damage."""
    dest = tmp_path / "copy"
    shutil.copytree(indexed_repo, dest)
    return dest


@pytest.fixture
def runner(isolated_env) -> CliRunner:
    return CliRunner()
