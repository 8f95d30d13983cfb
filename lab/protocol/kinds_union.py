"""Every kind over the projects of **several** runs, as one report: the verdicts of issue 28
over every test project when the test split grew after a run (fresh projects added and run
once, the earlier run kept as it was, not run again).

Each input is a ``report.json`` that ``python -m lab protocol --tasks ... --out DIR`` wrote
(its ``runs`` hold every query's numbers). The union refuses a (task, project) that two
inputs both ran (a project is counted once) and inputs of different max queries or seeds;
the numbers are ``kinds.summarize`` over all the runs, exactly as one run over every project
would give them (bootstrap strata are (kind, project), so no run weighs more than its
queries)::

    python -m lab.protocol.kinds_union --out DIR RUN1/report.json RUN2/report.json
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.protocol.kinds import EveryKindReport, summarize
from llmc.errors import EvalError

TASK_ORDER = ("docstring", "questions", "commits", "reports")


def read_report(path: Path) -> dict[str, Any]:
    """A ``report.json`` (or ``report.json.gz``) with its per-query runs."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    runs = doc.get("runs") or []
    if not runs or any("systems" not in r for r in runs):
        raise EvalError(f"{path}: no per-query runs (write it with --out, per query)")
    return doc


def union_report(
    paths: Sequence[Path], *, resamples: int = 2000, budget_ms: float | None = None
) -> EveryKindReport:
    """``kinds.summarize`` over the runs of every report at ``paths``."""
    if not paths:
        raise EvalError("no report to join")
    docs = [read_report(p) for p in paths]
    for key in ("max_queries", "seed"):
        values = {d.get(key) for d in docs}
        if len(values) > 1:
            raise EvalError(f"the reports differ in {key}: {sorted(map(str, values))}")
    seen: dict[tuple[str, str], Path] = {}
    runs: list[dict[str, Any]] = []
    for path, doc in zip(paths, docs, strict=True):
        for run in doc["runs"]:
            key = (str(run["task"]), str(run["project"]).lower())
            if key in seen:
                raise EvalError(f"{key[0]} of {key[1]} is in {seen[key]} and in {path}")
            seen[key] = path
            runs.append(run)
    tasks = [t for t in TASK_ORDER if any(t in d.get("tasks", ()) for d in docs)]
    splits = sorted({str(d.get("split", "")) for d in docs})
    budget = budget_ms if budget_ms is not None else float(docs[0].get("budget_ms", 150.0))
    failures = [f for d in docs for f in d.get("failures", [])]
    return summarize(
        runs, split="+".join(splits), tasks=tasks, max_queries=int(docs[0]["max_queries"]),
        seed=int(docs[0]["seed"]), resamples=resamples, budget_ms=budget, failures=failures,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from lab.protocol.kinds_markdown import markdown

    ap = argparse.ArgumentParser(prog="python -m lab.protocol.kinds_union")
    ap.add_argument("reports", nargs="+", type=Path, help="report.json files of --tasks runs")
    ap.add_argument("--out", type=Path, required=True, help="writes report.md and report.json")
    args = ap.parse_args(argv)
    report = union_report(args.reports)
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(report)
    (args.out / "report.md").write_text(text, encoding="utf-8")
    doc = json.dumps(report.to_json(per_query=False), indent=1)
    (args.out / "report.json").write_text(doc + "\n", encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["read_report", "union_report"]
