"""Lookups and pasted error messages, mined from Python projects, through the shipped search.

    python -m lab.tools.lookup_message_eval CORPUS_DIR... [--per-kind 25] [--seed 0] --out FILE.json

For each indexed corpus (a `python -m lab protocol` corpus folder, already indexed), mined
with `ast` from the code outside tests, docs and examples:

- **lookup**: a class or function whose name is defined once in the project, asked as
  "class X" / "X class" (classes) or "the x function" / "x method" / "def x" (functions,
  methods). Correct: a result in the definition's file whose lines hold its `def`/`class`
  line and whose symbol is the name.
- **message**: `raise SomeError("a literal message of three words or more")`, asked as
  "SomeError: <message>" (what a terminal shows). Correct: a result in that file whose
  lines hold the `raise`.

Every query goes through `llmc.search.Searcher.search` (the CLI's, the daemon's and MCP's
answer path). Per project and kind: each query's reciprocal rank at 10 and Acc@1/Acc@5,
written to ``--out`` for `compare` below. Run it once per checkout (PYTHONPATH picks the
checkout), then compare two outputs:

    python -m lab.tools.lookup_message_eval compare BEFORE.json AFTER.json

A tool for choosing on validation projects; never point it at test or reserved projects.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

SKIP_PARTS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "bench"}
K = 10


@dataclass(frozen=True)
class Query:
    kind: str
    text: str
    path: str
    line: int  # the def/class line (lookup) or the raise line (message)
    symbol: str = ""  # lookups: the name the result must carry


def _sources(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if any(part in SKIP_PARTS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if rel.name.startswith("test_") or rel.name in ("setup.py", "noxfile.py", "conftest.py"):
            continue
        out.append(p)
    return out


def _trees(paths: Iterable[Path]) -> Iterator[tuple[Path, ast.Module]]:
    """Each file parsed (a file ``ast`` cannot parse is left out)."""
    for path in paths:
        try:
            yield path, ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue


def mine(root: Path, per_kind: int, seed: int) -> list[Query]:
    defs: list[tuple[str, str, str, int]] = []  # (kind, name, path, line)
    messages: list[Query] = []
    counts: Counter[str] = Counter()
    for _, tree in _trees(root.rglob("*.py")):  # every definition counts, tests too
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                counts[node.name] += 1
    for path, tree in _trees(_sources(root)):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("__") or len(node.name) < 4:
                    continue
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                defs.append((kind, node.name, rel, node.lineno))
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                q = _message(node, rel)
                if q is not None:
                    messages.append(q)
    rng = random.Random(f"{seed}:{root.resolve().parent.name}:{root.name}")
    unique = [d for d in defs if counts[d[1]] == 1]
    rng.shuffle(unique)
    lookups = []
    for i, (kind, name, rel, line) in enumerate(unique[:per_kind]):
        if kind == "class":
            text = ("class {}", "{} class")[i % 2].format(name)
        else:
            text = ("the {} function", "{} method", "def {}")[i % 3].format(name)
        lookups.append(Query("lookup", text, rel, line, name))
    seen: set[str] = set()
    kept = []
    for q in messages:
        if q.text not in seen:
            seen.add(q.text)
            kept.append(q)
    rng.shuffle(kept)
    return lookups + kept[:per_kind]


def _message(node: ast.Raise, rel: str) -> Query | None:
    call = node.exc
    assert isinstance(call, ast.Call)
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if not name.endswith(("Error", "Exception", "Warning")) or not call.args:
        return None
    arg = call.args[0]
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return None
    message = " ".join(arg.value.split())
    if len(message.split()) < 3 or len(message) > 200:
        return None
    return Query("message", f"{name}: {message}", rel, node.lineno)


def _correct(q: Query, r) -> bool:
    if r.path != q.path or not (r.start_line <= q.line <= r.end_line):
        return False
    return q.kind == "message" or r.symbol == q.symbol


def run(corpora: list[Path], per_kind: int, seed: int) -> dict:
    from llmc.config import load_config
    from llmc.search import Searcher

    out: dict = {"projects": {}}
    for root in corpora:
        queries = mine(root, per_kind, seed)
        searcher = Searcher(root, load_config(root))
        rows = []
        for q in queries:
            resp = searcher.search(q.text, k=K)
            rank = next((i + 1 for i, r in enumerate(resp.results) if _correct(q, r)), 0)
            rows.append({**asdict(q), "rank": rank, "took_ms": round(resp.took_ms, 2)})
        name = root.parent.name if root.name == "corpus" else root.name
        out["projects"][name] = rows
        print(f"{name}: {len(rows)} queries", file=sys.stderr)
    return out


def _scores(rows: list[dict]) -> dict[str, list[float]]:
    rr = [1.0 / r["rank"] if r["rank"] else 0.0 for r in rows]
    return {
        "mrr@10": rr,
        "acc@1": [float(r["rank"] == 1) for r in rows],
        "acc@5": [float(0 < r["rank"] <= 5) for r in rows],
    }


def compare(before_path: Path, after_path: Path) -> str:
    from llmc.eval.stats import bootstrap_ci, wilcoxon

    before = json.loads(before_path.read_text())["projects"]
    after = json.loads(after_path.read_text())["projects"]
    lines = [
        "| kind | queries | projects | metric | before | after | Δ [95% CI] | Wilcoxon p |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind in ("lookup", "message"):
        b_rows, a_rows, strata = [], [], []
        for project in sorted(set(before) & set(after)):
            b = [r for r in before[project] if r["kind"] == kind]
            a = [r for r in after[project] if r["kind"] == kind]
            if [r["text"] for r in b] != [r["text"] for r in a]:
                raise SystemExit(f"{project}: the {kind} queries differ")
            b_rows += b
            a_rows += a
            strata += [project] * len(b)
        if not b_rows:
            continue
        n_projects = len(set(strata))
        bs, as_ = _scores(b_rows), _scores(a_rows)
        for metric in ("mrr@10", "acc@1", "acc@5"):
            diffs = [x - y for x, y in zip(as_[metric], bs[metric], strict=True)]
            ci = bootstrap_ci(diffs, strata, resamples=2000, seed=0)
            p = wilcoxon(as_[metric], bs[metric]).p_value
            mb, ma = sum(bs[metric]) / len(b_rows), sum(as_[metric]) / len(a_rows)
            lines.append(
                f"| {kind} | {len(b_rows)} | {n_projects} | {metric} | {mb:.3f} | {ma:.3f} "
                f"| {ci.estimate:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}] | {p:.3g} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "compare":
        sys.stdout.write(compare(Path(argv[1]), Path(argv[2])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--per-kind", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.write_text(json.dumps(run(args.corpora, args.per_kind, args.seed), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
