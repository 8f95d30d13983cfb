"""Run every shipped eval set with every ablation and write one markdown report.

    python benchmarks/run_eval.py                           # all sets -> stdout
    python benchmarks/run_eval.py --out benchmarks/eval.md  # ... into a file
    python benchmarks/run_eval.py --sets attrs llmc --json results.json

Project sets download their pinned sdist from PyPI on first use (``pip download``, into
``eval.cache_dir``, default ``~/.cache/llmc/eval``) and index it there; the llmc set is
judged against this checkout. Each set runs the default pipeline and every stage-off
variant this build has (``llmc eval SET --ablate``); p-values are paired tests against
default (Wilcoxon on reciprocal ranks, exact McNemar on hit@5). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from llmc.eval import tables as fmt  # noqa: E402
from llmc.eval.projects import shipped_sets  # noqa: E402
from llmc.eval.runner import evaluate_set  # noqa: E402


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True
        )
        return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class _StderrProgress:
    """The indexer's Progress protocol, as plain lines on stderr."""

    def phase(self, name: str, total: int | None) -> None:
        print(f"  {name}" + (f" ({total})" if total else ""), file=sys.stderr, flush=True)

    def advance(self, n: int = 1) -> None:
        pass

    def note(self, message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=None, help="set names (default: all shipped)")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown here")
    ap.add_argument("--json", type=Path, default=None, help="also write every report as JSON")
    ap.add_argument("--cache", type=Path, default=None, help="where projects are unpacked")
    ap.add_argument("-k", type=int, default=None, help="results per query (default search.k)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    names = args.sets or shipped_sets()
    parts = [
        "## llmc eval results",
        "",
        f"llmc {_git_commit()}, {time.strftime('%Y-%m-%d')}, {_cpu()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}. "
        "Latency: in-process, warm, wall time per query. "
        "p RR / p hit@5: paired tests against default.",
        "",
    ]
    reports = {}
    for name in names:
        print(f"{name}:", file=sys.stderr, flush=True)
        started = time.perf_counter()
        rep = evaluate_set(
            name, ablate=True, k=args.k, cache_dir=args.cache, progress=_StderrProgress()
        )
        print(f"  done in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
        reports[name] = rep
        parts.append(fmt.markdown(rep))
        for w in rep.warnings:
            parts.append(f"- warning: {w}")
    text = "\n".join(parts).rstrip() + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.json:
        data = {name: rep.to_json(per_query=True) for name, rep in reports.items()}
        args.json.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
