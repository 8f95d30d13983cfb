"""Warm query latency per stage, the default pipeline after issue 29 (the latency budget)
against before it (HyDE on, no budget), over questions the HyDE cache has not seen.

    python benchmarks/bench_budget.py --repo PATH [--json out.json]

PATH is an indexed snapshot of this repository (`git archive HEAD llmc docs README.md
pyproject.toml`, `llmc index`): the shipped llmc question set (llmc/eval/sets/llmc.jsonl)
asks about it. Two mixes: code-heavy (its code and mixed questions) and docs-heavy (its
docs questions and DOCS_QUESTIONS below, vague natural-language questions written for this
benchmark). Variants, each in its own warm Searcher (models loaded, three untimed warm-up
queries first), asked each question in turn:

- ``after``: the default config; ``.llmc/costs.json`` is removed first, so the budget
  decides from the priors, as on a machine that has not timed HyDE;
- ``before``: ``search.budget_ms = 0`` (no budget: the pipeline as it was, HyDE gated by its
  own rules only) and ``hyde.cache = false`` (every HyDE question is one it has not seen).

Per mix and variant: p50 / p95 / p99 (nearest rank) of the total and of each stage (ms; a
stage that did not run counts 0), and how many queries ran HyDE. Runs in a few minutes on
2 cores; wrap it in `flock /tmp/llmc-cpu.lock` on a shared machine and state `uptime`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from llmc.config import load_config  # noqa: E402

SET = HERE.parent / "llmc" / "eval" / "sets" / "llmc.jsonl"
DOCS_QUESTIONS = [
    "how do I keep the daemon from using too much memory",
    "what should I do when search results look stale after editing files",
    "how can an editor plugin talk to the running daemon",
    "why would the first search after starting be slow",
    "how do I tell llmc to skip generated files in my project",
    "what does the explain output tell me about a query",
    "how are the evaluation projects split into train and validation",
    "where does llmc keep its data and who may read it",
    "how do I run the tool without any network access",
    "what happens when two index runs start at the same time",
    "how can I tune the ranking for my own repository",
    "what is the graph used for when answering a question",
    "how do I choose a different embedding model for code",
    "which settings can a request to the daemon change",
    "how do git hooks keep the index up to date",
    "how is a long markdown page cut into sections",
]
# untimed; the last is a vague docs question, so `before` has its LLM loaded when timing starts
WARM_UP = ["warm up the searcher", "Store", "how do I get started with this project"]
STAGES = ("embed", "bm25", "dense", "ranker", "hyde", "rerank", "llm_rerank", "results")


def questions() -> dict[str, list[str]]:
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line]
    code = [r["query"] for r in rows if r["intent"] in ("code", "mixed")]
    docs = [r["query"] for r in rows if r["intent"] == "docs"] + DOCS_QUESTIONS
    return {"code-heavy": code, "docs-heavy": docs}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0


VARIANTS = {"after": {}, "before": {"search.budget_ms": 0.0, "hyde.cache": False}}


def run(root: Path, mixes: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Both variants warm side by side, each question asked of one then the other, so
    that load from other jobs falls on both alike."""
    from llmc.search import Searcher

    (root / ".llmc" / "costs.json").unlink(missing_ok=True)  # `after` starts from priors
    searchers = {v: Searcher(root, load_config(root, o)) for v, o in VARIANTS.items()}
    out: dict[str, dict[str, Any]] = {v: {} for v in VARIANTS}
    try:
        for searcher in searchers.values():
            searcher.warm()
            for q in WARM_UP:
                searcher.search(q)
        for mix, qs in mixes.items():
            for v in VARIANTS:
                out[v][mix] = []
            for q in qs:
                for v, searcher in searchers.items():
                    r = searcher.search(q)
                    out[v][mix].append(
                        {"query": q, "took_ms": r.took_ms, "timings": dict(r.timings_ms),
                         "hyde": bool(r.hyde and r.hyde.used), "route": r.route.intent}
                    )  # fmt: skip
                    print(f"{v:6} {mix} {r.took_ms:8.1f} ms  {q}", file=sys.stderr)
    finally:
        for searcher in searchers.values():
            searcher.close()
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    totals = [r["took_ms"] for r in rows]
    stages = {
        s: [r["timings"].get(s, 0.0) for r in rows]
        for s in STAGES
        if any(s in r["timings"] for r in rows)
    }
    pick = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
    return {
        "n": len(rows),
        "hyde_ran": sum(r["hyde"] for r in rows),
        "total": {k: round(quantile(totals, q), 1) for k, q in pick.items()},
        "stages": {
            s: {k: round(quantile(v, q), 1) for k, q in pick.items()} for s, v in stages.items()
        },
    }


def machine() -> dict[str, str]:
    info = {"cpus": str(os.cpu_count())}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model name":
            info["model"] = value.strip()
        if key.strip() == "Flags":
            flags = set(value.split())
            wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
            info["flags"] = " ".join(f for f in wanted if f in flags)
    info["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return info


def table(results: dict[str, Any]) -> str:
    lines = [
        "| mix | variant | n | HyDE ran | total p50 / p95 / p99 | " + " | ".join(STAGES) + " |",
        "| --- " * (4 + 1 + len(STAGES)) + "|",
    ]
    for mix in results["after"]:
        for variant in ("before", "after"):
            s = results[variant][mix]
            t = s["total"]
            cells = []
            for stage in STAGES:
                v = s["stages"].get(stage)
                cells.append(f"{v['p50']:g} / {v['p95']:g} / {v['p99']:g}" if v else "–")
            lines.append(
                f"| {mix} | {variant} | {s['n']} | {s['hyde_ran']} | "
                f"{t['p50']:g} / {t['p95']:g} / {t['p99']:g} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="an indexed llmc snapshot")
    parser.add_argument("--json", type=Path, default=None, help="write every timing here")
    args = parser.parse_args()
    os.environ.setdefault("LLMC_NO_DAEMON", "1")
    root = args.repo.resolve()
    mixes = questions()
    started = time.time()
    before_machine = machine()
    raw = run(root, mixes)
    results = {v: {m: summarize(rows) for m, rows in raw[v].items()} for v in raw}
    after_machine = machine()
    print(f"CPU: {before_machine.get('model', '?')}, {before_machine['cpus']} CPUs, "
          f"flags {before_machine.get('flags', '?')}")  # fmt: skip
    print(f"before the run: {before_machine['uptime']}")
    print(f"after the run:  {after_machine['uptime']} ({time.time() - started:.0f} s)\n")
    print(table(results))
    if args.json:
        args.json.write_text(
            json.dumps({"machine": [before_machine, after_machine], "summary": results,
                        "raw": raw}, indent=1),
            encoding="utf-8",
        )  # fmt: skip


if __name__ == "__main__":
    main()
