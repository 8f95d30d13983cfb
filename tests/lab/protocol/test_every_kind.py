"""Every kind in one run (lab/protocol/kinds*.py): pooling with kinds weighing the
same, the paired tests, the verdicts on crafted numbers (hand-computed), task (d) through
run.run_project's grouping, and a run of task (a) over a tiny fixture project."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.protocol import kinds
from lab.protocol.kinds import (
    FAIL,
    INCOMPLETE,
    PASS,
    Cell,
    acc5_verdict,
    code3_by_project,
    code3_verdict,
    kind_numbers,
    kind_verdict,
    latency,
    latency_verdict,
    paired,
    parse_tasks,
    pool,
    pooled_verdict,
    summarize,
)
from lab.protocol.kinds_markdown import markdown
from lab.protocol.splits import SplitProject
from llmc.errors import EvalError
from llmc.eval.projects import Project

R = 200  # bootstrap resamples: enough for the shapes checked here, fast


def cell(kind: str, project: str, by_system: dict[str, list[float]], metric="ndcg@10", took=None):
    """A cell whose systems have ``metric`` (and MRR@10) set to the given per-query values."""
    values = {}
    for s, xs in by_system.items():
        by = {m: [None] * len(xs) for m in kinds.METRICS}
        by[metric] = list(xs)
        by["mrr@10"] = list(xs)
        values[s] = by
    took_ms = {s: list(took or [10.0] * len(xs)) for s, xs in by_system.items()}
    return Cell(kind, project, values, took_ms)


# -- tasks ----------------------------------------------------------------------------------
def test_parse_tasks_letters_and_names():
    assert parse_tasks("a,b,c,d") == ("docstring", "questions", "commits", "reports")
    assert parse_tasks("d, a,d") == ("reports", "docstring")
    assert parse_tasks("commits") == ("commits",)
    with pytest.raises(EvalError, match="unknown task 'x'"):
        parse_tasks("a,x")
    with pytest.raises(EvalError, match="names no task"):
        parse_tasks(",")
    assert kinds.systems_for("docstring") == ("default", "grep", "bm25-only", "dense-only", "rrf")
    assert kinds.systems_for("reports")[-1] == "bm25-file"
    assert kinds.kind_of("questions", "mixed") == "questions-mixed"


# -- pooling --------------------------------------------------------------------------------
def test_pool_weighs_every_kind_the_same():
    # docstring: 1, 0 (mean .5); commits: 1 (mean 1). Kinds equal: (.5 + 1) / 2 = .75;
    # every query the same would give 2/3.
    group = [
        cell("docstring", "p", {"default": [1.0, 0.0]}),
        cell("commits", "p", {"default": [1.0]}),
    ]
    ci = pool(group, "default", "ndcg@10", resamples=R)
    assert ci.estimate == pytest.approx(0.75)
    flat = [Cell("all", f"{c.kind}/{c.project}", c.values, c.took_ms) for c in group]
    assert pool(flat, "default", "ndcg@10", resamples=R).estimate == pytest.approx(2 / 3)
    assert pool(group, "nobody", "ndcg@10") is None


def test_pool_resamples_within_kind_and_project():
    # No spread inside any (kind, project) stratum: every resample gives the same mean, so
    # the CI is the point; resampling across strata would spread it.
    group = [
        cell("docstring", "p", {"default": [1.0, 1.0]}),
        cell("docstring", "q", {"default": [0.0, 0.0]}),
        cell("reports", "p", {"default": [0.5]}),
    ]
    ci = pool(group, "default", "ndcg@10", resamples=R)
    assert (ci.low, ci.estimate, ci.high) == pytest.approx((0.5, 0.5, 0.5))  # (.5 + .5) / 2


def test_paired_difference_and_wilcoxon_by_hand():
    # 8 queries, default ahead on each by a distinct amount: exact two-sided Wilcoxon
    # p = 2 / 2^8 = 0.0078125; mean difference (.01 + ... + .08) / 8 = .045.
    ups = [0.01 * i for i in range(1, 9)]
    group = [cell("docstring", "p", {"default": [0.5 + u for u in ups], "rrf": [0.5] * 8})]
    d = paired(group, "default", "rrf", "ndcg@10", resamples=R)
    assert d.diff.estimate == pytest.approx(0.045)
    assert d.raw_mean == pytest.approx(0.045)
    assert d.wilcoxon.p_value == pytest.approx(2 / 256)
    assert d.wilcoxon.n == 8 and not d.significant_loss
    back = paired(group, "rrf", "default", "ndcg@10", resamples=R)
    assert back.significant_loss  # the CI lies below 0 and p < .05


def test_kind_verdict_no_significant_loss():
    ups = [0.01 * i for i in range(1, 9)]
    ahead = kind_numbers(
        "docstring",
        [
            cell(
                "docstring",
                "p",
                {"default": [0.5 + u for u in ups], "rrf": [0.5] * 8, "grep": [0.1] * 8},
            )
        ],
        ["default", "rrf", "grep"],
        resamples=R,
    )
    assert ahead.best_baseline() == "rrf"
    v = kind_verdict(ahead)
    assert v.status == PASS and "best baseline rrf 0.500" in v.evidence and "+0.045" in v.evidence
    behind = kind_numbers(
        "commits",
        [cell("commits", "p", {"default": [0.5] * 8, "rrf": [0.5 + u for u in ups]})],
        ["default", "rrf"],
        resamples=R,
    )
    v = kind_verdict(behind)
    assert v.status == FAIL and "significant loss: rrf ndcg@10 -0.045" in v.evidence
    # Behind on two queries of eight, ties elsewhere: not significant (p .5), so no loss.
    near = kind_numbers(
        "reports",
        [cell("reports", "p", {"default": [0.5] * 8, "rrf": [0.6, 0.7] + [0.5] * 6})],
        ["default", "rrf"],
        resamples=R,
    )
    v = kind_verdict(near)
    assert v.status == PASS and v.evidence.endswith("; behind, not significantly")


def test_pooled_verdict_needs_p_below_001():
    ups = [0.01 * i for i in range(1, 9)]
    eight = kind_numbers(
        "pooled",
        [
            cell("docstring", "p", {"default": [0.5 + u for u in ups[:4]], "rrf": [0.5] * 4}),
            cell("commits", "p", {"default": [0.5 + u for u in ups[4:]], "rrf": [0.5] * 4}),
        ],
        ["default", "rrf"],
        resamples=R,
    )
    v = pooled_verdict(eight)
    assert v.status == PASS and "p 0.00781" in v.evidence  # 2 / 2^8
    assert pooled_verdict(eight, ["reports"]).status == INCOMPLETE
    six = kind_numbers(
        "pooled",
        [cell("docstring", "p", {"default": [0.5 + u for u in ups[:6]], "rrf": [0.5] * 6})],
        ["default", "rrf"],
        resamples=R,
    )
    assert pooled_verdict(six).status == FAIL  # all six ahead: p = 2 / 2^6 = .03125


def test_acc5_verdict_margin():
    def reports(default_hits: int, baseline_hits: int):
        c = cell("reports", "p", {"default": [0.0] * 10, "bm25-file": [0.0] * 10}, metric="acc@5")
        c.values["default"]["acc@5"] = [1.0] * default_hits + [0.0] * (10 - default_hits)
        c.values["bm25-file"]["acc@5"] = [1.0] * baseline_hits + [0.0] * (10 - baseline_hits)
        return kind_numbers("reports", [c], ["default", "bm25-file"], resamples=R)

    v = acc5_verdict(reports(6, 5))  # .6 - .5 = .10: exactly the margin
    assert (
        v.status == PASS and "default 0.600, best baseline bm25-file 0.500: Δ +0.100" in v.evidence
    )
    assert acc5_verdict(reports(5, 5)).status == FAIL
    assert acc5_verdict(None).status == INCOMPLETE


def test_code3_per_project_over_every_kind():
    a = cell("docstring", "a", {"default": [1.0] * 20})
    a.values["default"]["code@3"] = [1.0] * 20
    b1 = cell("docstring", "b", {"default": [1.0] * 20})
    b1.values["default"]["code@3"] = [1.0] * 20
    b2 = cell("questions-code", "b", {"default": [1.0] * 10})
    b2.values["default"]["code@3"] = [1.0] * 9 + [0.0]  # 29 / 30 = .967 < .97
    by = code3_by_project([a, b1, b2])
    assert by == {"a": (1.0, 20), "b": (pytest.approx(29 / 30), 30)}
    v = code3_verdict(by)
    assert v.status == FAIL and "b 0.967 (n 30)" in v.evidence
    assert code3_verdict({"a": (1.0, 20), "b": (0.97, 100)}).status == PASS


def test_latency_percentiles_and_verdict():
    c = cell("docstring", "p", {"default": [1.0] * 5}, took=[10, 20, 30, 40, 200])
    lat = latency([c])
    assert lat["all"]["p50"] == 30 and lat["all"]["p95"] == pytest.approx(168.0)  # 40 + .8 * 160
    assert latency_verdict(lat, 150.0).status == FAIL
    assert (
        latency_verdict(latency([cell("x", "p", {"default": [1.0]}, took=[12])]), 150).status
        == PASS
    )


# -- records to report ----------------------------------------------------------------------
def _rec(task: str, project: str, rows_by_system: dict[str, list[dict]]) -> dict:
    return {"task": task, "project": project, "version": "1", "split": "validation",
            "spans": 10, "seconds": 1.0, "warnings": [], "systems": rows_by_system}  # fmt: skip


def _row(intent: str, v: float, **extra) -> dict:
    code = (1.0 if v > 0 else 0.0) if intent == "code" else None
    return {"query": "q", "intent": intent, "mrr@10": v, "ndcg@10": v, "hit@5": float(v > 0),
            "code@3": code, "took_ms": 5.0, **extra}  # fmt: skip


def test_summarize_splits_questions_by_intent_and_flags_failures():
    systems = ("default", "grep", "bm25-only", "dense-only", "rrf")
    questions = _rec("questions", "p", {
        s: [_row("code", 1.0), _row("docs", 0.5 if s == "default" else 0.25), _row("mixed", 0.0)]
        for s in systems
    })  # fmt: skip
    accs = {"acc@1": 1.0, "acc@5": 1.0, "acc@10": 1.0}
    reports = _rec("reports", "p", {
        s: [_row("code", 1.0, **accs)] for s in (*systems, "bm25-file")
    })  # fmt: skip
    report = summarize([questions, reports], split="validation", tasks=("questions", "reports"),
                       resamples=R)  # fmt: skip
    assert list(report.kinds) == ["questions-code", "questions-docs", "questions-mixed", "reports"]
    assert report.kinds["questions-docs"].metrics["default"]["ndcg@10"].estimate == 0.5
    assert "bm25-file" in report.kinds["reports"].metrics
    assert "bm25-file" not in report.pooled.metrics  # not run on every kind
    # kinds equal: (1 + .5 + 0 + 1) / 4 = .625 for default
    assert report.pooled.metrics["default"]["ndcg@10"].estimate == pytest.approx(0.625)
    assert report.code3 == {"p": (1.0, 2)}
    rows = {v.row: v.status for v in report.verdicts}
    at_least = ": at least as good as the best baseline"
    assert rows["questions-docs" + at_least + " (no significant loss)"] == PASS
    assert rows["reports" + at_least + " (no significant loss)"] == PASS
    assert rows["reports: file Acc@5 ≥ best baseline's + 0.10"] == FAIL  # 1.0 against 1.0
    failed = summarize([questions, reports], split="validation",
                       tasks=("docstring", "questions", "reports"), resamples=R,
                       failures=[{"task": "reports", "project": "q", "error": "no mirror"}])  # fmt: skip
    rows = {v.row: v.status for v in failed.verdicts}
    assert rows["docstring" + at_least] == INCOMPLETE  # not run
    assert rows["questions-docs" + at_least + " (no significant loss)"] == PASS
    assert rows["reports" + at_least + " (no significant loss)"] == INCOMPLETE
    text = markdown(failed)
    assert "reports, q: no mirror" in text and "| questions-docs | span | 1 |" in text
    doc = json.loads(json.dumps(failed.to_json()))
    assert doc["failures"][0]["project"] == "q" and doc["verdicts"]


# -- task (d): files as --files groups them --------------------------------------------------
def test_grouped_file_searcher_returns_each_files_best_span():
    from lab.protocol.reports import GroupedFileSearcher

    def span(path, start):
        return SimpleNamespace(path=path, start_line=start, end_line=start + 2, lang="python")

    spans = [span("a.py", 1), span("b.py", 5), span("b.py", 9), span("b.py", 20), span("c.md", 1)]

    class Fixed:
        asked = []

        def search(self, query, k=None):
            self.asked.append(k)
            return SimpleNamespace(results=spans[:k], route=None)

    inner = Fixed()
    out = GroupedFileSearcher(inner, spans=100).search("q", k=3)
    assert inner.asked == [100]
    # each file once, at its best span (the `max` file score: files in their best span's order)
    assert [(r.path, r.start_line) for r in out.results] == [("a.py", 1), ("b.py", 5), ("c.md", 1)]
    assert len(GroupedFileSearcher(inner).search("q", k=2).results) == 2


def test_grouped_file_searcher_fuses_the_whole_file_list_as_files_does():
    """The file tasks score `default` as `--files` answers: its whole-file list fused in at
    its config's weight (a file only that list has comes as a whole-file result); the
    baselines' variants set the weight to 0, so theirs are their span lists grouped."""
    from lab.protocol.reports import GroupedFileSearcher
    from llmc.config import load_config
    from llmc.eval.variants import variant_config

    spans = [SimpleNamespace(path=p, start_line=1, end_line=3, lang="python")
             for p in ("a.py", "b.py", "c.py")]  # fmt: skip

    class WithFiles:
        def __init__(self, weight):
            self.cfg = SimpleNamespace(
                search=SimpleNamespace(file_bm25_weight=weight, file_ranker="fusion")
            )

        def search(self, query, k=None):
            return SimpleNamespace(results=spans[:k], route=None)

        def whole_files(self, query):
            return ["kw.py", "c.py"]

    fused = GroupedFileSearcher(WithFiles(0.2), spans=50).search("q", k=4).results
    # c.py: 1/13 + 0.2/12 passes a.py's 1/11; kw.py: 0.2/11 only
    assert [r.path for r in fused] == ["c.py", "a.py", "b.py", "kw.py"]
    assert fused[3].start_line == 1 and fused[3].lang is None  # the whole file, no span
    flat = GroupedFileSearcher(WithFiles(0.0), spans=50).search("q", k=4).results
    assert [r.path for r in flat] == ["a.py", "b.py", "c.py"]
    cfg = load_config(None)
    assert cfg.search.file_bm25_weight > 0
    for baseline in ("rrf", "bm25-only", "dense-only"):
        assert variant_config(cfg, baseline).search.file_bm25_weight == 0.0
    assert variant_config(cfg, "default").search.file_bm25_weight == cfg.search.file_bm25_weight


