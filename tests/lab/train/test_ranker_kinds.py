"""`python -m lab train ranker` with the kinds of issue 28: weights per kind group, validation per
kind group, the held-out slice by project, and the shipped report pins."""

from __future__ import annotations

import numpy as np
import pytest

from lab.protocol.splits import protocol_projects
from lab.train.projects import reserved_names
from lab.train.ranker import (
    CHOOSE_GROUPS,
    KIND_GROUPS,
    TRAIN_KINDS,
    group_of,
    held_out,
    query_weights,
    split_metrics,
    stack,
    train_projects,
)
from lab.train.ranker_data import ProjectData
from lab.train.ranker_kinds import HISTORIES, find_git_dir
from llmc.search.features import FEATURES


def data(labels_per_query: list[list[int]], kinds: tuple[str, ...], name: str = "p"):
    labels = [y for q in labels_per_query for y in q]
    return ProjectData(
        name, "train", np.zeros((len(labels), len(FEATURES)), np.float32),
        np.asarray(labels, np.int8), tuple(len(q) for q in labels_per_query),
        tuple(f"q{i}" for i in range(len(labels_per_query))), kinds, 10, "m", 0.0,
    )  # fmt: skip


def test_every_kind_trained_on_has_a_group() -> None:
    assert {group_of(k) for k in TRAIN_KINDS} <= set(KIND_GROUPS)
    assert group_of("report") == "report" and group_of("guide-sentence") == "example"
    assert set(CHOOSE_GROUPS) <= set(KIND_GROUPS)


def test_weights_per_kind_group() -> None:
    d = data([[1, 0], [0, 1], [1], [1, 0, 0], [0, 0]],
             ("code", "doc-title", "test-name", "report", "report"))  # fmt: skip
    x, y, groups = stack([d], kinds=TRAIN_KINDS)
    assert groups == [2, 2, 1, 3]  # the unanswered report is left out
    w = query_weights([d], groups, TRAIN_KINDS, {"docs": 0.5, "test": 0.25, "report": 2.0})
    assert w.tolist() == [1, 1, 0.5, 0.5, 0.25, 2, 2, 2]
    # a group without a weight weighs 1
    assert query_weights([d], groups, TRAIN_KINDS, {}).tolist() == [1.0] * 8


def test_validation_per_kind_group_and_the_choosing_score() -> None:
    d = data([[0, 1], [1, 0], [0, 1], [1, 0]], ("code", "doc-question", "test-name", "report"))
    scores = np.array([2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0])
    m = split_metrics(scores, [d])
    assert m["code"]["mrr@10"] == pytest.approx(0.5)
    assert m["docs"]["mrr@10"] == pytest.approx(1.0)
    assert m["test"]["mrr@10"] == pytest.approx(0.5)
    assert m["report"]["mrr@10"] == pytest.approx(1.0)
    assert "example" not in m  # no such query
    assert m["score"] == pytest.approx((0.5 + 1 + 0.5 + 1) / 4)


def test_held_out_slice_is_by_project() -> None:
    names = [p.name for p in train_projects()]
    held = [n for n in names if held_out(n)]
    assert 0 < len(held) < len(names) // 4
    assert all(held_out(f"{n}@history") == held_out(n) for n in names)


def test_history_projects_are_train_projects_only() -> None:
    train = {p.name for p in train_projects()}
    held = {p.name.lower() for p in protocol_projects() if p.split != "train"}
    assert set(HISTORIES) <= train
    assert not set(HISTORIES) & (held | set(reserved_names()))


def test_file_ranker_histories_are_never_validation_test_or_reserved() -> None:
    from lab.train.file_ranker import MORE_HISTORIES, file_histories

    held = {p.name.lower() for p in protocol_projects() if p.split != "train"}
    assert set(HISTORIES) < set(file_histories())
    names = set(file_histories()) | {r.split("/")[1].lower() for r in file_histories().values()}
    assert not names & (held | set(reserved_names()))
    assert {"tornado", "isort"} <= set(MORE_HISTORIES)


def test_find_git_dir(tmp_path) -> None:
    import subprocess

    assert find_git_dir(tmp_path, "a/b") is None
    subprocess.run(["git", "init", "-q", "--bare", str(tmp_path / "a+b" / "repo")], check=True)
    assert find_git_dir(tmp_path, "a/b") is not None
