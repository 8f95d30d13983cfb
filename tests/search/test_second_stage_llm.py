"""LLM listwise stage (llmc/search/llm_rerank.py): the gate, the prompt, the parser, every
malformed answer falling back with its reason, and the real embedded LLM end to end."""

from __future__ import annotations

import copy
import logging
import types

import pytest

from llmc.config import LLMConfig, LLMRerankConfig, load_config
from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm import Generation, get_llm
from llmc.search import Searcher
from llmc.search.llm_rerank import (
    LLM_RERANK,
    BadPermutation,
    Pace,
    build_prompt,
    gate,
    llm_rerank,
    parse_permutation,
    snippet_of,
)
from llmc.search.types import Candidate
from llmc.types import Span, StoredSpan


def span(i: int, symbol: str, text: str, signature: str = "") -> StoredSpan:
    return StoredSpan(
        i,
        Span(path=f"src/m{i}.py", lang="python", category="code", kind="function",
             symbol=symbol, qualname=symbol, start_line=10, end_line=10 + text.count("\n"),
             text=text, header="", signature=signature),
    )  # fmt: skip


SPANS = {
    i: span(i, f"f{i}", f"def f{i}(x):\n    '''Doc {i}.'''\n    return x + {i}\n")
    for i in range(1, 11)
}


def cands(n: int = 6, pinned: int = 0) -> list[Candidate]:
    return [Candidate(i, 1.0 - i / 100, pinned=i <= pinned) for i in range(1, n + 1)]


class Fake:
    """An LLM that answers from a script (text, or an exception to raise)."""

    provider, model = "fake", "fake"

    def __init__(self, answer):
        self.answer = answer
        self.calls: list[dict] = []

    def generate(self, prompt, system=None, max_tokens=None, temperature=None, stop=None,
                 timeout=None, seed=None):  # fmt: skip
        self.calls.append(dict(prompt=prompt, system=system, max_tokens=max_tokens,
                               temperature=temperature, stop=stop, timeout=timeout))  # fmt: skip
        if isinstance(self.answer, Exception):
            raise self.answer
        return Generation(self.answer, "fake", "fake", 1.0)


def cfg(**kw) -> LLMRerankConfig:
    c = LLMRerankConfig(top_n=4)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


# -- parsing -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, order",
    [
        ("[3, 1, 2, 4]", (3, 1, 2, 4)),
        ('Sure! The ranking is ["2", "1", "4", "3"].', (2, 1, 4, 3)),
        ("3 > 1 > 4 > 2", (3, 1, 4, 2)),
        ("[3] > [1] > [2] > [4]\nbecause 3 is best", (3, 1, 2, 4)),
        ("ranking: [x]\n[4,3,2,1]", (4, 3, 2, 1)),
    ],
)
def test_permutations_are_read_from_json_or_a_chain(text, order) -> None:
    assert parse_permutation(text, 4) == order


