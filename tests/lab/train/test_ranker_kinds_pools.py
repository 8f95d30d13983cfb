"""ranker_kinds.extra_data on a tiny real repository: the test-name and guide-sentence
queries become labelled pools (real index, real pipeline), the guide sentence is cut from
the corpus once, and a second call reads the cache."""

from __future__ import annotations

import numpy as np
from repo_fixtures import make_repo

from lab.train.ranker_kinds import extra_data
from llmc.corpora import Project
from llmc.search.features import FEATURES, SHAPE_FEATURES, query_shape

FILES = {
    "src/geo/units.py": (
        "def km_to_miles(km):\n    return km * 0.621371\n\n\n"
        "def miles_to_km(miles):\n    return miles / 0.621371\n"
    ),
    "src/geo/distance.py": (
        "def manhattan(a, b):\n    return sum(abs(x - y) for x, y in zip(a, b))\n"
    ),
    "tests/test_units.py": (
        "from geo.units import km_to_miles, miles_to_km\n\n\n"
        "def test_miles_round_trip():\n"
        '    """Converting kilometres to miles and back gives the same length."""\n'
        "    assert round(miles_to_km(km_to_miles(3.0)), 6) == 3.0\n"
    ),
    "docs/guide.md": (
        "# Guide\n\n## Grids\n\nOn a grid the distance between two points is the sum of the "
        "steps along each axis, and nothing else counts here at all.\n"
        "To measure how far apart two cells of a city grid are, call it like this:\n\n"
        "```python\nmanhattan([0, 0], [3, 4])\n```\n\n"
        "The result is a whole number of steps when the points are whole numbers too.\n"
    ),
}


def test_extra_data_pools_test_names_and_guide_sentences(tmp_path) -> None:
    original = make_repo(tmp_path / "original", FILES)
    work = tmp_path / "work"
    make_repo(work / "corpus", {**FILES, "tests/test_units.py": FILES["tests/test_units.py"]
              .replace('    """Converting kilometres to miles and back gives the same length."""\n',
                       "\n")})  # fmt: skip  # the corpus is stripped of docstrings
    project = Project("geo", "1.0", "0" * 64)
    opts = dict(max_test_queries=5, max_example_queries=5, seed=0, depth=50)
    data = extra_data(project, "train", original, work, **opts)
    assert data is not None
    assert sorted(data.kinds) == ["guide-sentence", "test-name"]
    by_kind = dict(zip(data.kinds, data.queries, strict=True))
    # the test's docstring (from the original) is the query
    assert by_kind["test-name"] == "converting kilometres to miles and back gives the same length"
    assert by_kind["guide-sentence"].startswith("To measure how far apart two cells")
    # the sentence is cut from the corpus, its line kept
    guide = (work / "corpus" / "docs/guide.md").read_text().split("\n")
    assert len(guide) == len(FILES["docs/guide.md"].split("\n"))
    assert "how far apart" not in "\n".join(guide)
    # every query's answer is in its pool, and the shape columns are the whole query's
    labels = np.asarray(data.labels)
    matrix = np.asarray(data.matrix)
    start = 0
    for q, g in zip(data.queries, data.groups, strict=True):
        assert labels[start : start + g].max() == 1, q
        shape = query_shape(q)
        for f in SHAPE_FEATURES:
            assert matrix[start, FEATURES.index(f)] == np.float32(shape[f])
        start += g
    # cached: the same data again, the corpus not cut twice
    again = extra_data(project, "train", original, work, **opts)
    assert again is not None and again.queries == data.queries
    assert (work / "corpus" / "docs/guide.md").read_text().split("\n") == guide
