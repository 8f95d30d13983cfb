"""The query's shape features (issue 28) and a ranker model trained on fewer features than
today's: its trees keep their columns, and a model naming an unknown feature is refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from llmc.errors import ModelError
from llmc.search.features import (
    BASE_FEATURES,
    FEATURES,
    SHAPE_FEATURES,
    QueryInfo,
    build_pool,
    query_shape,
    widen,
)
from llmc.search.learned import load_model, model_from_json
from llmc.search.report import read_query
from llmc.search.types import Hit, RankedList, RouteDecision

REPORT = (
    "Crash when loading the config\n\n"
    "When I load my settings file the loader fails with the error below, since 2.1:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/home/x/proj/pkg/config.py", line 85, in load_config\n'
    "    raise ValueError(name)\n"
    "ValueError: bad key\n\n"
    "It looks like `load_config` in pkg/config.py does not accept the `strict` option any "
    "more, which it did before, and the docs still say it does so I am confused here.\n"
)


def decision() -> RouteDecision:
    return RouteDecision("code", 0.8, {"code": 1.0, "docs": 1.0}, 0.6)


def test_shape_of_a_short_question_and_of_a_report() -> None:
    short = query_shape("parse version with epoch")
    assert short == {
        "query:long": 0.0,
        "query:log_chars": pytest.approx(math.log1p(len("parse version with epoch"))),
        "query:code_lines": 0.0,
        "query:trace_lines": 0.0,
        "query:log_names": 0.0,
        "query:paths": 0.0,
        "query:frames": 0.0,
    }
    long = query_shape(REPORT)
    assert long["query:long"] == 1.0
    assert long["query:trace_lines"] >= math.log1p(3)  # Traceback, File, ValueError lines
    assert long["query:frames"] == pytest.approx(math.log1p(1))
    assert long["query:paths"] >= math.log1p(1)
    assert long["query:log_names"] >= math.log1p(2)  # load_config, ValueError, ...
    assert long["query:log_chars"] > short["query:log_chars"] + 2
    # the same function: a short query that quotes a path has it too
    assert query_shape("where is pkg/config.py read")["query:paths"] == pytest.approx(math.log1p(1))


def test_pool_reads_the_shape_of_the_whole_query_not_the_focus() -> None:
    parts = read_query(REPORT)
    lists = [RankedList("bm25", "code", (Hit(1, 2.0), Hit(2, 1.0)))]
    with_parts = build_pool(lists, QueryInfo(parts.focus, decision(), (), parts), {})
    focus_only = build_pool(lists, QueryInfo(parts.focus, decision()), {})
    col = FEATURES.index("query:long")
    assert with_parts.matrix[:, col].tolist() == [1.0, 1.0]
    assert focus_only.matrix[:, col].tolist() == [0.0, 0.0]  # a focus reads as short


def test_widen_recomputes_the_shape_columns_from_the_query_text() -> None:
    queries = ["parse version with epoch", REPORT]
    pools = []
    for q in queries:
        lists = [RankedList("bm25", "code", (Hit(1, 2.0), Hit(2, 1.0), Hit(3, 0.5)))]
        pools.append(build_pool(lists, QueryInfo(q, decision(), (), read_query(q)), {}).matrix)
    full = np.concatenate(pools)
    base = full[:, [FEATURES.index(f) for f in BASE_FEATURES]]
    again = widen(base, BASE_FEATURES, queries, [3, 3])
    assert again.shape == full.shape
    assert np.allclose(again, full)
    with pytest.raises(ValueError, match="lacks"):
        widen(base[:, 1:], BASE_FEATURES[1:], queries, [3, 3])


def _stump(features, name: str, threshold: float) -> dict:
    return {
        "format": "llmc-ranker-v1",
        "features": list(features),
        "depth": 1,
        "trees": [
            {
                "feature": [list(features).index(name), -1, -1],
                "threshold": [threshold, 0, 0],
                "left": [1, 0, 0],
                "right": [2, 0, 0],
                "value": [0.0, -1.0, 1.0],
            }
        ],
    }


def test_a_model_over_fewer_features_reads_its_own_columns(tmp_path) -> None:
    # trained before the shape features, in an order of its own: overlap:path first
    older = ["overlap:path", *[f for f in BASE_FEATURES if f != "overlap:path"]]
    model = model_from_json(_stump(older, "overlap:path", 0.5))
    assert model.features == FEATURES and model.trained_on == tuple(older)
    x = np.zeros((2, len(FEATURES)), dtype=np.float32)
    x[1, FEATURES.index("overlap:path")] = 1.0
    x[:, FEATURES.index("query:long")] = 1.0  # a column it never saw changes nothing
    assert model.predict(x).tolist() == [-1.0, 1.0]
    assert model.contributions(x[1]) == {"overlap:path": 1.0}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_stump(older, "overlap:path", 0.5)))
    assert load_model(str(path)).predict(x).tolist() == [-1.0, 1.0]


def test_a_model_naming_an_unknown_feature_is_refused(tmp_path) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps(_stump([*FEATURES, "query:from_the_future"], "path:test", 0.5)))
    with pytest.raises(ModelError, match="query:from_the_future"):
        load_model(str(path))


def test_the_shape_columns_are_the_last_ones() -> None:
    assert FEATURES[-len(SHAPE_FEATURES) :] == SHAPE_FEATURES
    assert FEATURES[: len(BASE_FEATURES)] == BASE_FEATURES
