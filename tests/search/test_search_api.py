"""The Searcher API the eval runner and the daemon use: reuse, ablations, stale and
damaged indexes, errors. Real model, fixture repo indexed once per session."""

from __future__ import annotations

import copy
import shutil

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.config import load_config
from llmc.errors import IndexMissingError, LlmcError
from llmc.search import Searcher, SearchResponse


@pytest.fixture(scope="module")
def searcher(indexed_repo):
    with Searcher(indexed_repo, load_config(indexed_repo)) as s:
        yield s


def paths_of(response: SearchResponse) -> list[str]:
    return [r.path for r in response.results]


def test_reusable_and_models_load_once(searcher) -> None:
    searcher.warm()
    embedders = dict(searcher.sources.embedders)
    first = searcher.search("ShoppingCart")
    second = searcher.search("how do I install the toolkit with pip", k=3)
    assert first.results[0].symbol == "ShoppingCart"
    assert second.results[0].symbol == "Installing with pip"
    assert len(second.results) == 3
    assert searcher.sources.embedders == embedders  # same objects, nothing reloaded
    store, lexical = searcher.sources.store, searcher.sources.lexical
    searcher.search("discount codes")
    assert (searcher.sources.store, searcher.sources.lexical) == (
        store,
        lexical,
    )  # opened once, reused
    assert "open" in second.timings_ms


def test_result_fields(searcher) -> None:
    r = searcher.search("total_price").results[0]
    assert (r.path, r.start_line, r.end_line, r.symbol, r.kind, r.lang) == (
        "src/shop/cart.py", 19, 21, "total_price", "method", "python",
    )  # fmt: skip
    assert r.qualname == "ShoppingCart.total_price"
    assert r.category == "code" and r.span_id > 0
    assert r.snippet_start_line == 19


@pytest.mark.parametrize("query", ["zzzz qqqq", "!!!", "🙂", "\x00\x01 x", "a" * 10_000])
def test_a_non_empty_index_never_returns_empty(searcher, query) -> None:
    assert searcher.search(query, k=5).results


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.search(""), "empty query"),
        (lambda s: s.search("cart", k=0), "k must be"),
        (lambda s: s.search("cart", k="3"), "k must be"),
        (lambda s: s.search("cart", route="everything"), "unknown route"),
        (lambda s: s.search(None), "must be text"),
    ],
)
def test_bad_arguments_are_llmc_errors(searcher, call, message) -> None:
    with pytest.raises(LlmcError, match=message):
        call(searcher)


def test_unknown_fusion_in_config(indexed_repo) -> None:
    cfg = load_config(indexed_repo)
    cfg.search.ranker = "fusion"  # the learned ranker never fuses
    cfg.search.fusion = "borda"
    with Searcher(indexed_repo, cfg) as s, pytest.raises(LlmcError, match="unknown fusion"):
        s.search("cart")


def test_missing_index(tmp_path) -> None:
    with pytest.raises(IndexMissingError, match="run `llmc index"):
        Searcher(tmp_path, load_config(tmp_path)).search("cart")


def variant(indexed_repo, **search) -> Searcher:
    cfg = copy.deepcopy(load_config(indexed_repo))
    for key, value in search.items():
        setattr(cfg.search, key, value)
    return Searcher(indexed_repo, cfg)


def test_ablations_are_config_copies(indexed_repo) -> None:
    query = "refund a payment"
    fusion = {"ranker": "fusion"}  # one merged list per retriever, as fusion names them
    with variant(indexed_repo, dense=False, routing=False, exact_symbol=False, **fusion) as s:
        bm25_only = s.search(query)
    with variant(indexed_repo, bm25=False, routing=False, exact_symbol=False, **fusion) as s:
        dense_only = s.search(query)
    assert {src for r in bm25_only.results for src in r.sources} == {"bm25"}
    assert {src for r in dense_only.results for src in r.sources} == {"dense"}
    assert bm25_only.route.source == "off" and "embed" not in bm25_only.timings_ms
    assert "bm25" not in dense_only.timings_ms
    assert "refund_payment" in [r.symbol for r in bm25_only.results[:5]]
    assert "refund_payment" in [r.symbol for r in dense_only.results[:5]]


def test_bm25_only_can_be_empty_and_says_why(indexed_repo) -> None:
    with variant(indexed_repo, dense=False) as s:
        response = s.search("zzzz qqqq")
    assert response.results == ()
    assert any("no indexed span matches" in w for w in response.warnings)


def test_fallback_searches_the_other_route(indexed_repo) -> None:
    # Nothing in the code reaches a cosine of 0.99 and no code mentions pip: the forced
    # code route finds nothing above the floor, so the docs are searched after all.
    with variant(indexed_repo, dense_floor=0.99) as s:
        response = s.search("Installing with pip", route="code")
    assert response.results[0].path == "docs/install.md"
    assert any(r.startswith("fallback: the code route") for r in response.route.reasons)
    assert response.route.weights["docs"] == 1.0


def test_forced_docs_route_pins_no_code(searcher) -> None:
    response = searcher.search("ShoppingCart", route="docs", k=3)
    assert response.route.source == "flag"
    assert not any("exact" in r.sources and r.category == "code" for r in response.results)


