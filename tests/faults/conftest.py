"""One good index per session; each fault test breaks a copy of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_helpers import copy_repo, make_good_repo, top_results


@pytest.fixture(scope="session")
def good_repo(tmp_path_factory) -> Path:
    return make_good_repo(tmp_path_factory.mktemp("good") / "repo")


@pytest.fixture(scope="session")
def good_answers(good_repo) -> dict[str, list]:
    """What the clean index answers (BM25 only) for the fixed queries."""
    return top_results(good_repo)


@pytest.fixture
def repo(good_repo, tmp_path) -> Path:
    """A copy of the good repository and index, free to break."""
    return copy_repo(good_repo, tmp_path / "repo")
