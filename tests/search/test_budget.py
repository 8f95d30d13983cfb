"""The per-query latency budget and the cost model it spends by (llmc/search/budget.py), and
the profile seam (llmc/models/device.py): hand numbers for the statistics, every kind of bad
cost file ignored, stages skipped with a trace note unless asked for, a faked GPU."""

from __future__ import annotations

import json
import os
import time

import pytest
from repo_fixtures import ScriptedLLM

from llmc.config import Config, load_config
from llmc.models import device
from llmc.search import Searcher, budget
from llmc.search.budget import (
    HYDE_LLM,
    MIN_SAMPLES,
    RERANK_PAIR,
    Budget,
    CostModel,
    StageCost,
    apply_profile,
    explicit,
)

VAGUE = "how do I get my money back after buying something"


# -- the statistics -----------------------------------------------------------------------------
def test_weighted_mean_and_quantile_by_hand() -> None:
    c = StageCost()
    for ms in (100.0, 200.0, 300.0):
        c.add(ms)
    # mean: 100, then 0.2 * 200 + 0.8 * 100 = 120, then 0.2 * 300 + 0.8 * 120 = 156
    assert c.n == 3 and c.mean == pytest.approx(156.0)
    assert c.quantile() == 300.0  # nearest rank: ceil(0.95 * 3) = 3rd of 3
    for ms in range(1, 21):
        c.add(float(ms))
    assert c.quantile(0.5) == 12.0  # 23 sorted: 1..20, 100, 200, 300; rank ceil(11.5) = 12
    c.recent = [float(x) for x in range(1, 101)]
    assert c.quantile() == 95.0


def test_prior_until_min_samples_then_the_larger_of_mean_and_p95(tmp_path) -> None:
    costs = CostModel(None)
    assert costs.expect("cpu", HYDE_LLM).ms == 1500.0
    assert costs.expect("cuda", RERANK_PAIR).ms == 0.6  # cuda and mps are "gpu"
    assert costs.expect("cpu", f"{HYDE_LLM}:openai") == budget.Estimate(1500.0, "prior")
    for ms in [40.0] * (MIN_SAMPLES - 1):
        costs.observe("cpu", HYDE_LLM, ms)
    assert costs.expect("cpu", HYDE_LLM).source == "prior"
    costs.observe("cpu", HYDE_LLM, 100.0)
    est = costs.expect("cpu", HYDE_LLM)
    assert est.ms == 100.0 and est.source == f"learned from {MIN_SAMPLES} timings"
    costs.observe("cpu", HYDE_LLM, float("nan"))  # never learned
    costs.observe("cpu", HYDE_LLM, -1.0)
    assert costs.stage("cpu", HYDE_LLM).n == MIN_SAMPLES


# -- the file -------------------------------------------------------------------------------------
def test_costs_round_trip_atomically_and_privately(tmp_path) -> None:
    path = tmp_path / "costs.json"
    costs = CostModel(path)
    costs.observe("cpu", "total", 12.5)
    costs.maybe_save()  # not due yet: one query, a second ago
    assert not path.exists()
    costs.maybe_save(force=True)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir()] == ["costs.json"]  # no temp file left
    data = json.loads(path.read_text())
    assert data == {
        "version": 1,
        "devices": {"cpu": {"total": {"n": 1, "mean": 12.5, "recent": [12.5]}}},
    }
    again = CostModel(path)
    assert again.stage("cpu", "total") == StageCost(1, 12.5, [12.5])


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 99, "devices": {}}',
        '{"version": 1, "devices": {"tpu": {}}}',
        '{"version": 1, "devices": {"cpu": {"total": {"n": -1, "mean": 1, "recent": []}}}}',
        '{"version": 1, "devices": {"cpu": {"total": {"n": 1, "mean": "1", "recent": []}}}}',
        '{"version": 1, "devices": {"cpu": {"total": {"n": 1, "mean": 1, "recent": [1e300]}}}}',
        '{"version": 1, "devices": {"cpu": {"total": {"n": true, "mean": 1, "recent": []}}}}',
        '{"version": 1, "devices": {"cpu": {"total": 5}}}',
    ],
)
def test_a_bad_cost_file_is_ignored(tmp_path, text) -> None:
    path = tmp_path / "costs.json"
    path.write_text(text)
    costs = CostModel(path)
    assert costs.stages == {}
    assert costs.expect("cpu", HYDE_LLM).source == "prior"


