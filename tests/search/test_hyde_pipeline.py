"""HyDE end to end with the REAL embedded LLM (SmolLM2-135M via xllamacpp) on the indexed
fixture repo: a vague question gets hypotheses and diagnostics, an identifier does not;
`llmc search --hyde/--no-hyde/--explain/--json`; an LLM that is off, down or too slow
means plain retrieval with one warning line and exit 0."""

from __future__ import annotations

import json
import shutil

import pytest
from repo_fixtures import user_config

from llmc.cli import main
from llmc.config import load_config
from llmc.search import Searcher
from llmc.search.hyde.rules import thresholds

pytestmark = pytest.mark.slow  # a few real generations, a few seconds each on a busy CPU

VAGUE = "how do I get my money back after buying something"
IDENT = "apply_discount"
LADDER = thresholds(0.7, 0.1, 0.3)


@pytest.fixture(scope="module")
def hyde_repo(indexed_repo, tmp_path_factory):
    """A copy of the indexed fixture repo; its hypothesis cache is shared by this module's
    tests (the user's config has no latency budget: the LLM runs on every CPU)."""
    root = tmp_path_factory.mktemp("hyde") / "shop"
    shutil.copytree(indexed_repo, root)
    return root


@pytest.fixture(autouse=True)
def _no_daemon(monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    # the embedded LLM and HyDE for every intent: the user's choice (a repository's
    # llmc.toml may not switch an LLM stage on)
    user_config(
        '[llm]\nprovider = "embedded"\n\n[hyde]\nintents = ["code", "docs", "mixed"]\n'
        "\n[search]\nbudget_ms = 0\n"
    )


def search_cli(runner, root, *args):
    result = runner.invoke(main, ["search", "--repo", str(root), *args])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result


def test_vague_question_gets_hypotheses_from_the_real_llm(hyde_repo):
    with Searcher(hyde_repo, load_config(hyde_repo)) as s:
        resp = s.search(VAGUE, explain=True)
    report = resp.hyde
    assert report.used, (report.reason, resp.warnings)
    assert report.reason == "vague natural-language query"
    assert report.model == "embedded:SmolLM2-135M-Instruct.Q4_1"
    (hyp,) = report.hypotheses
    assert hyp.route == "docs" and len(hyp.text.split()) >= 3 and hyp.latency_ms >= 0
    (step,) = report.thresholds
    assert step.category == "doc"
    assert step.threshold in LADDER or step.threshold is None
    if step.threshold is not None:  # the effective threshold is the first the best reaches
        assert step.best >= step.threshold and LADDER.index(step.threshold) == step.steps
        assert step.steps == 0 or step.best < LADDER[step.steps - 1]
    assert report.took_ms >= 0 and resp.timings_ms["hyde"] >= 0  # reported, as the stage ran
    assert any(n.stage == "hyde" for n in resp.explain.stages)
    # hypotheses never become results: every result is a span of a file in the repo
    for r in resp.results:
        assert (hyde_repo / r.path).is_file()
        assert hyp.text not in r.snippet
    assert not [w for w in resp.warnings if w.startswith("hyde")]


def test_identifier_query_gets_no_hyde(hyde_repo):
    with Searcher(hyde_repo, load_config(hyde_repo)) as s:
        resp = s.search(IDENT)
    assert not resp.hyde.used and resp.hyde.reason.startswith("identifier-shaped")
    assert resp.hyde.hypotheses == () and resp.results[0].symbol == "apply_discount"


def test_json_carries_the_diagnostics(runner, hyde_repo):
    out = json.loads(search_cli(runner, hyde_repo, "--json", VAGUE).output)
    hyde = out["hyde"]
    assert hyde["used"] and hyde["model"].startswith("embedded:")
    hyp = hyde["hypotheses"][0]
    assert hyp["text"] and hyp["latency_ms"] >= 0 and hyp["cached"] is True  # test 1 made it
    step = hyde["thresholds"][0]
    assert set(step) == {"category", "threshold", "steps", "hits", "best"}
    assert {"llm_ms", "took_ms", "expansion"} <= set(hyde)
    assert all(set(r) >= {"path", "start_line", "snippet"} for r in out["results"])
    assert "hyde" not in json.loads(search_cli(runner, hyde_repo, "--json", IDENT).output)
    ident = json.loads(search_cli(runner, hyde_repo, "--json", "--explain", IDENT).output)
    assert ident["hyde"] == {
        "used": False, "reason": ident["hyde"]["reason"], "model": "", "hypotheses": [],
        "thresholds": [], "expansion": {}, "llm_ms": 0.0, "took_ms": 0.0,
        "dense_best": ident["hyde"]["dense_best"],
    }  # fmt: skip


def test_explain_shows_hypothesis_latency_and_threshold(runner, hyde_repo):
    text = search_cli(runner, hyde_repo, "--explain", VAGUE).output
    assert "hyde embedded:SmolLM2-135M-Instruct.Q4_1: 1 hypothesis(es)" in text
    assert "step(s) down" in text and "docs #0 (" in text
    text = search_cli(runner, hyde_repo, "--explain", IDENT).output
    assert "hyde not used: identifier-shaped" in text


def test_no_hyde_flag_switches_the_stage_off(runner, hyde_repo):
    out = json.loads(search_cli(runner, hyde_repo, "--json", "--no-hyde", VAGUE).output)
    assert "hyde" not in out and not [w for w in out["warnings"] if "hyde" in w]


def test_hyde_flag_forces_it_past_the_gate(runner, hyde_repo):
    out = json.loads(search_cli(runner, hyde_repo, "--json", "--hyde", IDENT).output)
    assert out["hyde"]["used"] and "always" in out["hyde"]["reason"]
    assert out["results"][0]["symbol"] == "apply_discount"  # the exact pin still leads


def test_too_slow_llm_means_plain_retrieval(hyde_repo):
    cfg = load_config(hyde_repo, {"hyde.timeout_s": 0.05, "hyde.cache": False})
    with Searcher(hyde_repo, cfg) as s:
        resp = s.search(VAGUE)
    (warning,) = [w for w in resp.warnings if w.startswith("hyde")]
    assert "hyde.timeout_s = 0.05s" in warning and warning.endswith("plain retrieval")
    assert not resp.hyde.used
    with Searcher(hyde_repo, load_config(hyde_repo, {"search.hyde": False})) as s:
        plain = s.search(VAGUE)
    assert [r.span_id for r in resp.results] == [r.span_id for r in plain.results]


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"LLMC_LLM__PROVIDER": "none"}, "no LLM: disabled by config"),
        (
            {"LLMC_LLM__PROVIDER": "ollama", "LLMC_LLM__OLLAMA_HOST": "http://127.0.0.1:9"},
            "127.0.0.1:9",
        ),
    ],
)
def test_unavailable_llm_is_one_warning_line_and_exit_0(runner, hyde_repo, env, says):
    result = runner.invoke(main, ["search", "--repo", str(hyde_repo), "--hyde", VAGUE], env=env)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if "hyde" in line]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("warning: hyde skipped:") and says in lines[0]
    assert "plain retrieval" in lines[0]
    assert " 1. " in result.output  # results all the same