@pytest.mark.parametrize(
    "text, reason",
    [
        ("The most relevant passage is the second one.", "no permutation in the answer"),
        ("", "no permutation in the answer ('')"),
        ("[1, 2, 2, 3]", "duplicate id(s) 2"),
        ("[1, 2, 3, 9]", "unknown id(s) 9 (ids are 1-4)"),
        ("[0, 1, 2, 3]", "unknown id(s) 0"),
        ("[2, 1]", "partial order: 2 of 4 ids, missing 3, 4"),
        ("4 > 1", "partial order: 2 of 4 ids, missing 2, 3"),
        ("[true, 1, 2, 3]", "no permutation"),
    ],
)
def test_malformed_permutations_say_why(text, reason) -> None:
    with pytest.raises(BadPermutation, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_permutation(text, 4)


# -- malformed answers fall back to the previous order, with the reason ------------------
@pytest.mark.parametrize(
    "answer, reason",
    [
        ("I think result 2 is the best.", "no permutation in the answer"),
        ("[2, 2, 1, 3]", "duplicate id(s) 2"),
        ("[2, 1, 3, 7]", "unknown id(s) 7"),
        ("[2, 1]", "partial order: 2 of 4 ids, missing 3, 4"),
        (LLMTimeout("embedded: no answer within 0.5s"), "timeout past the 4000 ms budget"),
        (LLMUnavailable("no LLM: disabled by config"), "LLM unavailable (no LLM: disabled"),
    ],
)
def test_bad_answers_keep_the_order_and_log_the_reason(answer, reason, caplog) -> None:
    before = cands()
    with caplog.at_level(logging.INFO, logger="llmc.search.llm_rerank"):
        out = llm_rerank("q", before, SPANS, Fake(answer), cfg(), "asked for", Pace())
    assert out.candidates == tuple(before) and not out.applied and not out.order
    assert out.reason.startswith("asked for; ") and reason in out.reason
    assert out.unavailable == isinstance(answer, Exception)
    assert any(reason in r.getMessage() for r in caplog.records)


def test_an_answer_past_the_budget_is_not_used(monkeypatch) -> None:
    clock = [1000.0]  # the stage's clock, advanced by the fake LLM: no real time involved
    monkeypatch.setattr(
        "llmc.search.llm_rerank.time", types.SimpleNamespace(perf_counter=lambda: clock[0])
    )

    class Slow(Fake):
        def generate(self, *a, **kw):
            clock[0] += 0.05  # every answer takes 50 ms
            return super().generate(*a, **kw)

    pace = Pace()
    slow = Slow("[2, 1, 3, 4]")
    out = llm_rerank("q", cands(), SPANS, slow, cfg(budget_ms=10), "why", pace)
    assert not out.applied and "past the budget" in out.reason
    # Now the stage knows this LLM is too slow for the budget: it does not call it again.
    again = llm_rerank("q", cands(), SPANS, slow, cfg(budget_ms=10), "why", pace)
    assert not again.applied and len(slow.calls) == 1
    assert "skipped: this LLM would take about" in again.reason
    assert "past the 10 ms budget" in again.reason
    assert llm_rerank("q", cands(), SPANS, slow, cfg(budget_ms=5000), "why", pace).applied


def test_pace_predicts_from_the_calls_it_saw() -> None:
    pace, llm = Pace(), Fake("")
    assert pace.predict_ms(llm, 1000) is None
    pace.observe(llm, 1000, 500.0)  # 2000 chars/s
    assert pace.predict_ms(llm, 4000) == pytest.approx(2000.0)
    pace.observe(llm, 1000, 1000.0)  # 1000 chars/s, averaged with the first
    assert pace.predict_ms(llm, 1500) == pytest.approx(1000.0)


def test_a_valid_permutation_reorders_the_window_and_keeps_scores_descending() -> None:
    before = cands(6, pinned=1)
    llm = Fake("[3, 1, 4, 2]")
    out = llm_rerank("find f4", before, SPANS, llm, cfg(), "close top scores", Pace())
    # Pinned #1 stays; the window is spans 2..5 (ids 1..4); span 6 stays below.
    assert [c.span_id for c in out.candidates] == [1, 4, 2, 5, 3, 6]
    assert [c.score for c in out.candidates] == [c.score for c in before]
    assert out.applied and out.order == (3, 1, 4, 2) and out.reason.endswith("reordered")
    assert out.candidates[1].scores[LLM_RERANK] == 0
    call = llm.calls[0]
    assert call["temperature"] == 0.0 and call["timeout"] == pytest.approx(4.0)
    assert "[1] src/m2.py:10-13 f2" in call["prompt"] and "[5]" not in call["prompt"]
    assert call["prompt"].startswith("Query: find f4\n")


def test_the_prompt_cuts_spans_to_signature_and_first_lines() -> None:
    long = span(1, "big", "@cached\n" + "\n".join(f"    line {i}" for i in range(40)),
                signature="def big(a, b) -> int:")  # fmt: skip
    text = snippet_of(long.span, 3)
    assert text.splitlines() == ["def big(a, b) -> int:", "@cached", "    line 0", "    line 1",
                                 "    ..."]  # fmt: skip
    prompt = build_prompt("q", [long.span, SPANS[2].span], 3)
    assert "each id from 1 to 2 exactly once" in prompt and "line 5" not in prompt


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_a_parroted_format_example_is_never_a_valid_answer(n) -> None:
    prompt = build_prompt("q", [SPANS[i].span for i in range(1, n + 1)], 2)
    example = prompt[prompt.rindex("[") :]
    with pytest.raises(BadPermutation):
        parse_permutation(example, n)


# -- the gate ------------------------------------------------------------------------------
def test_the_gate_opens_for_close_scores_long_or_complex_queries_or_when_asked() -> None:
    apart = [Candidate(1, 1.0), Candidate(2, 0.5), Candidate(3, 0.4)]
    close = [Candidate(1, 0.033), Candidate(2, 0.0325), Candidate(3, 0.016)]
    assert gate("frozen", apart, cfg()) is None
    assert (
        gate("frozen", close, cfg())
        == "close top scores (0.0330 vs 0.0325: 3% of the top-3 spread)"
    )
    assert gate("frozen", apart[:2], cfg()) is None  # two results have no spread to judge
    assert gate("frozen", apart, cfg(always=True)).startswith("asked for")
    long = "how does the validator decide which of the many attributes get checked at init"
    assert gate(long, apart, cfg()) == "long query (14 words)"
    assert gate("converters and validators when frozen", apart, cfg()).startswith("complex")
    assert gate("frozen", apart[:1], cfg(always=True)) is None  # nothing to order
    pinned_first = [Candidate(9, 2.0, pinned=True), *apart]
    assert gate("frozen", pinned_first, cfg()) is None  # pins are not part of the window


# -- the real embedded LLM, end to end -----------------------------------------------------
@pytest.fixture(scope="module")
def embedded():
    llm = get_llm(LLMConfig(provider="embedded", timeout_s=120.0))
    try:
        llm.generate("Say OK.", max_tokens=2)
    except LLMUnavailable as e:  # pragma: no cover - the packaged model is a dependency
        pytest.fail(f"the embedded LLM does not run here: {e}")
    return llm


def test_the_embedded_llm_answers_and_the_stage_validates_it(embedded) -> None:
    before = cands(5)
    out = llm_rerank("which function returns x + 3", before, SPANS, embedded,
                     cfg(top_n=5, budget_ms=60_000), "asked for")  # fmt: skip
    assert out.ms > 0 and out.reason.startswith("asked for; ")
    ids = [c.span_id for c in out.candidates]
    assert sorted(ids) == [1, 2, 3, 4, 5]  # always a permutation of what went in
    if out.applied:
        assert parse_permutation(out.answer, 5) == out.order
    else:  # a small model may babble: then the order is the old one, with the reason
        assert ids == [1, 2, 3, 4, 5] and out.reason.count(";") >= 1


def test_search_llm_rerank_flag_runs_the_embedded_llm_in_the_pipeline(indexed_repo, embedded):
    cfg_ = load_config(indexed_repo)
    cfg_.search.hyde = cfg_.search.graph = cfg_.search.rerank = False
    cfg_.search.ranker = "fusion"  # the gate below reads fusion's score spread
    cfg_.search.llm_rerank = True
    cfg_.llm_rerank.always = True
    cfg_.llm_rerank.top_n = 5
    cfg_.llm_rerank.budget_ms = 60_000
    cfg_.llm = LLMConfig(provider="embedded", timeout_s=120.0)
    with Searcher(indexed_repo, cfg_) as s:
        r = s.search("charge a card payment", k=5, explain=True)
        gated = copy.deepcopy(cfg_)
        gated.llm_rerank.always = False
    notes = [n.note for n in r.explain.stages if n.stage == "llm_rerank"]
    assert len(notes) == 1 and notes[0].startswith("asked for (llm_rerank.always")
    assert "ms)" in notes[0] and "llm_rerank" in r.timings_ms
    assert len(r.results) == 5 and not r.warnings
    with Searcher(indexed_repo, gated) as s:
        quiet = s.search("PaymentError", k=5, explain=True)
    assert [n.note for n in quiet.explain.stages if n.stage == "llm_rerank"] == [
        "gate closed: short simple query, top scores apart"
    ]
    assert "llm_rerank" not in quiet.timings_ms
