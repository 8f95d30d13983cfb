"""`llmc search` end to end through CliRunner, on the indexed fixture repo (real model)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from search_fixture_files import line_of

from llmc.cli import main

RESULT_KEYS = {"path", "start_line", "end_line", "symbol", "kind", "lang", "score", "sources",
               "snippet"}  # fmt: skip
RESPONSE_KEYS = {"query", "route", "results", "timings_ms", "took_ms", "warnings", "match"}


def search_json(runner: CliRunner, repo, *args: str) -> dict:
    result = runner.invoke(main, ["search", "--json", "--repo", str(repo), *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().split("\n")
    assert len(lines) == 1
    return json.loads(lines[0])


@pytest.mark.parametrize(
    "query, path, start, end, kind",
    [
        ("ShoppingCart", "src/shop/cart.py", line_of("src/shop/cart.py", "@dataclass"), 21,
         "class"),
        ("apply_discount", "src/shop/cart.py", 24, 29, "function"),
        ("ShoppingCart.total_price", "src/shop/cart.py", 19, 21, "method"),
        ("fetchOrders", "web/orders.js", 1, 7, "function"),
        ("StartServer", "server/main.go", line_of("server/main.go", "func StartServer"), 11,
         "function"),
        ("where is compute_legacy_vat defined?", "legacy/tax_rules.py", 1, 3, "function"),
    ],
)  # fmt: skip
def test_exact_symbol_is_first(runner, indexed_repo, query, path, start, end, kind) -> None:
    out = search_json(runner, indexed_repo, query, "-k", "5")
    top = out["results"][0]
    got = (top["path"], top["start_line"], top["end_line"], top["kind"])
    assert got == (path, start, end, kind)
    assert "exact" in top["sources"]
    assert out["route"]["intent"] == "code"


@pytest.mark.parametrize(
    "query, path, start, end, symbol",
    [
        ("how do I install the toolkit with pip", "docs/install.md", 5, 10,
         "Installing with pip"),
        ("how do I configure the database url?", "docs/install.md", 12, 15, "Configuration"),
        ("what are the best practices for discount codes", "docs/discounts.md", 6, 9,
         "Best practices"),
    ],
)  # fmt: skip
def test_doc_question_puts_the_doc_section_on_top(
    runner, indexed_repo, query, path, start, end, symbol
) -> None:
    out = search_json(runner, indexed_repo, query)
    top = out["results"][0]
    assert (top["path"], top["start_line"], top["end_line"], top["symbol"]) == (
        path, start, end, symbol,
    )  # fmt: skip
    assert top["kind"] == "section" and top["lang"] == "markdown"
    assert out["route"]["intent"] == "docs"


def test_json_shape(runner, indexed_repo) -> None:
    out = search_json(runner, indexed_repo, "refund a payment", "-k", "3")
    assert set(out) == RESPONSE_KEYS
    assert out["query"] == "refund a payment"
    assert set(out["route"]) >= {"intent", "p_code", "confidence", "weights", "reasons"}
    assert len(out["results"]) == 3
    for r in out["results"]:
        assert set(r) == RESULT_KEYS
        assert not r["path"].startswith("/") and "\\" not in r["path"]
        assert 1 <= r["start_line"] <= r["end_line"]
        assert r["snippet"]
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)
    timings = set(out["timings_ms"])
    assert {"exact", "route", "bm25", "embed", "dense", "results"} <= timings
    assert {"features", "ranker"} <= timings  # the learned ranker, the default
    assert isinstance(out["took_ms"], float) and out["took_ms"] >= 0  # reported
    top = out["results"][0]
    assert (top["path"], top["symbol"]) == ("src/shop/payment.py", "refund_payment")


def test_snippet_holds_the_span_lines(runner, indexed_repo) -> None:
    out = search_json(runner, indexed_repo, "apply_discount", "-k", "1")
    snippet = out["results"][0]["snippet"].split("\n")
    assert snippet[0] == "def apply_discount(total: float, code: str) -> float:"
    assert snippet[-1] == "    return total * (100 - percent) / 100"


def test_batch_mode_one_line_per_query_in_order(runner, indexed_repo) -> None:
    queries = ["StartServer", "how do I install the toolkit with pip", "fetchOrders",
               "refund a payment", "discount codes"]  # fmt: skip
    result = runner.invoke(
        main,
        ["search", "--json", "--repo", str(indexed_repo), "-k", "10", "-"],
        input="\n".join(queries) + "\n",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.rstrip("\n").split("\n")
    assert len(lines) == len(queries)
    objects = [json.loads(line) for line in lines]
    assert [o["query"] for o in objects] == queries
    assert all(1 <= len(o["results"]) <= 10 for o in objects)
    assert objects[0]["results"][0]["symbol"] == "StartServer"
    assert objects[2]["results"][0]["symbol"] == "fetchOrders"


def test_batch_mode_bad_lines_keep_their_place(runner, indexed_repo) -> None:
    stdin = b"fetchOrders\n\n\xff\xfe\x00garbage \x80\x81\n!!!???\n"
    result = runner.invoke(
        main, ["search", "--json", "--repo", str(indexed_repo), "-k", "3", "-"], input=stdin
    )
    lines = [json.loads(line) for line in result.stdout.rstrip("\n").split("\n")]
    assert len(lines) == 4
    assert lines[0]["results"][0]["symbol"] == "fetchOrders"
    assert lines[1]["results"] == [] and "blank line" in lines[1]["warnings"][0]
    assert lines[2]["query"] == "garbage" and lines[2]["results"]
    assert lines[3]["results"]
    assert result.exit_code == 0, result.stderr  # a blank line is no failed query


def test_human_output_without_color(runner, indexed_repo) -> None:
    result = runner.invoke(main, ["search", "ShoppingCart", "-k", "2", "--repo", str(indexed_repo)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "\x1b[" not in out
    first = out.split("\n")[0]
    assert first.startswith(" 1. src/shop/cart.py:6-21") and "ShoppingCart" in first
    assert " 7 │ class ShoppingCart:" in out
    assert " 2. " in out


def test_explain_human(runner, indexed_repo) -> None:
    result = runner.invoke(
        main,
        [
            "search",
            "where is the refund implemented",
            "--explain",
            "--fusion",
            "rrf",
            "--repo",
            str(indexed_repo),
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("route code")
    assert "code cue 'where is'" in out
    for part in ("bm25 top", "dense top", "fusion rrf", "timings ms"):
        assert part in out


def test_explain_json_has_lists_and_rrf_contributions(runner, indexed_repo) -> None:
    # Fusion's own scores: the cross-encoder (on by default) would rescore the top.
    out = search_json(
        runner,
        indexed_repo,
        "where is the refund implemented",
        "--explain",
        "--no-rerank",
        "--fusion",
        "rrf",
    )
    ex = out["explain"]
    assert {"bm25", "dense"} <= set(ex["lists"])  # code and docs hits merged by score
    assert ex["fusion"] == "rrf"
    weights = out["route"]["list_weights"]
    first = ex["results"][0]
    for name, contribution in first["contributions"].items():
        assert contribution == pytest.approx(weights[name] / (60 + first["ranks"][name]), abs=1e-6)
    total = sum(first["contributions"].values())
    assert total == pytest.approx(out["results"][0]["score"], abs=1e-5)
    hit = ex["lists"]["bm25"][0]
    assert {"rank", "path", "start_line", "end_line", "symbol", "score"} <= set(hit)
    assert any(s["stage"] == "route" for s in ex["stages"])


def test_stage_switches(runner, indexed_repo) -> None:
    no_dense = search_json(runner, indexed_repo, "refund a payment", "--no-dense")
    assert no_dense["results"]
    assert not any(s.startswith("dense") for r in no_dense["results"] for s in r["sources"])
    assert "embed" not in no_dense["timings_ms"]
    no_bm25 = search_json(runner, indexed_repo, "refund a payment", "--no-bm25")
    assert not any(s.startswith("bm25") for r in no_bm25["results"] for s in r["sources"])
    no_routing = search_json(runner, indexed_repo, "how do I install it", "--no-routing")
    assert no_routing["route"]["source"] == "off"
    assert no_routing["route"]["weights"] == {"code": 1.0, "docs": 1.0, "tests": 1.0}
    no_exact = search_json(runner, indexed_repo, "ShoppingCart", "--no-exact")
    assert not any("exact" in r["sources"] for r in no_exact["results"])


def test_route_and_fusion_flags(runner, indexed_repo) -> None:
    docs = search_json(runner, indexed_repo, "discount codes", "--route", "docs", "-k", "3")
    assert docs["route"]["intent"] == "docs" and docs["route"]["source"] == "flag"
    assert all(r["path"].endswith(".md") for r in docs["results"])
    weighted = search_json(runner, indexed_repo, "refund a payment", "--fusion", "weighted")
    assert weighted["results"][0]["symbol"] == "refund_payment"
    assert weighted["results"][0]["score"] > 0.5  # normalised scores, not RRF's ~0.03
    bad = runner.invoke(main, ["search", "x", "--fusion", "borda", "--repo", str(indexed_repo)])
    assert bad.exit_code == 2 and "borda" in bad.output


def test_k_limits_results(runner, indexed_repo) -> None:
    assert len(search_json(runner, indexed_repo, "cart", "-k", "2")["results"]) == 2
    bad = runner.invoke(main, ["search", "cart", "-k", "0", "--repo", str(indexed_repo)])
    assert bad.exit_code == 2


def test_no_index_says_to_run_llmc_index(runner, tmp_path) -> None:
    result = runner.invoke(main, ["search", "anything", "--repo", str(tmp_path)])
    assert result.exit_code == 1
    assert "llmc index" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("query", ["", "   ", "\t"])
def test_empty_query_is_one_clear_error(runner, indexed_repo, query) -> None:
    result = runner.invoke(main, ["search", query, "--repo", str(indexed_repo)])
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: empty query")


@pytest.mark.parametrize(
    "query",
    ["!!!???", "()[]{};:,.<>/\\|", "日本語 ünïcödé 🙂", "DROP TABLE spans; --", 'OR AND NOT "*"',
     "x" * 10_000, "cart " * 2_000],
)  # fmt: skip
def test_garbage_queries_give_results(runner, indexed_repo, query) -> None:
    out = search_json(runner, indexed_repo, query, "-k", "3")
    assert 1 <= len(out["results"]) <= 3
    if len(query) > 2000:
        assert any("cut to its first 2000" in w for w in out["warnings"])


def test_test_files_yield_unless_the_query_asks_for_tests(runner, indexed_repo) -> None:
    query = "total price of the cart items"  # routing's weights alone, so no rerank
    fused = ("--no-rerank", "--fusion", "rrf")  # route weights are fusion's
    routed = search_json(runner, indexed_repo, query, "-k", "3", *fused)
    unrouted = search_json(runner, indexed_repo, query, "-k", "3", "--no-routing", *fused)
    assert routed["results"][0]["symbol"] == unrouted["results"][0]["symbol"] == "total_price"
    assert routed["route"]["weights"]["tests"] == 0.5
    assert "tests/test_cart.py" not in [r["path"] for r in routed["results"]]
    assert "tests/test_cart.py" in [r["path"] for r in unrouted["results"]]
    asked = search_json(runner, indexed_repo, "tests for apply discount", "-k", "3", "--no-rerank")
    assert asked["results"][0]["path"] == "tests/test_cart.py"
    assert asked["results"][0]["symbol"] == "test_apply_discount_takes_the_percentage_off"


def test_code_moves_into_the_top_3_unless_the_user_routes_to_docs(
    runner, indexed_repo, monkeypatch
) -> None:
    """search.code_in_top: three prose spans on top and code later: the first code result
    moves up to rank 3 (issue 13: a code question must see code near the top)."""
    query = "installation requirements"  # install.md's sections fill the top 3 unaided
    paths = lambda out: [r["path"] for r in out["results"]]  # noqa: E731
    monkeypatch.setenv("LLMC_SEARCH__CODE_IN_TOP", "0")
    off = search_json(runner, indexed_repo, query, "-k", "6")
    assert all(p.endswith(".md") for p in paths(off)[:3])
    first_code = next(i for i, p in enumerate(paths(off)) if not p.endswith(".md"))
    monkeypatch.delenv("LLMC_SEARCH__CODE_IN_TOP")
    on = search_json(runner, indexed_repo, query, "-k", "6")
    moved = paths(off)[:2] + [paths(off)[first_code]] + paths(off)[2:first_code]
    assert paths(on)[: first_code + 1] == moved
    assert paths(on)[first_code + 1 :] == paths(off)[first_code + 1 :]
    docs = search_json(runner, indexed_repo, query, "-k", "6", "--route", "docs")
    assert all(p.endswith(".md") for p in paths(docs)[:3])  # the user's route stands
    short = search_json(runner, indexed_repo, query, "-k", "3")  # code from below k
    assert paths(short)[2] == paths(off)[first_code]
    one = search_json(runner, indexed_repo, query, "-k", "1")  # a prefix of the same order
    assert paths(one) == paths(on)[:1] == paths(off)[:1]