def test_deleted_file_is_never_returned(repo_copy, isolated_env) -> None:
    (repo_copy / "legacy" / "tax_rules.py").unlink()
    with Searcher(repo_copy, load_config(repo_copy)) as s:
        before = s.search("compute_legacy_vat value added tax", k=10)
    assert "legacy/tax_rules.py" not in paths_of(before)
    assert before.results  # the rest of the repo still answers
    assert any("deleted since indexing" in w for w in before.warnings)

    assert CliRunner().invoke(main, ["index", str(repo_copy), "-q"]).exit_code == 0
    with Searcher(repo_copy, load_config(repo_copy)) as s:
        after = s.search("compute_legacy_vat value added tax", k=10)
    assert "legacy/tax_rules.py" not in paths_of(after)
    assert after.warnings == ()


def test_stale_lexical_index_still_answers_with_a_warning(repo_copy, isolated_env) -> None:
    lexical = repo_copy / ".llmc" / "lexical"
    old = repo_copy.parent / "old-lexical"
    shutil.copytree(lexical, old)
    (repo_copy / "legacy" / "tax_rules.py").unlink()
    assert CliRunner().invoke(main, ["index", str(repo_copy), "-q"]).exit_code == 0
    shutil.rmtree(lexical)
    shutil.copytree(old, lexical)  # BM25 now still knows the deleted file's span ids

    with Searcher(repo_copy, load_config(repo_copy)) as s:
        response = s.search("compute_legacy_vat", k=10)
    assert response.results
    assert "legacy/tax_rules.py" not in paths_of(response)
    assert any("BM25 results may be stale" in w for w in response.warnings)
    assert any("no longer in the index" in w for w in response.warnings)


def test_model_mismatch_turns_dense_off_with_a_warning(indexed_repo) -> None:
    cfg = copy.deepcopy(load_config(indexed_repo))
    cfg.embedding.code_model = "not-the-indexed/model"
    with Searcher(indexed_repo, cfg) as s:
        response = s.search("refund a payment")
    assert response.results
    assert any("dense search of code spans is off" in w for w in response.warnings)
    assert not any("dense" in r.sources for r in response.results if r.category == "code")


def test_explain_is_only_built_when_asked(searcher) -> None:
    assert searcher.search("cart").explain is None
    explained = searcher.search("cart", explain=True)
    assert explained.explain is not None
    assert len(explained.explain.contributions) == len(explained.results)
    assert "explain" in explained.to_json()


def test_default_pipeline_runs_no_second_stage(searcher) -> None:
    """The defaults run first-stage retrieval only: no cross-encoder, LLM or graph stage
    until one wins on validation projects (its cost is measured in
    benchmarks/bench_guards.py, never asserted in a test)."""
    r = searcher.search("refund a payment")
    assert {"bm25", "embed"} <= set(r.timings_ms)
    assert not {"rerank", "llm_rerank", "graph"} & set(r.timings_ms)


def test_corrupt_database_is_a_clear_error(repo_copy) -> None:
    db = repo_copy / ".llmc" / "index.db"
    for extra in (".llmc/index.db-wal", ".llmc/index.db-shm"):
        (repo_copy / extra).unlink(missing_ok=True)
    db.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(LlmcError, match="index"):
        Searcher(repo_copy, load_config(repo_copy)).search("cart")


def test_missing_lexical_index_degrades_to_dense(repo_copy) -> None:
    shutil.rmtree(repo_copy / ".llmc" / "lexical")
    with Searcher(repo_copy, load_config(repo_copy)) as s:
        response = s.search("refund a payment")
    assert response.results
    assert any("BM25 search is off" in w for w in response.warnings)
    assert not any(src.startswith("bm25") for r in response.results for src in r.sources)


def test_per_route_lists_when_not_merged(indexed_repo) -> None:
    with variant(indexed_repo, merge_routes=False, ranker="fusion") as s:
        response = s.search("how do I configure the database url?", explain=True)
    assert response.results[0].symbol == "Configuration"
    assert set(response.route.list_weights) == {"bm25.doc", "dense.doc"}  # code dropped
    assert set(response.explain.lists) == {"bm25.doc", "dense.doc"}
    assert set(response.results[0].sources) == {"bm25.doc", "dense.doc"}


@pytest.mark.parametrize(
    "query", ["ShoppingCart total_price", "how is a discount applied", "class ShoppingCart"]
)
def test_a_query_is_read_once(searcher, monkeypatch, query) -> None:
    """One query parse (llmc/search/query.py ``parse``): the router, the exact-symbol path,
    HyDE's gate, the features and the lead stage read one record; the identifier and
    lookup scans run once per search, not once per stage."""
    from llmc.search import query as q

    calls: dict[str, int] = {"identifiers": 0, "lookup_name": 0}

    def counted(name):
        real = getattr(q, name)

        def run(text, *args, **kw):
            if text == query:
                calls[name] += 1
            return real(text, *args, **kw)

        return run

    for name in calls:
        monkeypatch.setattr(q, name, counted(name))
    q.parse.cache_clear()
    assert searcher.search(query).results
    assert calls == {"identifiers": 1, "lookup_name": 1}
    again = q.parse(query)
    assert again is q.parse(query) and again.identifiers == tuple(q.identifiers(query))
