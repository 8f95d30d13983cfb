"""Every kind over several runs (lab/protocol/kinds_union.py): two runs' reports
joined give the numbers one run over all their projects gives; overlaps and mismatched
runs are refused."""

from __future__ import annotations

import gzip
import json

import pytest

from lab.protocol.kinds import summarize
from lab.protocol.kinds_union import main, union_report
from llmc.errors import EvalError

SYSTEMS = ("default", "grep", "bm25-only", "dense-only", "rrf", "bm25-file")


def _run(project: str, default_acc5: list[float], rrf_acc5: list[float]) -> dict:
    def rows(accs):
        return [{"query": f"q{i}", "intent": "code", "mrr@10": a, "ndcg@10": a, "hit@5": a,
                 "code@3": 1.0, "took_ms": 5.0, "acc@1": a, "acc@5": a, "acc@10": a}
                for i, a in enumerate(accs)]  # fmt: skip

    systems = {s: rows(default_acc5 if s == "default" else rrf_acc5) for s in SYSTEMS}
    return {"task": "reports", "project": project, "version": "1", "split": "test",
            "spans": 10, "seconds": 1.0, "warnings": [], "systems": systems,
            "max_queries": 60, "seed": 0}  # fmt: skip


def _report(path, runs, **extra):
    doc = {"split": "test", "tasks": ["reports"], "max_queries": 60, "seed": 0,
           "budget_ms": 150.0, "runs": runs, "failures": [], **extra}  # fmt: skip
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_union_equals_one_run_over_every_project(tmp_path):
    # first run: Acc@5 default 1 of 2 ahead (+0.5 over rrf); second: level (0.0).
    a = _run("p", [1.0, 1.0], [1.0, 0.0])
    b = _run("q", [1.0, 0.0, 0.0], [1.0, 0.0, 0.0])
    first = _report(tmp_path / "a.json", [a])
    second = tmp_path / "b.json.gz"
    second.write_bytes(gzip.compress(_report(tmp_path / "b.json", [b]).read_bytes()))
    joined = union_report([first, second], resamples=200)
    whole = summarize([a, b], split="test", tasks=("reports",), resamples=200)
    acc5 = joined.kinds["reports"].metrics["default"]["acc@5"]
    assert acc5.estimate == whole.kinds["reports"].metrics["default"]["acc@5"].estimate
    # within-project means, projects weighed by their queries: (2 + 1) / 5 = 0.6
    assert acc5.estimate == pytest.approx(0.6)
    assert [v.status for v in joined.verdicts] == [v.status for v in whole.verdicts]
    assert joined.split == "test"


def test_union_refuses_a_project_run_twice_and_different_samples(tmp_path):
    a = _report(tmp_path / "a.json", [_run("p", [1.0], [0.0])])
    again = _report(tmp_path / "b.json", [_run("P", [0.0], [0.0])])
    with pytest.raises(EvalError, match="reports of p is in"):
        union_report([a, again])
    other = _report(tmp_path / "c.json", [_run("q", [1.0], [0.0])], seed=1)
    with pytest.raises(EvalError, match="differ in seed"):
        union_report([a, other])
    bare = tmp_path / "d.json"
    bare.write_text(json.dumps({"runs": [{"task": "reports", "project": "x"}]}))
    with pytest.raises(EvalError, match="no per-query runs"):
        union_report([bare])


def test_union_cli_writes_the_report(tmp_path, capsys):
    a = _report(tmp_path / "a.json", [_run("p", [1.0, 1.0], [0.0, 0.0])])
    assert main([str(a), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "reports: file Acc@5" in text and text == capsys.readouterr().out
    doc = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert doc["kinds"]["reports"] and doc["split"] == "test"