def test_a_symlinked_or_huge_cost_file_is_not_read(tmp_path) -> None:
    real = tmp_path / "elsewhere.json"
    real.write_text(
        '{"version": 1, "devices": {"cpu": {"total": {"n": 1, "mean": 1, "recent": [1]}}}}'
    )
    link = tmp_path / "costs.json"
    os.symlink(real, link)
    assert CostModel(link).stages == {}
    big = tmp_path / "big.json"
    big.write_text(" " * (budget.MAX_FILE_BYTES + 1))
    assert CostModel(big).stages == {}


# -- one query's budget ---------------------------------------------------------------------------
def test_a_stage_runs_when_asked_for_or_when_it_fits(monkeypatch) -> None:
    # The budget reads time.perf_counter: held still here, so no line depends on how fast
    # this machine runs the test.
    monkeypatch.setattr(time, "perf_counter", lambda: 1_000.0)
    spend = Budget(150, time.perf_counter(), CostModel(None), "cpu")
    assert spend.expect(RERANK_PAIR, 20) == 600.0
    assert spend.expect(HYDE_LLM, 1, extra=budget.HYDE_REST) == 1550.0
    over = spend.allow("hyde", 1900.0, explicit=False)
    assert not over.run and over.note == (
        "hyde skipped: expected 1,900 ms > budget 150 ms (--budget-ms, or ask for the stage)"
    )
    assert spend.allow("hyde", 1900.0, explicit=True).run
    assert spend.allow("rerank", 1.0, explicit=False).run
    assert Budget(0, time.perf_counter(), CostModel(None)).allow("x", 1e9, False).run
    spent = Budget(150, time.perf_counter() - 1.0, CostModel(None))  # a second already gone
    assert (
        "expected 1 ms > the 0 ms left of the 150 ms budget" in spent.allow("rerank", 1, False).note
    )
    # What a process pays once (an LLM provider's probe, opening the index) is not counted:
    # 5 s gone, all of it paid once, leaves the whole 10 s budget.
    paid = Budget(10_000, time.perf_counter() - 5.0, CostModel(None))
    assert paid.left_ms() == 5_000
    paid.paid_once(5_000.0)
    assert paid.left_ms() == 10_000 and paid.allow("rerank", 1.0, False).run
    once = Budget(10_000, time.perf_counter() - 5.0, CostModel(None), once=lambda: 5_000.0)
    assert once.left_ms() == 10_000


def test_explicit_means_set_by_the_user_on() -> None:
    cfg = Config()
    assert not explicit(cfg, "search.hyde")  # on by default: not asked for
    cfg.set("search.rerank", True, "flag")
    assert explicit(cfg, "search.rerank")
    cfg.set("search.llm_rerank", False, "flag")
    assert not explicit(cfg, "search.llm_rerank")
    cfg.set("search.hyde", True, "/repo/llmc.toml")
    assert explicit(cfg, "search.hyde")