# -- a run over a fixture project (task (a): no download, no mirror) -------------------------
FIXTURE = {
    "pkg/__init__.py": "",
    "pkg/shapes.py": '''def circle_area(radius):
    """Compute the area of a circle from its radius."""
    squared = radius * radius
    return 3.14159 * squared


def square_perimeter(side):
    """Return the perimeter of a square with the given side."""
    sides = 4
    return sides * side


def triangle_area(base, height):
    """Compute the area of a triangle from its base and height."""
    doubled = base * height
    return doubled / 2
''',
    "pkg/words.py": '''def slugify_title(title):
    """Turn a title into a lowercase slug for web addresses."""
    words = title.lower().split()
    return "-".join(words)


def count_vowels(text):
    """Count how many vowels the text contains."""
    lowered = text.lower()
    return sum(ch in "aeiou" for ch in lowered)
''',
    "README.md": "# pkg\n\nShapes and words.\n",
}


def test_every_kind_run_over_a_fixture_project(tmp_path):
    from lab.protocol import kinds_run
    from lab.protocol.kinds_run import run_every_kind

    source = tmp_path / "src"
    for rel, text in FIXTURE.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    fixture = SplitProject(Project("proj", "1.0", "0" * 64), "validation")

    def fetch(project: Project, cache_dir: Path) -> Path:
        return source

    out = tmp_path / "out"
    report = run_every_kind("validation", ("docstring",), [fixture], cache_dir=tmp_path / "c",
                            out=out, resamples=R, fetch=fetch)  # fmt: skip
    nums = report.kinds["docstring"]
    assert nums.n == 5 and set(nums.metrics) == set(kinds.systems_for("docstring"))
    assert report.pooled.metrics["default"]["ndcg@10"].estimate == pytest.approx(
        nums.metrics["default"]["ndcg@10"].estimate
    )  # one kind: pooled is that kind
    assert report.code3["proj"][1] == 5 and report.latency["all"]["n"] == 5
    rows = {v.row.split(":")[0]: v.status for v in report.verdicts}
    assert rows["docstring"] in (PASS, FAIL)
    saved = json.loads((out / "runs" / "docstring-proj.json").read_text())
    assert len(saved["systems"]["default"]) == 5 and saved["max_queries"] == 60
    # resume reads the run back instead of searching again: same numbers
    again = run_every_kind("validation", ("docstring",), [fixture], cache_dir=tmp_path / "c",
                           out=out, resume=True, resamples=R, fetch=None)  # fmt: skip
    assert again.kinds["docstring"].metrics["rrf"]["mrr@10"] == nums.metrics["rrf"]["mrr@10"]
    assert saved["code"] == kinds_run.code_id() and "Code: " + saved["code"] in markdown(again)
    # a run saved by other code, or with another max queries, is not read back
    path = out / "runs" / "docstring-proj.json"
    want = {k: saved[k] for k in ("split", "max_queries", "seed", "code")}
    assert kinds_run._reuse(path, want) is not None
    assert kinds_run._reuse(path, want | {"code": "0123abcd"}) is None
    assert kinds_run._reuse(path, want | {"max_queries": 30}) is None


def test_cli_dry_run_lists_sets_without_searching():
    from click.testing import CliRunner

    from lab.cli import main

    out = CliRunner().invoke(
        main, ["protocol", "--split", "validation", "--tasks", "a,b", "--dry-run"]
    )
    assert out.exit_code == 0, out.output
    assert "| docstring | attrs |" in out.output and "| questions | express |" in out.output
    assert "| questions | attrs | - | 0 | no question file |" in out.output
    bad = CliRunner().invoke(main, ["protocol", "--tasks", "a,z", "--dry-run"])
    assert bad.exit_code == 1 and "unknown task 'z'" in bad.output
    both = CliRunner().invoke(main, ["protocol", "--tasks", "a", "--task", "commits"])
    assert both.exit_code == 2 and "not both" in both.output
    alone = CliRunner().invoke(main, ["protocol", "--dry-run"])
    assert alone.exit_code == 2 and "go with --tasks" in alone.output
