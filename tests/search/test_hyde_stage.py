"""The HyDE stage in the pipeline with a scripted LLM: prompts per route, multi-HyDE seeds,
length caps, the fused ``hyde`` list, Rocchio BM25 expansion, and every way the LLM can
fail (down, slow, garbage, a bug) ending in plain retrieval with one warning."""

from __future__ import annotations

import pytest
from repo_fixtures import ScriptedLLM

from llmc.config import load_config
from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.search import Searcher
from llmc.search.hyde.rules import MIN_TOKENS

VAGUE_DOCS = "how do I get my money back after buying something"
VAGUE_CODE = "where is the money for a purchase given back to the customer"
REFUND_CODE = (
    "def refund_payment(receipt_id):\n"
    '    """Give the money of a receipt back to the customer."""\n'
    "    return receipt_id.startswith('receipt-')"
)


def _search(root, query, llm, monkeypatch, **hyde):
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: llm)
    # fusion ranks: these tests read the hyde list fusion merges (the learned ranker takes
    # hyde.code / hyde.doc as features instead)
    cfg = load_config(
        root, {"hyde.intents": "code,docs,mixed", "search.ranker": "fusion", "search.budget_ms": 0}
    )
    for key, value in hyde.items():
        setattr(cfg.hyde, key, value)
    with Searcher(root, cfg) as s:
        return s.search(query, explain=True)


def _plain(root, query):
    with Searcher(root, load_config(root, {"search.hyde": False, "search.ranker": "fusion"})) as s:
        return s.search(query, explain=True)


def test_code_question_gets_a_code_prompt_capped_near_span_size(repo_copy, monkeypatch):
    llm = ScriptedLLM([REFUND_CODE])
    resp = _search(repo_copy, VAGUE_CODE, llm, monkeypatch, max_tokens=96)
    assert resp.route.intent == "code"
    (call,) = llm.calls
    assert "Python code" in call["prompt"] and VAGUE_CODE in call["prompt"]
    assert "Python" in call["system"] and "code only" in call["system"]
    assert MIN_TOKENS <= call["max_tokens"] <= 96
    assert call["temperature"] == 0.0 and call["seed"] is None  # n = 1: greedy
    assert 0 < call["timeout"] <= 10.0
    report = resp.hyde
    assert report.used and report.model == "scripted:scripted-1"
    assert [h.route for h in report.hypotheses] == ["code"]
    assert [t.category for t in report.thresholds] == ["code"]


def test_docs_question_gets_a_documentation_prompt(repo_copy, monkeypatch):
    llm = ScriptedLLM(["To get a refund, give the receipt id to the payments desk."])
    resp = _search(repo_copy, VAGUE_DOCS, llm, monkeypatch)
    assert resp.route.intent == "docs"
    assert "documentation section" in llm.calls[0]["prompt"]
    assert "documentation" in llm.calls[0]["system"]


def test_multi_hyde_samples_with_seeds(repo_copy, monkeypatch):
    llm = ScriptedLLM([REFUND_CODE, REFUND_CODE + "\n# two", REFUND_CODE + "\n# three"])
    resp = _search(repo_copy, VAGUE_CODE, llm, monkeypatch, n=3, temperature=0.6)
    assert [c["seed"] for c in llm.calls] == [0, 1, 2]
    assert {c["temperature"] for c in llm.calls} == {0.6}
    assert [h.seed for h in resp.hyde.hypotheses] == [0, 1, 2]
    assert len(resp.hyde.thresholds) == 1  # one list per category, all hypotheses merged


def test_hyde_list_is_fused_and_never_a_result_itself(repo_copy, monkeypatch):
    resp = _search(repo_copy, VAGUE_CODE, ScriptedLLM([REFUND_CODE]), monkeypatch, weight=1.0)
    step = resp.hyde.thresholds[0]
    assert step.threshold is not None and step.hits > 0
    assert "hyde" in resp.explain.lists  # hyde.code, merged per retriever
    assert resp.route.list_weights["hyde"] == 1.0
    assert any("hyde" in r.sources for r in resp.results)
    top = resp.explain.lists["hyde"][0]
    assert (top.path, top.symbol) == ("src/shop/payment.py", "refund_payment")
    for r in resp.results:  # real spans of real files, never the hypothesis
        assert (repo_copy / r.path).is_file()
        assert "startswith('receipt-')" not in r.snippet  # the fixture's code uses "..."
    out = resp.to_json()
    assert out["hyde"]["hypotheses"][0]["text"] == REFUND_CODE
    assert all("hyde" not in r or r["path"] for r in out["results"])