def test_profiles_switch_on_only_what_won_on_validation(monkeypatch) -> None:
    # Today no stage won on validation on either machine class: both profiles run the
    # configured stages, the cross-encoder stays off.
    assert not apply_profile(Config(), "gpu").search.rerank
    assert not apply_profile(Config(), "cpu").search.rerank
    # A stage a profile adds is the profile's (not explicit: the budget judges it), and
    # never overrides a switch the user set.
    monkeypatch.setitem(budget.PROFILE_STAGES, "gpu", {"search.rerank": True})
    gpu = apply_profile(Config(), "gpu")
    assert gpu.search.rerank and gpu.sources["search.rerank"] == "profile gpu"
    assert not explicit(gpu, "search.rerank")
    off = Config()
    off.set("search.rerank", False, "flag")
    assert apply_profile(off, "gpu") is off
    base = Config()
    apply_profile(base, "gpu")
    assert not base.search.rerank  # the input is not changed


# -- the profile seam -------------------------------------------------------------------------
def test_the_profile_follows_the_one_detection_seam(monkeypatch) -> None:
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cpu")
    assert device.machine_profile("auto") == device.Profile("cpu", "cpu", "cpu (auto: cpu found)")
    assert device.machine_profile("gpu").device == "cpu"
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cuda")
    assert device.machine_profile("auto").name == "gpu"
    assert device.machine_profile("CPU").name == "cpu"
    assert device.pick_device("auto", "fp32").device == "cuda"
    with pytest.raises(ValueError, match="search.profile"):
        device.machine_profile("tpu")


# -- in the pipeline ----------------------------------------------------------------------------
def _searcher(root, monkeypatch, llm, **overrides) -> Searcher:
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: llm)
    values = {"hyde.intents": "code,docs,mixed", "search.graph": False, **overrides}
    return Searcher(root, load_config(root, values))


def test_on_a_cpu_hyde_is_skipped_by_the_budget_with_a_note(repo_copy, monkeypatch) -> None:
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cpu")
    llm = ScriptedLLM()
    with _searcher(repo_copy, monkeypatch, llm) as s:
        resp = s.search(VAGUE, explain=True)
    assert llm.calls == [] and not resp.hyde.used
    notes = [n.note for n in resp.explain.stages if n.stage == "hyde"]
    assert any(n.startswith("hyde skipped: expected 1,550 ms > budget") for n in notes), notes
    assert not [w for w in resp.warnings if "hyde" in w]  # a note, not a warning
    assert not any(n.stage == "rerank" for n in resp.explain.stages)  # off: no profile adds it
    (line,) = [n.note for n in resp.explain.stages if n.stage == "budget"]
    assert line == "150 ms per query; profile cpu (auto: cpu found)"
    data = json.loads((repo_copy / ".llmc" / "costs.json").read_text())  # written at close
    assert {"total", "route", "exact"} <= set(data["devices"]["cpu"])


def test_asking_for_hyde_or_a_larger_budget_runs_it_and_teaches_the_model(
    repo_copy, monkeypatch
) -> None:
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cpu")
    llm = ScriptedLLM(["the refund returns the money to the customer card"])
    with _searcher(repo_copy, monkeypatch, llm, **{"hyde.mode": "always"}) as s:
        assert s.search(VAGUE).hyde.used
    with _searcher(repo_copy, monkeypatch, llm, **{"search.hyde": True}) as s:
        assert s.search(VAGUE).hyde.used  # cached now, and asked for too
    with _searcher(repo_copy, monkeypatch, llm, **{"search.budget_ms": 60_000.0}) as s:
        assert s.search("how is the customer told the order shipped").hyde.used
    assert len(llm.calls) == 2
    learned = CostModel(repo_copy / ".llmc" / "costs.json").stage("cpu", f"{HYDE_LLM}:scripted")
    assert learned is not None and learned.n == 2 and learned.recent == [5.0, 5.0]


