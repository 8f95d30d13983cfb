"""Run every kind in one go (``python -m lab protocol --tasks a,b,c,d``), or say what such a
run would do without searching (``--dry-run``): per task, per project of the split, the set,
its size, what is cached and what must be fetched, unpacked or indexed first.

Each finished project run is written to ``<out>/runs/<task>-<project>.json`` (its
per-query records, ``kinds.records``) as soon as it ends; ``resume`` reads those back
instead of running them again (same split, tasks, max queries and seed: the caller's
promise, checked against what the file records). A project that fails (a missing mirror,
unjudged question results, a fetch error) is recorded and the others go on; every verdict
it touches is then INCOMPLETE.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.protocol.core import COMMITS, QUESTIONS, REPORTS
from lab.protocol.kinds import (
    DOCSTRING,
    EveryKindReport,
    records,
    summarize,
    systems_for,
)
from lab.protocol.splits import SplitProject
from llmc.errors import EvalError

log = logging.getLogger(__name__)


def _projects(task: str, chosen: Sequence[SplitProject]) -> list[SplitProject]:
    from lab.protocol.run import _task_projects

    return list(_task_projects(task, chosen))


def _checkpoint(out: Path | None, task: str, name: str) -> Path | None:
    return out / "runs" / f"{task}-{name.lower()}.json" if out is not None else None


def code_id() -> str:
    """Which llmc ran: the checkout's commit (``+dirty`` when files under ``llmc/`` differ
    from it), else the package version (an export or an installed wheel)."""
    import subprocess

    from llmc import __version__
    from llmc.eval.projects import llmc_checkout

    root = llmc_checkout()
    if root is not None and (root / ".git").exists():
        try:
            git = ["git", "-C", str(root)]
            head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                  text=True, timeout=30, check=True).stdout.strip()  # fmt: skip
            dirty = subprocess.run([*git, "status", "--porcelain", "--", "llmc"],
                                   capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
            return head + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    return f"llmc {__version__} ({Path(__file__).resolve().parents[3]})"


def _reuse(path: Path | None, want: dict[str, Any]) -> dict | None:
    """The run saved at ``path`` when it was made with the same split, max queries, seed
    and code (``want``), else None."""
    if path is None or not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    differs = [k for k, v in want.items() if rec.get(k) != v]
    if differs:
        log.warning("%s: not reused (%s differ)", path, ", ".join(differs))
        return None
    return rec


def run_every_kind(
    split: str = "test",
    tasks: Sequence[str] = (DOCSTRING, QUESTIONS, COMMITS, REPORTS),
    projects: Sequence[str | SplitProject] = (),
    *,
    max_queries: int = 60,
    seed: int = 0,
    k: int = 10,
    resamples: int = 2000,
    cache_dir: Path | None = None,
    out: Path | None = None,
    resume: bool = False,
    fetch: Any = None,
    searcher_factory: Any = None,
    progress: Any = None,
) -> EveryKindReport:
    """Every task for ``default`` and every baseline, then ``kinds.summarize``."""
    from lab.protocol.run import run_project
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir, fetch_project

    chosen = _chosen(split, projects)
    cfg = load_config(None)
    base = cache_dir or default_cache_dir(cfg.eval.cache_dir)
    runs: list[dict[str, Any]] = []
    failures: list[dict[str, str]] = []
    want = {"split": split, "max_queries": max_queries, "seed": seed, "code": code_id()}
    for task in tasks:
        for sp in _projects(task, chosen):
            path = _checkpoint(out, task, sp.name)
            rec = _reuse(path, want) if resume else None
            if rec is not None:
                log.info("%s, %s: read back from %s", task, sp.name, path)
                runs.append(rec)
                continue
            if progress is not None:
                progress.note(f"{sp.project.set_name} ({sp.split}): task {task}")
            try:
                run = run_project(
                    sp, task, systems_for(task), cache_dir=base, max_queries=max_queries,
                    seed=seed, k=k, resamples=200, fetch=fetch or fetch_project,
                    searcher_factory=searcher_factory, progress=progress,
                )  # fmt: skip
            except EvalError as e:
                log.error("%s, %s: %s", task, sp.name, e)
                failures.append({"task": task, "project": sp.name, "error": str(e)})
                continue
            rec = records(run) | want
            runs.append(rec)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    return summarize(
        runs, split=split, tasks=tasks, max_queries=max_queries, seed=seed,
        resamples=resamples, budget_ms=cfg.search.budget_ms, failures=failures,
    )  # fmt: skip


def _chosen(split: str, projects: Sequence[str | SplitProject]) -> list[SplitProject]:
    from lab.protocol.run import chosen_projects

    return chosen_projects(split, projects)


# -- dry run -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanRow:
    task: str
    project: str
    systems: tuple[str, ...]
    queries: str  # how many, or how they will be made
    source: str  # where the set comes from
    corpus: str  # cached and indexed, cached, or what will be fetched / unpacked
    problem: str = ""  # non-empty: this row cannot run as things stand

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "project": self.project,
            "systems": list(self.systems),
            "queries": self.queries,
            "source": self.source,
            "corpus": self.corpus,
            "problem": self.problem,
        }


def _corpus_state(root: Path, what: str) -> str:
    from llmc.paths import db_path

    if db_path(root).is_file():
        return f"{what} cached and indexed ({root})"
    if root.is_dir():
        return f"{what} cached, to index ({root})"
    return ""


def plan(
    split: str = "test",
    tasks: Sequence[str] = (DOCSTRING, QUESTIONS, COMMITS, REPORTS),
    projects: Sequence[str] = (),
    *,
    max_queries: int = 60,
    seed: int = 0,
    cache_dir: Path | None = None,
) -> list[PlanRow]:
    """What ``run_every_kind`` would run, and whether every set and mirror is there; reads
    files and asks git only (no download, no index, no search)."""
    from lab.protocol import commits, reports
    from lab.protocol.docstring import TASK_VERSION
    from lab.protocol.question_files import judged_path, load_question_file, question_path
    from lab.protocol.report_written import written_path
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir

    chosen = _chosen(split, projects)
    base = cache_dir or default_cache_dir(load_config(None).eval.cache_dir)
    rows: list[PlanRow] = []
    for task in tasks:
        run_on = {sp.name for sp in _projects(task, chosen)}
        for sp in chosen:
            p = sp.project
            systems = systems_for(task)
            if sp.name not in run_on:
                why = {QUESTIONS: "no question file", COMMITS: "no pinned history",
                       REPORTS: "no mined reports"}.get(task, "")  # fmt: skip
                rows.append(PlanRow(task, p.name, (), "0", why, "not run"))
                continue
            fetched = _corpus_state(base / p.set_name, "archive") or (
                f"fetch {p.ecosystem} {p.name} {p.version} (sha256 pinned) into {base}"
            )
            if task == DOCSTRING:
                qpath = base / "protocol" / p.set_name / f"docstring-v{TASK_VERSION}-n{max_queries}-s{seed}.jsonl"  # fmt: skip
                n = (
                    f"{_lines(qpath)} (cached)"
                    if qpath.is_file()
                    else f"≤ {max_queries}, generated"
                )
                corpus = _corpus_state(base / "protocol" / p.set_name / "corpus", "stripped corpus")
                rows.append(PlanRow(task, p.name, systems, n, "the pinned archive's docstrings",
                                    corpus or f"{fetched}; strip; index"))  # fmt: skip
            elif task == QUESTIONS:
                problem = ""
                try:
                    qf = load_question_file(question_path(p.name))
                    n = str(len(qf.questions))
                    if (qf.project, qf.version) != (p.name, p.version):
                        problem = f"question file is for {qf.project} {qf.version}"
                except EvalError as e:
                    n, problem = "?", str(e)
                judged = judged_path(p.name)
                src = f"{question_path(p.name).name} + {_lines(judged)} judgments"
                rows.append(PlanRow(task, p.name, systems, n, src, fetched, problem))
            else:
                cp = commits.commit_projects()[p.name.lower()]
                qpath = cp.queries_path if task == COMMITS else reports.queries_path(p.name)
                have = _lines(qpath)
                if task == REPORTS:  # mined, then written (report_written.py)
                    have += _lines(written_path(p.name))
                n = str(min(have, max_queries))
                snap = base / "protocol" / "commits" / f"{cp.name}-{cp.base[:12]}" / "corpus"
                corpus, problem = _corpus_state(snap, "base snapshot"), ""
                try:  # the run asks for the mirror even when the snapshot is cached
                    git_dir = commits.find_mirror(cp, commits.mirrors_dir(base))
                    corpus = corpus or f"git archive {cp.base[:12]} of {git_dir}; index"
                except EvalError as e:
                    corpus, problem = corpus or "no mirror", str(e)
                rows.append(PlanRow(task, p.name, systems, n, qpath.name, corpus, problem))
    return rows


def _lines(path: Path) -> int:
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def plan_markdown(rows: Sequence[PlanRow]) -> str:
    head = "| task | project | systems | queries | set | corpus | problem |"
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        lines.append(
            f"| {r.task} | {r.project} | {', '.join(r.systems) or '-'} | {r.queries} | "
            f"{r.source} | {r.corpus} | {r.problem or ''} |"
        )
    bad = [r for r in rows if r.problem]
    lines.append("")
    lines.append(
        f"{len(bad)} problem(s): fix them before the run." if bad else "Every set is there."
    )
    return "\n".join(lines) + "\n"


__all__ = ["PlanRow", "plan", "plan_markdown", "run_every_kind"]
