"""Task (d) of the protocol: a long report (an issue-style text) → the files its fix
changed, from real git histories (docs/evaluation.md, "Long reports → files").

- **History and corpus:** task (c)'s pins (``commits/projects.json``): the same mirror,
  the same **base** snapshot as corpus (so its index is shared) and the same ``base..head``
  range. ``reports/<project>.jsonl`` holds the mined queries, ``reports/projects.json``
  what the mining read, kept and skipped; both are committed and never re-mined by a run.
- **Queries** (``report_queries.mine_reports``): the commits of ``base..head``, oldest
  first, that read like a report: a non-merge commit whose body, without trailers
  (Signed-off-by, Co-authored-by...), holds at least 40 words or a traceback (a Python
  traceback or frame line, a JavaScript stack frame), or a ``Merge pull request #N``
  merge whose pull-request description does. Task (c)'s filters apply (reverts, version
  bumps, formatting only, ci / build / test commits, trivial subjects; a short subject is
  no reason here). The report is the title (the cleaned subject; a pull request's title)
  and the body, cut at 4,000 characters; a text seen before in the project is dropped.
  **Written** reports (``report_written.py``, ``reports/<project>.written.jsonl``) follow
  the mined ones: a writer's report of a task (c) commit, answered by that commit's files.
- **Answer:** the changed files judged as in task (c) (a merge: its diff against its first
  parent) with tests and configuration left out: non-test source (grade 3) and
  documentation (3 alone, 2 beside source) present in the base; skipped when more than
  10 files changed, when none is left, or when the change touches source or docs the base
  lacks.
- **Systems and scoring, file level:** every span system (``default``, ``bm25-only``,
  ``dense-only``, ``rrf``) is asked for ``SPANS`` spans, grouped into files by
  ``llmc.search.files.group_by_file`` (the ``--files`` answer); ``bm25-file`` ranks whole
  files (``file_rank.FileBM25Searcher``). Acc@1/5/10 (every answer file within the
  first k) and MRR@10 (``file_rank.file_scores``), per project and pooled, with
  bootstrap CIs and paired bootstrap CIs of ``default`` against each other system.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.protocol.commits import FileLevelSearcher
from lab.protocol.file_rank import BM25_FILE, FILE_METRICS, FileBM25Searcher, file_scores
from llmc.errors import EvalError
from llmc.eval.queries import EvalQuery, load_queries, write_eval_queries

log = logging.getLogger(__name__)

TASK = "reports"
TASK_VERSION = "1"
SETS_DIR = Path(__file__).parent / "reports"
PROJECTS_FILE = SETS_DIR / "projects.json"
SPANS = 100
SYSTEMS = ("default", "bm25-only", "dense-only", "rrf", BM25_FILE)


def report_projects(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """What was mined per project (lower-cased name → entry), {} when absent."""
    path = path or PROJECTS_FILE
    if not path.is_file():
        return {}
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {str(p["name"]).lower(): p for p in doc.get("projects", [])}


def queries_path(name: str) -> Path:
    return SETS_DIR / f"{name.lower()}.jsonl"


def has_reports(name: str) -> bool:
    """Whether ``name`` has a report set: mined reports, written ones, or both (a history
    with no report-length commit can still have written reports)."""
    from lab.protocol.report_written import written_path

    return any(
        p.is_file() and p.stat().st_size > 0 for p in (queries_path(name), written_path(name))
    )


def load_report_queries(name: str, max_queries: int | None = None) -> list[EvalQuery]:
    path = queries_path(name)
    if not path.is_file():
        raise EvalError(f"reports task: no mined reports for {name} (see {PROJECTS_FILE})")
    from lab.protocol.report_written import load_written

    mined = load_queries(path) if path.stat().st_size > 0 else []  # none kept: empty file
    queries = mined + load_written(name)  # mined first, then written
    return queries[:max_queries] if max_queries else queries


def mine_project(name: str, mirrors: Path, work: Path, head: str = "") -> dict[str, Any]:
    """Mine ``name``'s reports from its task (c) base up to ``head`` (default: the pinned
    head); writes ``reports/<name>.jsonl``."""
    from lab.protocol.commits import (
        _git,
        base_snapshot,
        commit_projects,
        find_mirror,
        indexable_files,
    )
    from lab.protocol.report_queries import mine_reports
    from llmc.gitlog import read_commits

    cp = commit_projects().get(name.lower())
    if cp is None:
        raise EvalError(f"reports task: {name} has no pinned history in commits/projects.json")
    git_dir = find_mirror(cp, mirrors)
    snapshot = base_snapshot(git_dir, cp.base, work / f"{cp.name}-{cp.base[:12]}" / "corpus")
    head = _git(git_dir, "rev-parse", f"{head or cp.head}^{{commit}}").strip()
    commits = list(reversed(read_commits(git_dir, None, f"{cp.base}..{head}")))
    mined = mine_reports(commits, indexable_files(snapshot), git_dir=git_dir)
    write_eval_queries(mined.queries, queries_path(cp.name))
    return {"name": cp.name, "base": cp.base, "head": head, "mined": mined.summary()}


def write_report_projects(rows: Sequence[dict[str, Any]], path: Path | None = None) -> None:
    path = path or PROJECTS_FILE
    doc = {
        "task": TASK,
        "task_version": TASK_VERSION,
        "pins": "commits/projects.json (same base and head)",
        "projects": sorted(rows, key=lambda r: r["name"]),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# -- running -------------------------------------------------------------------------------
def rank_files(searcher: Any, query: str, system: str, k: int = 10) -> list[str]:
    """The files ``system`` answers ``query`` with, best first (at most ``k``): the product's
    own file answer (``Searcher.answer``, as `llmc search --files`), or whole-file BM25's."""
    if system == BM25_FILE:
        return [r.path for r in searcher.search(query, k=k).results]
    return [h.path for h in searcher.answer(query, k=k, group="file", spans=SPANS).files]


