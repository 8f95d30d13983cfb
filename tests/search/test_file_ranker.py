"""The learned file ranker: its features by hand on crafted lists, the shipped model (loads,
reorders only the plain order's head, trusts strong evidence), the switch, the baselines
without it, and `llmc search --files` naming which ranked its files."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.errors import ConfigError
from llmc.search.file_features import CANDIDATES, FILE_FEATURES, feature_rows, path_class
from llmc.search.file_ranker import configured_model, learned_order, load_file_model
from llmc.search.files import group_by_file

COL = {name: i for i, name in enumerate(FILE_FEATURES)}


def test_path_classes() -> None:
    assert path_class("tests/test_parser.py") == "test"
    assert path_class("src/pkg/__tests__/a.js") == "test"
    assert path_class("CHANGES.rst") == "changelog"
    assert path_class("docs/whatsnew/3.2.rst") == "changelog"
    assert path_class("docs/guide.md") == "doc"
    assert path_class("pyproject.toml") == "config"
    assert path_class("setup.py") == "config"
    assert path_class("src/pkg/parser.py") == "code"


def test_feature_rows_by_hand() -> None:
    spans = ["pkg/lexer.py", "docs/lexer.md", "pkg/lexer.py", "tests/test_lexer.py", "pkg/util.py"]
    whole = ["pkg/util.py", "pkg/lexer.py"]
    order = ["pkg/lexer.py", "docs/lexer.md", "pkg/util.py", "tests/test_lexer.py"]
    query = (
        "Lexer drops the last token\n\nTraceback (most recent call last):\n"
        '  File "/home/x/venv/site-packages/pkg/util.py", line 12, in split\nValueError: x'
    )
    rows = feature_rows(query, spans, whole, order)
    lexer, doc, util, test = rows
    assert lexer[COL["file:fused_rank"]] == 1 and util[COL["file:fused_rank"]] == 3
    assert lexer[COL["file:best_span_log"]] == 0.0  # log(1)
    assert util[COL["file:best_span_log"]] == pytest.approx(math.log(5))
    assert lexer[COL["file:spans"]] == 2 and lexer[COL["file:spans_top10"]] == 2
    assert lexer[COL["file:span_rr"]] == pytest.approx(1 / 11 + 1 / 13)
    assert util[COL["file:whole_rank"]] == 1 and doc[COL["file:whole_rank"]] == 21
    assert doc[COL["file:in_whole"]] == 0 and lexer[COL["file:in_whole"]] == 1
    assert doc[COL["path:doc"]] == 1 and test[COL["path:test"]] == 1 and util[COL["path:code"]] == 1
    assert lexer[COL["query:names_stem"]] == 1 and test[COL["query:names_stem"]] == 0
    assert doc[COL["query:names_dir"]] == 0 and util[COL["query:names_dir"]] == 1  # "pkg"
    assert util[COL["query:names_path"]] == 1  # the frame's path ends with it
    assert lexer[COL["query:names_path"]] == 0
    assert lexer[COL["query:traceback"]] == 1
    assert util[COL["file:same_dir_as_first"]] == 1 and doc[COL["file:same_dir_as_first"]] == 0
    assert lexer[COL["path:depth"]] == 1
    assert all(len(r) == len(FILE_FEATURES) for r in rows)


def test_a_path_is_named_at_a_path_boundary_only() -> None:
    from llmc.search.file_features import names_path

    frames = ["/home/x/venv/site-packages/pkg/data.py"]
    assert names_path("", "pkg/data.py", frames)
    assert not names_path("", "a.py", frames)  # "a.py" is the tail of "data.py", not a file
    assert not names_path("", "pkg/a.py", ["/srv/pkg/data.py"])
    assert names_path("", "src/pkg/mod.py", ["pkg/mod.py"])  # a frame relative to src/
    assert names_path("see pkg/mod.py: it breaks", "pkg/mod.py", [])
    assert names_path("in c:\\work\\pkg\\mod.py, line 3", "pkg/mod.py", [])
    assert names_path("edit `mod.py`.", "mod.py", [])
    assert not names_path("the data.py module", "a.py", [])
    assert not names_path("mod.pyc is stale", "mod.py", [])
    assert not names_path("my-mod.py fails", "mod.py", [])


def test_the_shipped_model_loads_over_these_features() -> None:
    model = load_file_model()
    assert model.features == FILE_FEATURES and model.trees > 10
    assert model.report["train"]["queries"] > 500
    # trained on train projects' histories only
    from lab.protocol.splits import protocol_projects

    held_out = {p.name for p in protocol_projects() if p.split in ("validation", "test")}
    assert not set(model.report["train"]["projects"]) & held_out
    assert configured_model("fusion") is None and configured_model("learned") is model
    with pytest.raises(ConfigError, match="search.file_ranker must be one of"):
        configured_model("best")


def test_learned_order_reorders_only_the_head_and_trusts_strong_evidence() -> None:
    model = load_file_model()
    # a.py: far down the span list, not named; b.py: the best span, many spans, named in the
    # query by path and stem, first in the whole-file list
    spans = ["b.py", "b.py", "b.py", "c.md", "b.py"] + [f"f{i}.py" for i in range(60)] + ["a.py"]
    order = ["a.py", "b.py"] + [f"f{i}.py" for i in range(60)]
    query = "b.py crashes: the b parser fails on an empty line"
    ranked, scores = learned_order(model, query, spans, ["b.py"], order)
    assert ranked.index("b.py") < ranked.index("a.py")
    assert sorted(ranked) == sorted(order) and ranked[CANDIDATES:] == order[CANDIDATES:]
    assert set(scores) == set(order[:CANDIDATES])
    same, none = learned_order(model, query, spans, [], ["only.py"])
    assert same == ["only.py"] and none == {}


def _span(path: str, start: int) -> SimpleNamespace:
    return SimpleNamespace(path=path, start_line=start, end_line=start + 1, score=1.0)


def test_group_by_file_takes_the_ranker_order_and_scores() -> None:
    model = load_file_model()
    spans = [_span(p, i) for i, p in enumerate(["x.py", "docs/y.md", "z.py", "x.py"], 1)]
    query = "z.py raises ValueError when z is empty"
    plain = group_by_file(spans, 3)
    ranked = group_by_file(spans, 3, query=query, ranker=model)
    want, scores = learned_order(model, query, [s.path for s in spans], [], [h.path for h in plain])
    assert [h.path for h in ranked] == want[:3]
    assert [h.score for h in ranked] == [pytest.approx(scores[p]) for p in want[:3]]
    assert [h.path for h in group_by_file(spans, 3, ranker=model)] == [h.path for h in plain]


def test_the_dumped_trees_predict_as_lightgbm_does() -> None:
    from lab.train.file_ranker import FileQuery, fit
    from lab.train.ranker_dump import check_dump, dump_model
    from llmc.search.learned import model_from_json

    rng = np.random.default_rng(0)
    queries = []
    for _ in range(40):
        order = [f"f{i}.py" for i in range(8)]
        rows = rng.random((8, len(FILE_FEATURES))).tolist()
        good = int(np.argmax([r[0] for r in rows]))
        queries.append(FileQuery("p", "commit", order, rows, {order[good]: 3}))
    booster = fit(queries, threads=1).booster_
    dumped = dump_model(booster, {"test": True}, FILE_FEATURES)
    matrix = np.vstack([np.asarray(q.rows) for q in queries])
    assert check_dump(dumped, booster, matrix, FILE_FEATURES) < 1e-9
    assert model_from_json(dumped, known=FILE_FEATURES).features == FILE_FEATURES


def test_baselines_rank_files_without_it() -> None:
    from llmc.config import load_config
    from llmc.eval.runner import variant_config

    cfg = load_config(None)
    assert variant_config(cfg, "default").search.file_ranker == "learned"
    for system in ("bm25-only", "dense-only", "rrf"):
        assert variant_config(cfg, system).search.file_ranker == "fusion"


def test_cli_files_says_which_ranker_ordered_them(
    runner: CliRunner, indexed_repo, monkeypatch
) -> None:
    args = ["search", "--json", "--files", "--repo", str(indexed_repo), "-k", "3"]
    out = json.loads(runner.invoke(main, [*args, "apply_discount total_price"]).stdout)
    assert out["file_ranker"] == "learned" and out["files"][0]["path"] == "src/shop/cart.py"
    monkeypatch.setenv("LLMC_SEARCH__FILE_RANKER", "fusion")
    plain = json.loads(runner.invoke(main, [*args, "apply_discount total_price"]).stdout)
    assert plain["file_ranker"] == "fusion" and plain["files"][0]["path"] == "src/shop/cart.py"
    monkeypatch.setenv("LLMC_SEARCH__FILE_RANKER", "best")
    bad = runner.invoke(main, [*args, "apply_discount"])
    assert bad.exit_code != 0 and "search.file_ranker must be one of" in bad.output


def test_a_model_over_unknown_features_is_refused_with_the_command_to_run(tmp_path) -> None:
    from llmc.errors import ModelError
    from llmc.search.file_ranker import DEFAULT_MODEL

    shipped = json.loads(DEFAULT_MODEL.read_text(encoding="utf-8"))
    shipped["features"] = [*FILE_FEATURES[:-1], "file:from_the_future"]
    path = tmp_path / "model.json"
    path.write_text(json.dumps(shipped), encoding="utf-8")
    with pytest.raises(ModelError, match="python -m lab train file-ranker"):
        load_file_model(path)
    with pytest.raises(ModelError, match="not found"):
        load_file_model(tmp_path / "none.json")


def test_a_missing_model_leaves_the_fused_order_with_a_warning(
    runner: CliRunner, indexed_repo, monkeypatch, tmp_path, caplog
) -> None:
    from llmc.search import file_ranker

    monkeypatch.setattr(file_ranker, "DEFAULT_MODEL", tmp_path / "gone.json")
    assert file_ranker.configured_model("learned") is None
    assert "keep the fused order" in caplog.text
    args = ["search", "--json", "--files", "--repo", str(indexed_repo), "-k", "3"]
    result = runner.invoke(main, [*args, "apply_discount total_price"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["file_ranker"] == "fusion" and out["files"][0]["path"] == "src/shop/cart.py"


def test_training_rows_are_the_query_time_rows_and_scores_by_hand() -> None:
    from lab.train.file_ranker import query_rows, scores

    class Fake:
        cfg = SimpleNamespace(search=SimpleNamespace(file_bm25_weight=0.2))

        def search(self, query, k=None):
            return SimpleNamespace(results=[_span(p, 1) for p in ("a.py", "b.py", "a.py")])

        def whole_files(self, query):
            return ["c.py"]

        def plain_files(self, query):
            return ["b.py", "c.py"]

    fq = query_rows(Fake(), "b crashes", {"b.py": 3}, "p", "commit", ["b.py"])
    # a.py 1/11, b.py 1/12, c.py only in the whole-file list 0.2/11
    assert fq.order == ["a.py", "b.py", "c.py"]
    want = feature_rows("b crashes", ["a.py", "b.py", "a.py"], ["c.py"], fq.order, ["b.py", "c.py"])
    assert fq.rows == want
    plain = scores([fq])["commit"]
    assert plain["acc@1"] == 0 and plain["acc@5"] == 1 and plain["mrr@10"] == 0.5
    assert plain["ndcg@10"] == pytest.approx(7 / math.log2(3) / 7, abs=1e-4) and plain["n"] == 1


def test_a_search_keeps_its_plain_rrf_order_for_the_file_answer(indexed_repo) -> None:
    from llmc.config import load_config
    from llmc.search import Searcher

    cfg = load_config(indexed_repo)
    with Searcher(indexed_repo, cfg) as searcher:
        assert searcher.plain_files("apply_discount total_price") == []  # not searched yet
        searcher.search("apply_discount total_price", k=100)
        plain = searcher.plain_files("apply_discount total_price")
        assert plain and all((indexed_repo / p).is_file() for p in plain)
        assert "src/shop/cart.py" in plain[:3]
        assert searcher.plain_files("something else") == []
    with Searcher(indexed_repo, cfg) as searcher:
        searcher.search("fetchOrders", k=10)
        again = searcher.plain_files("fetchOrders")
    fusion = cfg.with_values({"search.file_ranker": "fusion"}, "test")
    with Searcher(indexed_repo, fusion) as searcher:
        searcher.search("fetchOrders", k=10)
        assert searcher.plain_files("fetchOrders") == []  # only the learned file ranker reads it
    assert again[0] == "web/orders.js"
