"""How well-matched is a query? The signals behind `llmc search`'s "no good match" line,
measured on real questions and on queries no repository answers.

    python -m lab.tools.match_signal CORPUS_DIR... --runs VALIDATION_RUN_DIR --out FILE.json

For each indexed corpus: the real queries are the docstring and question queries of that
project in a `python -m lab protocol` run folder (`runs/*.json`); the junk queries are
gibberish words (seeded) and everyday questions no code base answers (a fixed list).
Every query goes through `Searcher.search(explain=True)` (the shipped path) and records
`llmc.search.match`'s signals: the share of the query's terms the lexical index holds,
the best dense cosine, and the verdict. The summary prints, per group, how many queries
are called "no good match": near 0 for the real queries, most for junk.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
from pathlib import Path

EVERYDAY = [
    "how long should I boil an egg",
    "best time of year to plant tomatoes",
    "what is the capital of Australia",
    "who won the football world cup in 1998",
    "recipe for banana bread without eggs",
    "how to fix a flat bicycle tyre",
    "symptoms of the common cold in children",
    "cheap flights from Berlin to Lisbon in May",
    "how many calories are in an avocado",
    "why is the sky blue during the day",
    "train my puppy to sit and stay",
    "what time does the bakery open on Sunday",
    "lyrics of a famous christmas song",
    "how to knit a wool scarf for beginners",
    "tips for running a marathon under four hours",
    "how deep is the Mariana trench",
    "meaning of the painting starry night",
    "when do cherry blossoms bloom in Kyoto",
    "how to remove a red wine stain from carpet",
    "how to grow basil on a windowsill",
]


def gibberish(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
            for _ in range(rng.randint(1, 4))
        ]
        out.append(" ".join(words))
    return out


def real_queries(runs: Path, project: str) -> list[str]:
    out: list[str] = []
    for task in ("docstring", "questions"):
        path = runs / "runs" / f"{task}-{project}.json"
        if path.is_file():
            rows = json.loads(path.read_text())["systems"]["default"]
            out += [r["query"] for r in rows]
    return out


def run(corpora: list[Path], runs: Path, seed: int) -> dict:
    from llmc.config import load_config
    from llmc.search import Searcher

    rng = random.Random(seed)
    out: dict = {}
    for root in corpora:
        project = (root.parent.name if root.name == "corpus" else root.name).rsplit("-", 1)[0]
        groups = {
            "real": real_queries(runs, project),
            "gibberish": gibberish(rng, 20),
            "everyday": EVERYDAY,
        }
        searcher = Searcher(root, load_config(root))
        rows = []
        for group, queries in groups.items():
            for q in queries:
                resp = searcher.search(q, k=10)
                m = resp.match.to_json() if resp.match is not None else None
                rows.append({"group": group, "query": q, "match": m})
        out[project] = rows
        print(f"{project}: {len(rows)} queries", file=sys.stderr)
    return out


def summary(data: dict) -> str:
    lines = ["| group | queries | no good match | share |", "| --- | --- | --- | --- |"]
    for group in ("real", "gibberish", "everyday"):
        rows = [r for rs in data.values() for r in rs if r["group"] == group]
        if not rows:
            continue
        flagged = sum(1 for r in rows if r["match"] and r["match"]["weak"])
        lines.append(f"| {group} | {len(rows)} | {flagged} | {flagged / len(rows):.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    data = run(args.corpora, args.runs, args.seed)
    args.out.write_text(json.dumps(data, indent=1))
    sys.stdout.write(summary(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