def run_project(
    name: str,
    systems: Sequence[str] = SYSTEMS,
    *,
    cache_dir: Path,
    max_queries: int | None = None,
    spans_out: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every system on ``name``'s reports: per system, per query, the ranked files and
    their scores. ``spans_out`` (optional) receives each span system's raw span paths."""
    from lab.protocol.commits import prepare
    from llmc.config import load_config
    from llmc.eval.runner import ensure_index, variant_config
    from llmc.search import Searcher

    queries = load_report_queries(name, max_queries)
    if not queries:
        raise EvalError(f"reports task: {name} has no mined reports")
    started = time.perf_counter()
    _pin, corpus, _ = prepare(name, cache_dir, 1)
    cfg = load_config(corpus)
    ensure_index(corpus, cfg)
    out: dict[str, Any] = {"project": name, "queries": len(queries), "systems": {}}
    for system in systems:
        if system == BM25_FILE:
            searcher: Any = FileBM25Searcher(corpus)
        else:
            searcher = Searcher(corpus, variant_config(cfg, system))
        rows = []
        try:
            for q in queries:
                if system == BM25_FILE:
                    ranked = rank_files(searcher, q.query, system)
                else:  # the product's file answer, as `llmc search --files` gives it
                    found = searcher.answer(q.query, k=10, group="file", spans=SPANS)
                    if spans_out is not None:
                        spans_out.setdefault(system, []).append([r.path for r in found.results])
                    ranked = [h.path for h in found.files]
                answer = [j.path for j in q.relevant]
                rows.append({"id": q.id, "files": ranked, "answer": answer,
                             **_as_dict(file_scores(ranked, answer))})  # fmt: skip
        finally:
            close = getattr(searcher, "close", None)
            if callable(close):
                close()
        out["systems"][system] = rows
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


class GroupedFileSearcher(FileLevelSearcher):
    """A searcher whose results are files: the product's file answer (``Searcher.answer``
    with ``group="file"``, as `llmc search --files` gives it, over ``spans`` spans), each
    of the ``k`` best files as its best span (a file only whole-file BM25 found comes as the
    whole file). A baseline without that answer (grep, whole-file BM25) has its span list
    grouped the same way."""

    def __init__(self, inner: Any, spans: int = SPANS):
        super().__init__(inner, spans)

    def search(self, query: str, k: int | None = None) -> Any:
        from types import SimpleNamespace

        from llmc.search.files import group_by_file, whole_file_args

        want = k or 10
        if callable(getattr(self.inner, "answer", None)):
            found = self.inner.answer(query, k=want, group="file", spans=self.spans)
            hits, route = found.files, found.response.route
        else:
            response = self.inner.search(query, k=max(self.spans, want))
            hits = group_by_file(response.results, want, **whole_file_args(self.inner, query))
            route = getattr(response, "route", None)
        return SimpleNamespace(
            results=[h.spans[0] if h.spans else _whole(h.path) for h in hits], route=route
        )


def _whole(path: str) -> Any:
    """A result for a file only the whole-file list found (no span of it was asked for)."""
    from types import SimpleNamespace

    return SimpleNamespace(path=path, start_line=1, end_line=1, score=0.0, lang=None,
                           category=None)  # fmt: skip


def _as_dict(s: Any) -> dict[str, float]:
    return {m: s.value(m) for m in FILE_METRICS}


def table(runs: Sequence[dict[str, Any]], *, resamples: int = 2000, seed: int = 0) -> str:
    """A Markdown table: per system, each metric pooled over ``runs`` with its 95 % CI
    (queries resampled within their project), and default's paired MRR@10 difference."""
    from llmc.eval.stats import bootstrap_ci, paired_bootstrap_ci

    systems = list(runs[0]["systems"]) if runs else []
    strata = [r["project"] for r in runs for _ in r["systems"][systems[0]]] if systems else []
    head = "| system | n | " + " | ".join(FILE_METRICS) + " | MRR@10 − default [95 % CI] |"
    lines = [head, "|" + " --- |" * (len(FILE_METRICS) + 3)]
    base = [row["mrr@10"] for r in runs for row in r["systems"].get("default", [])]
    for s in systems:
        rows = [row for r in runs for row in r["systems"][s]]
        cells = []
        for m in FILE_METRICS:
            ci = bootstrap_ci([row[m] for row in rows], strata, resamples=resamples, seed=seed)
            cells.append(f"{ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
        if base and s != "default":
            d = paired_bootstrap_ci(
                [row["mrr@10"] for row in rows], base, strata, resamples=resamples, seed=seed
            )
            diff = f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        else:
            diff = ""
        lines.append(f"| {s} | {len(rows)} | " + " | ".join(cells) + f" | {diff} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.protocol.reports mine NAME...``: mine from the mirrors;
    ``... run NAME... [--json OUT]``: every system on those projects, a Markdown table."""
    import argparse
    import tempfile

    from lab.protocol.commits import mirrors_dir

    ap = argparse.ArgumentParser(prog="python -m lab.protocol.reports")
    ap.add_argument("action", choices=("mine", "run"))
    ap.add_argument("names", nargs="+")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--json", type=Path, default=None, help="run: write every ranking here")
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--head", default="", help="mine: up to this revision of the mirror")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.action == "mine":
        pinned = report_projects()
        work = Path(tempfile.gettempdir()) / "llmc-commits-mine"
        for name in args.names:
            row = mine_project(name, mirrors_dir(), work, args.head)
            pinned[name.lower()] = row
            print(f"{name}: {row['mined']}")
        write_report_projects(list(pinned.values()))
        return 0
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir

    cache = default_cache_dir(load_config(None).eval.cache_dir)
    systems = [s for s in args.systems.split(",") if s]
    runs = []
    for name in args.names:
        spans: dict[str, Any] = {}
        run = run_project(name, systems, cache_dir=cache, max_queries=args.max_queries,
                          spans_out=spans)  # fmt: skip
        run["spans"] = spans
        runs.append(run)
        log.info("%s: %d queries in %.0f s", name, run["queries"], run["seconds"])
        if args.json:
            args.json.write_text(json.dumps(runs) + "\n", encoding="utf-8")
    print(table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "PROJECTS_FILE",
    "GroupedFileSearcher",
    "SPANS",
    "SYSTEMS",
    "TASK",
    "has_reports",
    "load_report_queries",
    "mine_project",
    "rank_files",
    "report_projects",
    "run_project",
    "table",
    "write_report_projects",
]