def test_rocchio_expands_bm25_with_rare_hypothesis_terms(repo_copy, monkeypatch):
    resp = _search(repo_copy, VAGUE_DOCS, ScriptedLLM([REFUND_CODE]), monkeypatch, weight=0.0)
    expansion = resp.hyde.expansion
    added = {t for t, w in expansion.items() if w < 1.0}
    assert "receipt" in added or "receipt_id" in added
    assert all(0 < w <= 1.0 for t, w in expansion.items() if w < 1.0)  # beta / alpha
    assert expansion.get("money", 1.0) > 1.0  # a query term the hypothesis repeats
    assert "customer" in expansion or "refund" in expansion
    notes = [s.note for s in resp.explain.stages if s.stage == "hyde"]
    assert any(n.startswith("BM25 expanded with") for n in notes)
    plain = _plain(repo_copy, VAGUE_DOCS)
    assert [h.span_id for h in resp.explain.lists["bm25"]] != [
        h.span_id for h in plain.explain.lists["bm25"]
    ]


def test_rocchio_off_leaves_bm25_alone(repo_copy, monkeypatch):
    resp = _search(repo_copy, VAGUE_DOCS, ScriptedLLM([REFUND_CODE]), monkeypatch, rocchio=False)
    plain = _plain(repo_copy, VAGUE_DOCS)
    assert resp.hyde.expansion == {}
    assert resp.explain.lists["bm25"] == plain.explain.lists["bm25"]


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        (LLMUnavailable("ollama: cannot connect to http://127.0.0.1:9"), "cannot connect"),
        (LLMTimeout("embedded: no answer within 10s"), "took longer than hyde.timeout_s"),
        ("!!! ### $$$ %%% ^^^ &&& *** ((( )))", "unusable (too short)"),
        ("{} [] () <> ;; ## !! ?? ** && || %% $$ 12 34 a b c", "unusable (hardly any words)"),
        ("", "unusable (empty answer)"),
        ("the the the the the the the the the the the the the the the the the the the the "
         "the the the", "unusable (repeats itself)"),
        (RuntimeError("provider bug"), "RuntimeError: provider bug"),
    ],
)  # fmt: skip
def test_a_failing_llm_means_plain_retrieval_and_one_warning(
    repo_copy, monkeypatch, answer, warning
):
    resp = _search(repo_copy, VAGUE_DOCS, ScriptedLLM([answer]), monkeypatch)
    hyde_warnings = [w for w in resp.warnings if w.startswith("hyde")]
    assert len(hyde_warnings) == 1 and warning in hyde_warnings[0], resp.warnings
    assert hyde_warnings[0].endswith("plain retrieval") and "\n" not in hyde_warnings[0]
    assert not resp.hyde.used
    plain = _plain(repo_copy, VAGUE_DOCS)
    assert [r.span_id for r in resp.results] == [r.span_id for r in plain.results]


def test_after_a_failure_the_llm_rests(repo_copy, monkeypatch):
    llm = ScriptedLLM([LLMUnavailable("ollama: cannot connect")])
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: llm)
    cfg = load_config(repo_copy, {"hyde.intents": "code,docs,mixed", "search.budget_ms": 0})
    with Searcher(repo_copy, cfg) as s:
        s.search(VAGUE_DOCS)
        again = s.search(VAGUE_DOCS)
    assert len(llm.calls) == 1  # the second query did not wait on a dead LLM
    assert any("failed" in w and "retry after" in w for w in again.warnings)


def test_some_good_hypotheses_are_enough(repo_copy, monkeypatch):
    llm = ScriptedLLM([REFUND_CODE, "", REFUND_CODE + "\n# again"])
    resp = _search(repo_copy, VAGUE_CODE, llm, monkeypatch, n=3)
    assert resp.hyde.used and len(resp.hyde.hypotheses) == 2
    assert not [w for w in resp.warnings if w.startswith("hyde")]
    assert any("unusable" in s.note for s in resp.explain.stages if s.stage == "hyde")


def test_gated_out_query_never_calls_the_llm(repo_copy, monkeypatch):
    llm = ScriptedLLM([REFUND_CODE])
    resp = _search(repo_copy, "apply_discount", llm, monkeypatch)
    assert llm.calls == []
    assert not resp.hyde.used and resp.hyde.reason.startswith("identifier-shaped")
    # Nothing of the stage ran: no hypothesis, no threshold step-down, no LLM time.
    assert not resp.hyde.hypotheses and not resp.hyde.thresholds and resp.hyde.llm_ms == 0.0


def test_stage_switched_off_costs_nothing(repo_copy, monkeypatch):
    llm = ScriptedLLM([REFUND_CODE])
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: llm)
    with Searcher(repo_copy, load_config(repo_copy, {"search.hyde": False})) as s:
        resp = s.search(VAGUE_DOCS)
    assert llm.calls == [] and resp.hyde is None and "hyde" not in resp.to_json()


def test_weight_zero_keeps_the_dense_list_out_of_fusion_but_in_the_trace(repo_copy, monkeypatch):
    resp = _search(repo_copy, VAGUE_CODE, ScriptedLLM([REFUND_CODE]), monkeypatch, weight=0.0)
    assert resp.hyde.thresholds and resp.hyde.thresholds[0].hits > 0  # searched, diagnosed
    assert "hyde" not in resp.route.list_weights and "hyde" not in resp.explain.lists
    assert not any("hyde" in r.sources for r in resp.results)
    assert any("not fused" in s.note for s in resp.explain.stages if s.stage == "hyde")
