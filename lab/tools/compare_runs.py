"""Compare one system of two protocol runs of the same split, query by query.

    python -m lab.tools.compare_runs BEFORE_DIR AFTER_DIR [--system default] [--out FILE.md]

BEFORE_DIR and AFTER_DIR are `python -m lab protocol --out DIR` folders (their `runs/`
JSON files) made from two checkouts with the same split, seed and max queries. Every
(task, project) run found in both is paired query by query (the runs are seeded, so the
same queries come in the same order; a mismatch is an error). Per kind (docstring,
questions-code/docs/mixed, commits, reports) and pooled over kinds (each kind weighing
the same, as `kinds.py` pools): after - before on nDCG@10, MRR@10 and Hit@5 with a 95%
bootstrap CI (queries resampled within their project) and Wilcoxon signed-rank p, plus
how many queries moved up and down. Reports add Acc@1 and Acc@5.

A tool for choosing a default on validation data; the lab's own report compares systems
within one run (`kinds_markdown.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.protocol.kinds import KINDS, Cell, cells, paired

BEFORE, AFTER = "before", "after"
METRICS = ("ndcg@10", "mrr@10", "hit@5")
REPORT_METRICS = ("acc@1", "acc@5")


def _runs(folder: Path) -> dict[str, dict]:
    out = {}
    for path in sorted((folder / "runs").glob("*.json")):
        rec = json.loads(path.read_text())
        out[path.stem] = rec
    return out


def _paired_cells(before: dict, after: dict, system: str) -> list[Cell]:
    """Cells holding ``before`` and ``after`` as two systems of one run."""
    rec = {k: before[k] for k in ("task", "project")}
    b_rows, a_rows = before["systems"].get(system), after["systems"].get(system)
    if b_rows is None or a_rows is None:
        return []
    if [r["query"] for r in b_rows] != [r["query"] for r in a_rows]:
        raise SystemExit(f"{before['task']}-{before['project']}: the queries differ")
    rec["systems"] = {BEFORE: b_rows, AFTER: a_rows}
    return cells(rec)


def _moved(group: list[Cell], metric: str) -> tuple[int, int]:
    up = down = 0
    for c in group:
        for b, a in zip(c.values[BEFORE][metric], c.values[AFTER][metric], strict=True):
            if a is None or b is None:
                continue
            up += a > b
            down += a < b
    return up, down


def _line(name: str, group: list[Cell], metric: str) -> str:
    diff = paired(group, AFTER, BEFORE, metric)
    if diff is None:
        return ""
    up, down = _moved(group, metric)
    ci = diff.diff
    n = sum(c.n for c in group)
    return (
        f"| {name} | {n} | {metric} | {ci.estimate:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}] "
        f"| {diff.wilcoxon.p_value:.3g} | {up} / {down} |"
    )


def compare(before_dir: Path, after_dir: Path, system: str) -> str:
    before, after = _runs(before_dir), _runs(after_dir)
    common = sorted(set(before) & set(after))
    by_kind: dict[str, list[Cell]] = {}
    for key in common:
        for cell in _paired_cells(before[key], after[key], system):
            by_kind.setdefault(cell.kind, []).append(cell)
    lines = [
        f"`{system}`: {after_dir} minus {before_dir}, {len(common)} paired (task, project) runs",
        "",
        "| kind | queries | metric | Δ [95% CI] | Wilcoxon p | up / down |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    everything: list[Cell] = []
    for kind in KINDS:
        group = by_kind.get(kind, [])
        if not group:
            continue
        everything += group
        metrics = METRICS + (REPORT_METRICS if kind == "reports" else ())
        lines += [ln for m in metrics if (ln := _line(kind, group, m))]
    lines += [ln for m in METRICS if (ln := _line("pooled (kinds equal)", everything, m))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--system", default="default")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    text = compare(args.before, args.after, args.system)
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