def test_a_faked_gpu_runs_the_cross_encoder_within_the_budget(repo_copy, monkeypatch) -> None:
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cuda")
    # As if the cross-encoder had won on validation on GPUs: the gpu profile adds it.
    monkeypatch.setitem(budget.PROFILE_STAGES, "gpu", {"search.rerank": True})
    # the models run on this CPU; the profile and the cost model's device kind say GPU
    values = {
        "rerank.device": "cpu", "embedding.device": "cpu", "search.hyde": False,
        "search.budget_ms": 400.0,  # the GPU's 12 ms for 20 pairs fits, a CPU's 600 ms not
    }  # fmt: skip
    with _searcher(repo_copy, monkeypatch, ScriptedLLM(), **values) as s:
        assert s.profile.name == "gpu" and s.cfg.sources["search.rerank"] == "profile gpu"
        resp = s.search("where is a refund given back to the customer", explain=True)
    notes = [n.note for n in resp.explain.stages if n.stage == "rerank"]
    assert len(notes) == 1 and "scored the top" in notes[0], notes
    costs = CostModel(repo_copy / ".llmc" / "costs.json")
    assert costs.stage("cuda", RERANK_PAIR).n == 1 and costs.stage("cpu", RERANK_PAIR) is None
    values["search.budget_ms"] = 1.0
    with _searcher(repo_copy, monkeypatch, ScriptedLLM(), **values) as s:
        tight = s.search("where is a refund given back to the customer", explain=True)
    assert any("rerank skipped" in n.note for n in tight.explain.stages)


def test_the_cli_budget_flag_and_explain(runner, repo_copy, monkeypatch) -> None:
    from llmc.cli import main

    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cpu")
    monkeypatch.setattr("llmc.models.llm.get_llm", lambda cfg: ScriptedLLM())
    monkeypatch.setenv("LLMC_HYDE__INTENTS", "code,docs,mixed")
    args = ["search", "--repo", str(repo_copy), "--explain", VAGUE]
    out = runner.invoke(main, args)
    assert out.exit_code == 0 and "Traceback" not in out.output, out.output
    assert "hyde skipped: expected 1,550 ms > budget" in out.output
    out = runner.invoke(main, [*args, "--budget-ms", "0"])
    assert out.exit_code == 0 and "no latency budget" not in out.output
    assert "hyde skipped" not in out.output and "none (search.budget_ms = 0)" in out.output
    bad = runner.invoke(main, [*args, "--budget-ms", "-5"])
    assert bad.exit_code == 2


def test_status_and_doctor_show_the_profile(runner, repo_copy, monkeypatch) -> None:
    from llmc.cli import main

    monkeypatch.setattr(device, "detect_accelerator", lambda: "cuda")
    st = json.loads(runner.invoke(main, ["status", "--json", "--repo", str(repo_copy)]).stdout)
    assert st["device"].endswith("; search profile gpu (auto: cuda found), budget 150 ms a query")
    out = runner.invoke(main, ["doctor", "--repo", str(repo_copy)]).stdout
    assert "ok  profile: gpu (auto: cuda found); budget 150 ms a query" in out
    report = json.loads(runner.invoke(main, ["doctor", "--json", "--repo", str(repo_copy)]).stdout)
    rerank = report["stages"]["stages"]["rerank"]
    assert not rerank["runs"] and rerank["why"] == "off (search.rerank)"  # lost on validation
    monkeypatch.setitem(budget.PROFILE_STAGES, "gpu", {"search.rerank": True})
    report = json.loads(runner.invoke(main, ["doctor", "--json", "--repo", str(repo_copy)]).stdout)
    rerank = report["stages"]["stages"]["rerank"]
    assert rerank["runs"] and rerank["expected_ms"] == 12.0  # a profile's stage fits a GPU
    monkeypatch.setattr(device, "detect_accelerator", lambda: "cpu")
    monkeypatch.setitem(budget.PROFILE_STAGES, "cpu", {"search.rerank": True})
    report = json.loads(runner.invoke(main, ["doctor", "--json", "--repo", str(repo_copy)]).stdout)
    assert report["profile"]["profile"] == "cpu"
    rerank = report["stages"]["stages"]["rerank"]
    assert not rerank["runs"] and rerank["expected_ms"] == 600.0 and rerank["cost_from"] == "prior"
