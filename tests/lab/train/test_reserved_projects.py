"""No train list holds a project reserved for evaluation (issue 28: requests and pytest
were train projects until they were taken out)."""

from __future__ import annotations

import pytest

from lab.train.more_projects import MORE_PROJECTS
from lab.train.projects import (
    HOLDOUT_PROJECTS,
    TRAIN_PROJECTS,
    check_allowed,
    parse_project,
    reserved_names,
)
from lab.train.ranker import train_projects
from llmc import corpora
from llmc.corpora import Project
from llmc.errors import TrainError

# The house list, spelled out here so a change to the code's list cannot hide a project.
RESERVED = {
    "django", "sympy", "matplotlib", "scikit-learn", "astropy", "sphinx", "xarray", "pytest",
    "pylint", "requests", "seaborn", "flask", "click", "jinja2", "werkzeug", "itsdangerous",
    "markupsafe",
}  # fmt: skip


def _names(projects) -> set[str]:
    return {p.name.lower().replace("_", "-") for p in projects}


@pytest.mark.parametrize(
    "listed",
    [TRAIN_PROJECTS, MORE_PROJECTS, HOLDOUT_PROJECTS, tuple(train_projects())],
    ids=["TRAIN_PROJECTS", "MORE_PROJECTS", "HOLDOUT_PROJECTS", "train_projects()"],
)
def test_no_reserved_project_in_a_train_list(listed) -> None:
    assert not _names(listed) & (RESERVED | set(corpora.reserved_for_eval()))


def test_reserved_projects_are_refused() -> None:
    assert RESERVED <= reserved_names()
    for name in ("requests", "pytest", "django"):
        with pytest.raises(TrainError, match="reserved"):
            parse_project(name)
        with pytest.raises(TrainError, match="reserved"):
            check_allowed([Project(name, "1.0")])
    check_allowed([Project("requests-toolbelt", "1.0.0")])  # a different project
