"""Dense search from the vectors kept in memory (``Sources.knn`` over
``llmc.store.vectors.VectorMatrix``): the same answers as sqlite-vec's KNN (which a
Searcher's first query uses when it was not warmed), and it follows the index when another
process reindexes. Real model, fixture repo."""

from __future__ import annotations

import copy

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.config import load_config
from llmc.search import Searcher
from llmc.types import CODE, DOC

QUERIES = (
    "ShoppingCart",
    "refund a payment",
    "how do I install the toolkit with pip",
    "discount codes",
    "compute_legacy_vat value added tax",
    "where is the order total computed",
)


def dense_only(root) -> Searcher:
    cfg = copy.deepcopy(load_config(root))
    cfg.search.bm25 = False
    cfg.search.exact_symbol = False
    return Searcher(root, cfg)


def answer(response) -> list[tuple]:
    return [(r.path, r.start_line, r.end_line, r.sources) for r in response.results]


def test_same_results_as_sqlite_vec_knn(indexed_repo) -> None:
    cfg = load_config(indexed_repo)
    with Searcher(indexed_repo, cfg) as warm, Searcher(indexed_repo, cfg) as scan:
        warm.warm()  # the vectors in memory from the first query on
        scan.sources.knn = lambda category, vector, k: scan.sources.store.knn(category, vector, k)
        for query in QUERIES:
            a, b = warm.search(query), scan.search(query)
            assert answer(a) == answer(b), query
            assert [r.score for r in a.results] == pytest.approx(
                [r.score for r in b.results], abs=1e-4
            )
        for category in (CODE, DOC):
            vector = warm.sources.query_vector("tax", category, _trace())
            assert [i for i, _ in warm.sources.knn(category, vector, 1000)] == [
                i for i, _ in warm.sources.store.knn(category, vector, 1000)
            ]


def _trace():
    from llmc.search.trace import Trace

    return Trace()


NEW_FILE = '''
def convert_celsius_to_fahrenheit(celsius):
    """Temperature conversion: degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 + 32
'''


def test_a_reindex_is_seen_by_a_warm_searcher(repo_copy, isolated_env) -> None:
    query = "convert a temperature from celsius to fahrenheit"
    with dense_only(repo_copy) as s:
        s.warm()
        before = s.search(query)
        assert "src/shop/units.py" not in [r.path for r in before.results]

        (repo_copy / "src" / "shop" / "units.py").write_text(NEW_FILE)
        assert CliRunner().invoke(main, ["index", str(repo_copy), "-q"]).exit_code == 0
        added = s.search(query)
        assert added.results[0].path == "src/shop/units.py"
        assert added.results[0].symbol == "convert_celsius_to_fahrenheit"
        assert all(src.startswith("dense") for r in added.results for src in r.sources)

        (repo_copy / "src" / "shop" / "units.py").unlink()
        (repo_copy / "legacy" / "tax_rules.py").unlink()
        assert CliRunner().invoke(main, ["index", str(repo_copy), "-q"]).exit_code == 0
        removed = s.search(query)
        gone = {"src/shop/units.py", "legacy/tax_rules.py"}
        assert not gone & {r.path for r in removed.results}
        assert removed.warnings == ()  # dropped from the dense list, not at hydration
        live = set(s.sources.store.vector_ids(CODE).tolist())
        vector = s.sources.query_vector(query, CODE, _trace())
        assert {i for i, _ in s.sources.knn(CODE, vector, 1000)} == live


def test_a_one_shot_searcher_answers_like_a_warm_one(indexed_repo) -> None:
    cfg = load_config(indexed_repo)
    with Searcher(indexed_repo, cfg) as warm:
        warm.warm()
        for query in QUERIES:
            with Searcher(indexed_repo, cfg) as once:
                assert answer(once.search(query)) == answer(warm.search(query)), query
