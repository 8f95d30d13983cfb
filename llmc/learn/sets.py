"""Query sets made from the repository itself: labels, git history, or query files.

``gather`` pools them for `llmc tune` (a query asked in two sources is kept once, labels
first); ``materialize`` writes one as an eval JSON Lines file under ``.llmc/learn/`` so
`llmc eval` can run it like any other set.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.errors import LearnError
from llmc.learn.judgments import query_key

log = logging.getLogger(__name__)

JUDGMENTS_SET = "judgments"
LEARN_DIR = "learn"


@dataclass
class QuerySet:
    """Pooled queries and where each came from (``origin``: judgments, git, or a file)."""

    queries: list = field(default_factory=list)  # list[EvalQuery]
    origin: dict[str, str] = field(default_factory=dict)  # query key → origin
    times: dict[str, int] = field(default_factory=dict)  # query key → commit time (git)
    notes: list[str] = field(default_factory=list)
    ignore: set[str] = field(default_factory=set)  # query files inside the repo: never results

    def add(self, queries: Sequence[Any], origin: str, times: dict[str, int] | None = None):
        added = 0
        for q in queries:
            key = query_key(q.query)
            if key in self.origin:
                continue
            self.origin[key] = origin
            self.queries.append(q)
            if times and q.id in times:
                self.times[key] = times[q.id]
            added += 1
        return added

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for origin in self.origin.values():
            out[origin] = out.get(origin, 0) + 1
        return out


def judged_queries(root: Path) -> list:
    from llmc.learn.judgments import judgments_path, load_labels, to_eval_queries

    labels, _ = load_labels(judgments_path(root))
    return to_eval_queries(labels)


def load_query_file(spec: str, root: Path) -> tuple[list, str | None]:
    """A query file path, or a shipped set name: its queries (judged against ``root``) and
    its path relative to ``root`` when it lies inside (search must not find it)."""
    from llmc.eval.projects import resolve_set
    from llmc.eval.queries import load_queries

    path = resolve_set(spec, root).queries_path
    try:
        inside: str | None = path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        inside = None
    return load_queries(path), inside


def gather(
    root: Path,
    cfg: Any,
    judgments: bool = True,
    from_git: int | None = None,
    files: Sequence[str] = (),
) -> QuerySet:
    """Pool the query sources ``llmc tune`` was asked to learn from."""
    out = QuerySet()
    if judgments:
        n = out.add(judged_queries(root), JUDGMENTS_SET)
        out.notes.append(f"{n} queries from .llmc/judgments.jsonl")
    for spec in files:
        queries, inside = load_query_file(spec, root)
        if inside:
            out.ignore.add(inside)
        n = out.add(queries, f"file:{Path(spec).stem}")
        out.notes.append(f"{n} queries from {spec}")
    if from_git is not None:
        from llmc.learn.gitmine import mine_git

        n_commits = from_git if from_git > 0 else cfg.learn.git_commits
        mined = mine_git(root, n_commits, cfg.learn.max_commit_files)
        n = out.add(mined.queries, "git", mined.times)
        out.notes.append(f"{n} queries mined from git: {mined.summary()}")
    return out


def materialize(root: Path, cfg: Any, spec: str | None, from_git: int | None) -> tuple[str, str]:
    """(query file, note) for `llmc eval`: ``judgments``, ``--from-git``, or ``spec`` as is."""
    from llmc.learn.judgments import write_eval_queries
    from llmc.paths import ensure_state_dir

    if from_git is None and spec != JUDGMENTS_SET:
        if spec is None:
            raise LearnError("give a query file or set name, `judgments`, or --from-git")
        return spec, ""
    if from_git is not None and spec is not None:
        raise LearnError("give either a query set or --from-git, not both")
    directory = ensure_state_dir(root) / LEARN_DIR
    if from_git is not None:
        from llmc.learn.gitmine import mine_git

        n = from_git if from_git > 0 else cfg.learn.git_commits
        mined = mine_git(root, n, cfg.learn.max_commit_files)
        if not mined.queries:
            raise LearnError(f"no query could be mined from git: {mined.summary()}")
        path = write_eval_queries(mined.queries, directory / f"git-{n}.jsonl")
        return str(path), mined.summary()
    queries = judged_queries(root)
    if not queries:
        raise LearnError(
            "no labeled query with a relevant result in .llmc/judgments.jsonl (`llmc label`)"
        )
    path = write_eval_queries(queries, directory / "judgments.jsonl")
    return str(path), f"{len(queries)} labeled queries"


__all__ = ["JUDGMENTS_SET", "QuerySet", "gather", "judged_queries", "materialize"]
