"""`python -m lab train ranker`'s parts: the project lists, pool metrics, the LightGBM dump, and a
tiny training run on a fixture repo (real index, real pools) whose model ranks the known
answer first."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from repo_fixtures import make_repo

from lab.protocol.splits import protocol_projects
from lab.train.projects import reserved_names
from lab.train.ranker import (
    DOCS_KINDS,
    check_dump,
    dump_model,
    fit,
    masked,
    pool_metrics,
    query_weights,
    split_metrics,
    stack,
    train_projects,
)
from lab.train.ranker_data import ProjectData
from llmc.config import load_config
from llmc.eval.metrics import matches
from llmc.eval.queries import Judgment
from llmc.search import Searcher
from llmc.search.features import FEATURES, MISSING_RANK, QueryInfo, build_pool
from llmc.search.learned import model_from_json, rank_pool
from llmc.search.types import Hit, RankedList, RouteDecision

FILES = {
    "src/geo/distance.py": (
        "import math\n\n\n"
        "def haversine(lat1, lon1, lat2, lon2):\n"
        "    r = 6371.0\n"
        "    p = math.radians(lat2 - lat1)\n"
        "    q = math.radians(lon2 - lon1)\n"
        "    a = math.sin(p / 2) ** 2 + math.cos(lat1) * math.sin(q / 2) ** 2\n"
        "    return 2 * r * math.asin(math.sqrt(a))\n\n\n"
        "def manhattan(a, b):\n"
        "    return sum(abs(x - y) for x, y in zip(a, b))\n"
    ),
    "src/geo/units.py": (
        "def km_to_miles(km):\n    return km * 0.621371\n\n\n"
        "def miles_to_km(miles):\n    return miles / 0.621371\n"
    ),
    "tests/test_distance.py": (
        "from geo.distance import haversine, manhattan\n\n\n"
        "def test_haversine():\n    assert haversine(0, 0, 0, 0) == 0\n\n\n"
        "def test_manhattan():\n    assert manhattan([0, 0], [1, 1]) == 2\n"
    ),
    "docs/guide.md": (
        "# Guide\n\n## Distances\n\nThe geo package measures distances between points "
        "on a sphere and on a grid, in kilometres or miles.\n\n## Units\n\n"
        "Convert between kilometres and miles with the unit helpers.\n"
    ),
}
QUERIES = {  # query -> (path, first line, last line) of the answer
    "great circle distance between two coordinates on the earth": ("src/geo/distance.py", 4, 9),
    "sum of absolute differences of two vectors": ("src/geo/distance.py", 12, 13),
    "convert a length from kilometres into miles": ("src/geo/units.py", 1, 2),
}


def test_train_projects_are_pinned_and_held_out() -> None:
    projects = train_projects()
    assert len(projects) >= 50
    held = {p.name.lower() for p in protocol_projects() if p.split != "train"}
    names = [p.name.lower() for p in projects]
    assert len(set(names)) == len(names)
    assert not set(names) & (held | set(reserved_names()))
    assert all(re.fullmatch(r"[0-9a-f]{64}", p.sha256) for p in projects)


def data(scores_labels: list[list[int]], kinds: tuple[str, ...] = ()) -> ProjectData:
    labels = [y for q in scores_labels for y in q]
    return ProjectData(
        "p", "validation", np.zeros((len(labels), len(FEATURES)), np.float32),
        np.asarray(labels, np.int8), tuple(len(q) for q in scores_labels),
        tuple(f"q{i}" for i in range(len(scores_labels))),
        kinds or ("code",) * len(scores_labels), 10, "m", 0.0,
    )  # fmt: skip


def test_pool_metrics_by_hand() -> None:
    d = data([[0, 1, 0], [0, 0, 0], [1, 0]])
    scores = np.array([3.0, 2.0, 1.0, 1.0, 2.0, 3.0, 1.0, 0.5])
    m = pool_metrics(scores, [d])
    assert m["queries"] == 3
    assert m["mrr@10"] == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert m["hit@5"] == pytest.approx(2 / 3)
    x, y, groups = stack([d])
    assert groups == [3, 2] and x.shape[0] == 5  # the unanswered query is left out


def test_metrics_and_stack_by_kind() -> None:
    d = data([[0, 1, 0], [1, 0], [0, 1]], ("code", "doc-sentence", "doc-title"))
    scores = np.array([3.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0])
    assert pool_metrics(scores, [d], ("code",))["mrr@10"] == pytest.approx(1 / 2)
    docs = pool_metrics(scores, [d], DOCS_KINDS)
    assert docs["queries"] == 2 and docs["mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    m = split_metrics(scores, [d])
    assert m["score"] == pytest.approx((1 / 2 + 3 / 4) / 2)
    x, y, groups = stack([d], kinds=("code", "doc-title"))
    assert groups == [3, 2]  # the doc-sentence query is left out
    w = query_weights([d], groups, ("code", "doc-title"), 0.5)
    assert w.tolist() == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert query_weights([d], groups, ("code", "doc-title"), 1.0) is None


def test_masked_sets_missing_values() -> None:
    x = np.ones((2, len(FEATURES)), np.float32)
    out = masked(x, "bm25")
    assert out[0, FEATURES.index("bm25.code:rank")] == MISSING_RANK
    assert out[0, FEATURES.index("dense.code:rank")] == 1


@pytest.fixture(scope="module")
def fixture_pools(tmp_path_factory):
    from click.testing import CliRunner

    from llmc.cli import main

    root = make_repo(tmp_path_factory.mktemp("geo"), FILES)
    result = CliRunner().invoke(main, ["index", str(root), "-q"])
    assert result.exit_code == 0, result.output
    cfg = copy.deepcopy(load_config(root))
    cfg.search.ranker = "learned"
    cfg.search.hyde = False
    rows, labels, groups = [], [], []
    with Searcher(root, cfg) as s:
        for query, (path, a, b) in QUERIES.items():
            pool = s.candidate_pool(query)
            meta = s._ranker.meta.get(s.sources.store, pool.span_ids)
            j = Judgment(path, 3, a, b)
            rows.append(pool.matrix)
            labels += [int(i in meta and matches(meta[i], j)) for i in pool.span_ids]
            groups.append(len(pool))
    return np.concatenate(rows), np.asarray(labels), groups


def test_tiny_training_run_ranks_the_answer_first(fixture_pools) -> None:
    x, y, groups = fixture_pools
    assert y.sum() >= len(QUERIES)  # every answer is in its pool
    params = {"num_leaves": 4, "learning_rate": 0.3, "min_data_in_leaf": 2,
              "bagging_fraction": 1.0, "feature_fraction": 1.0}  # fmt: skip
    booster = fit((x, y, groups), (x, y, groups), params, threads=1, seed=0)
    model_json = dump_model(booster, {"test": True})
    assert check_dump(model_json, booster, x) < 1e-6
    model = model_from_json(model_json)
    start = 0
    for g in groups:
        scores = model.predict(x[start : start + g])
        assert y[start + int(np.argmax(scores))] == 1
        start += g


def test_dump_of_a_stump_and_rank_pool() -> None:
    lists = [RankedList("bm25", "code", (Hit(1, 2.0), Hit(2, 1.0)))]
    d = RouteDecision("code", 0.9, {"code": 1.0}, 0.8)
    pool = build_pool(lists, QueryInfo("q", d), {})
    stump = {"format": "llmc-ranker-v1", "features": list(FEATURES), "depth": 1,
             "trees": [{"feature": [-1], "threshold": [0.0], "left": [0], "right": [0],
                        "value": [0.25]}]}  # fmt: skip
    ranked, _ = rank_pool(pool, model_from_json(stump))
    assert [c.span_id for c in ranked] == [1, 2]  # ties: best rank first
    assert ranked[0].score == pytest.approx(0.25)
