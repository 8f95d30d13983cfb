"""The "no good match" line (issue 40, item 7): gibberish and a question no repository
answers say so; a real question does not."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.search.match import Match


def _answer(runner: CliRunner, repo, query: str) -> dict:
    out = runner.invoke(main, ["search", "--json", "--repo", str(repo), query, "-k", "3"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("query", ["qwzpx vbnrtk", "how long should I boil an egg"])
def test_a_query_about_nothing_indexed_says_no_good_match(runner, indexed_repo, query):
    answer = _answer(runner, indexed_repo, query)
    assert answer["match"]["weak"] is True, answer["match"]
    assert answer["match"]["term_share"] == 0.0
    assert any(w.startswith("no good match") for w in answer["warnings"]), answer["warnings"]
    assert answer["results"], "the nearest guesses are still shown"
    text = runner.invoke(main, ["search", "--repo", str(indexed_repo), query, "-k", "1"])
    assert text.exit_code == 0 and "no good match" in text.output


@pytest.mark.parametrize("query", ["apply a discount to the cart", "ShoppingCart"])
def test_a_real_question_is_a_match(runner, indexed_repo, query):
    answer = _answer(runner, indexed_repo, query)
    assert answer["match"]["weak"] is False, answer["match"]
    assert answer["match"]["term_share"] > 0.5
    assert not any("no good match" in w for w in answer["warnings"])


def test_the_verdict():
    assert Match(0.0, 3, 0.2, True).line().startswith("no good match: none of the query's words")
    assert "40% of the query's words" in Match(0.4, 5, 0.2, True).line()
