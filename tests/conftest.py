"""Shared fixtures: isolated config, fixture repositories made on the fly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_fixtures import SAMPLE_FILES, make_repo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory, monkeypatch):
    """No user config or LLMC_* variable of the developer's leaks into a test."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for var in list(os.environ):
        if var.startswith("LLMC_"):
            monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", SAMPLE_FILES)
