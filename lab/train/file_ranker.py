"""``python -m lab train file-ranker``: the learned file ranker (``llmc.search.file_ranker``).

**Data (train projects only):** the git histories of ``file_histories()`` (the span
ranker's train histories and ``MORE_HISTORIES``, local mirrors): a base about
``REPORT_AFTER`` commits before the mirror's head, its snapshot as the corpus (the span
ranker's history corpora, shared), and from base..head every commit that reads as a
report (task (d)'s rules) and up to ``MAX_COMMITS`` commit subjects (task (c)'s rules),
each → the files its change touched, graded as those tasks grade them. Each query is
searched with the default pipeline (the span list ``--files`` asks for, the whole-file
list), and every candidate file of the plain fused order gets
``file_features.feature_rows``, the very rows the query-time ranker builds.

**Fit:** LightGBM lambdarank (``PARAMS``, chosen on the protocol's validation projects:
docs/reports/2026-11-27-file-ranker-validation.md), dumped as ``learned.FORMAT`` JSON over
``FILE_FEATURES`` and checked against LightGBM's own predictions.

**Report** (``TRAINING.json`` beside the model): the data by project and kind, the
parameters, and, when validation projects are given, file-level Acc@1/5/10, MRR@10 and
graded nDCG@10 on their commits and reports with and without the ranker.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.errors import TrainError
from llmc.search.file_features import CANDIDATES, FILE_FEATURES, feature_rows
from llmc.search.file_ranker import MODEL_DIR
from llmc.search.files import FILE_SPANS, group_by_file

log = logging.getLogger(__name__)

MAX_COMMITS = 150  # commit subjects per train history
# The span ranker's train histories and more: train-split projects (lab/protocol/
# projects.json), the span ranker's train projects (tqdm, h2) and one that was never in
# any split (isort); none is a validation, test or reserved project
# (tests/train/test_ranker_kinds.py checks that). markdown-it (JavaScript) is left out: its
# Python port markdown-it-py is a validation project. Tried and dropped: pluggy (its
# history yielded no query), fsspec and js-yaml (their mirrors lack objects their
# histories need).
MORE_HISTORIES = {
    "tenacity": "jd/tenacity",
    "toolz": "pytoolz/toolz",
    "tornado": "tornadoweb/tornado",
    "trio": "python-trio/trio",
    "rich": "Textualize/rich",
    "tqdm": "tqdm/tqdm",
    "h2": "python-hyper/h2",
    "isort": "PyCQA/isort",
}
PARAMS = {
    "objective": "lambdarank",
    "n_estimators": 300,
    "num_leaves": 7,
    "learning_rate": 0.05,
    "min_child_samples": 20,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    "lambdarank_truncation_level": 10,
}


@dataclass
class FileQuery:
    """One query's candidate files (the plain fused order), their rows and grades."""

    project: str
    kind: str  # commit | report
    order: list[str]
    rows: list[list[float]]
    grades: dict[str, int]
    answer: list[str] = field(default_factory=list)


def query_rows(searcher: Any, query: str, grades: dict[str, int], project: str, kind: str,
               answer: Sequence[str]) -> FileQuery | None:  # fmt: skip
    """A query's candidates and rows, as ``llmc search --files`` would rank them."""
    from types import SimpleNamespace

    spans = [r.path for r in searcher.search(query, k=FILE_SPANS).results]
    whole = searcher.whole_files(query)
    weight = searcher.cfg.search.file_bm25_weight
    listed = [SimpleNamespace(path=p) for p in spans]
    order = [h.path for h in group_by_file(listed, CANDIDATES, whole=whole, whole_weight=weight)]
    if not order:
        return None
    rows = feature_rows(
        query, spans, whole if weight > 0 else (), order, searcher.plain_files(query)
    )
    return FileQuery(project, kind, order, rows, dict(grades), list(answer))


def _searched(corpus: Path, queries: Sequence[tuple[str, Any]], project: str) -> list[FileQuery]:
    from llmc.config import load_config
    from llmc.eval.runner import ensure_index, variant_config
    from llmc.search import Searcher

    cfg = load_config(corpus)
    ensure_index(corpus, cfg)
    out = []
    with Searcher(corpus, variant_config(cfg, "default")) as searcher:
        for kind, q in queries:
            grades = {j.path: int(j.grade) for j in q.relevant}
            fq = query_rows(searcher, q.query, grades, project, kind, [j.path for j in q.relevant])
            if fq is not None:
                out.append(fq)
    return out


def history_queries(name: str, repo: str, mirrors: Path, cache_dir: Path) -> list[FileQuery]:
    """The commit and report queries of train project ``name``'s history, searched."""
    from lab.protocol.commit_queries import mine_commits
    from lab.protocol.commits import _git, base_snapshot, indexable_files, pick_base
    from lab.protocol.report_queries import mine_reports
    from lab.train.ranker_kinds import REPORT_AFTER, find_git_dir
    from llmc.gitlog import read_commits

    git_dir = find_git_dir(mirrors, repo)
    if git_dir is None:
        log.warning("%s: no mirror of %s under %s", name, repo, mirrors)
        return []
    head = _git(git_dir, "rev-parse", "HEAD^{commit}").strip()
    base, _tag = pick_base(git_dir, head, REPORT_AFTER)
    corpus = base_snapshot(
        git_dir, base, cache_dir / "ranker-reports" / f"{name}-{base[:12]}" / "corpus"
    )
    present = indexable_files(corpus)
    commits = list(reversed(read_commits(git_dir, None, f"{base}..{head}")))
    reports = mine_reports(commits, present, git_dir=git_dir, max_queries=10**6).queries
    subjects = mine_commits(git_dir, base, head, present, max_queries=MAX_COMMITS).queries
    queries = [("report", q) for q in reports] + [("commit", q) for q in subjects]
    return _searched(corpus, queries, name)


def validation_queries(name: str, eval_cache: Path, max_queries: int = 60) -> list[FileQuery]:
    """Task (c)'s and (d)'s queries of validation project ``name``, searched."""
    from lab.protocol import commits, reports
    from lab.protocol.splits import select_projects

    select_projects("validation", [name])  # refuses a test or reserved project
    _cp, corpus, subjects = commits.prepare(name, eval_cache, max_queries)
    found = reports.load_report_queries(name, max_queries)
    return _searched(corpus, [("report", q) for q in found] + [("commit", q) for q in subjects],
                     name)  # fmt: skip


def _ndcg(files: Sequence[str], grades: dict[str, int]) -> float:
    dcg = sum((2 ** grades.get(p, 0) - 1) / math.log2(i + 2) for i, p in enumerate(files[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


def scores(queries: Sequence[FileQuery], model: Any = None) -> dict[str, dict[str, float]]:
    """File-level metrics per kind: plain order, or reordered by ``model``."""
    import numpy as np

    from lab.protocol.file_rank import file_scores

    out: dict[str, dict[str, float]] = {}
    for kind in sorted({q.kind for q in queries}):
        rows = []
        for q in (q for q in queries if q.kind == kind):
            order = q.order
            if model is not None:
                s = model.predict(np.asarray(q.rows, dtype=np.float64))
                order = [q.order[i] for i in np.argsort(-s, kind="stable")]
            fs = file_scores(order[:10], q.answer)
            rows.append((fs.acc_1, fs.acc_5, fs.acc_10, fs.rr_10, _ndcg(order, q.grades)))
        n = len(rows)
        names = ("acc@1", "acc@5", "acc@10", "mrr@10", "ndcg@10")
        out[kind] = {m: round(sum(r[i] for r in rows) / n, 4) for i, m in enumerate(names)}
        out[kind]["n"] = n
    return out


def fit(queries: Sequence[FileQuery], seed: int = 0, threads: int = 2) -> Any:
    """A LightGBM ranker on ``queries`` (labels: the grades, 0-3)."""
    import lightgbm as lgb
    import numpy as np

    if not queries:
        raise TrainError("no training query")
    x = np.vstack([np.asarray(q.rows, dtype=np.float64) for q in queries])
    y = np.array([min(q.grades.get(p, 0), 3) for q in queries for p in q.order])
    model = lgb.LGBMRanker(random_state=seed, n_jobs=threads, verbose=-1, **PARAMS)
    model.fit(x, y, group=[len(q.order) for q in queries])
    return model


@dataclass
class FileRankerJob:
    mirrors: Path
    cache_dir: Path  # the train cache (history corpora)
    eval_cache: Path  # the protocol's cache (validation corpora)
    out: Path = MODEL_DIR
    projects: Sequence[str] = ()  # train histories (default: every one with a mirror)
    validation: Sequence[str] = ()
    seed: int = 0
    threads: int = 2
    command: str = "python -m lab train file-ranker"
    progress: Callable[[str], None] | None = None


def file_histories() -> dict[str, str]:
    """The file ranker's train histories, name → GitHub ``owner/name``: the span
    ranker's (``ranker_kinds.HISTORIES``) and ``MORE_HISTORIES``."""
    from lab.train.ranker_kinds import HISTORIES

    return {**HISTORIES, **MORE_HISTORIES}


def run(job: FileRankerJob) -> dict[str, Any]:
    """Collect, fit, check, write ``model.json`` and ``TRAINING.json``; the report."""
    import numpy as np

    from lab.train.ranker_dump import check_dump, dump_model
    from llmc.search.learned import model_from_json

    histories = file_histories()
    started = time.perf_counter()
    say = job.progress or (lambda line: None)
    names = list(job.projects) or list(histories)
    train: list[FileQuery] = []
    for name in names:
        if name not in histories:
            raise TrainError(f"{name}: not a train history ({', '.join(histories)})")
        found = history_queries(name, histories[name], job.mirrors, job.cache_dir)
        say(f"{name}: {len(found)} queries")
        train += found
    model = fit(train, job.seed, job.threads)
    data = {
        p: {
            k: sum(1 for q in train if q.project == p and q.kind == k) for k in ("commit", "report")
        }
        for p in sorted({q.project for q in train})
    }
    report: dict[str, Any] = {
        "command": job.command,
        "features": list(FILE_FEATURES),
        "params": PARAMS | {"seed": job.seed},
        "train": {
            "projects": data,
            "queries": len(train),
            "candidates": sum(len(q.order) for q in train),
        },  # fmt: skip
    }
    dumped = dump_model(model.booster_, report, FILE_FEATURES)
    x = np.vstack([np.asarray(q.rows, dtype=np.float64) for q in train[:200]])
    drift = check_dump(dumped, model.booster_, x, FILE_FEATURES)
    if drift > 1e-6:
        raise TrainError(f"the dumped trees predict {drift:.2g} away from LightGBM's")
    if job.validation:
        valid: list[FileQuery] = []
        for name in job.validation:
            valid += validation_queries(name, job.eval_cache)
        ours = model_from_json(dumped, known=FILE_FEATURES)
        report["validation"] = {"projects": list(job.validation),
                                "plain": scores(valid), "learned": scores(valid, ours)}  # fmt: skip
    report["seconds"] = round(time.perf_counter() - started, 1)
    dumped["report"] = report
    job.out.mkdir(parents=True, exist_ok=True)
    (job.out / "model.json").write_text(json.dumps(dumped) + "\n", encoding="utf-8")
    (job.out / "TRAINING.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


__all__ = [
    "MORE_HISTORIES",
    "FileQuery",
    "FileRankerJob",
    "PARAMS",
    "file_histories",
    "fit",
    "query_rows",
    "run",
    "scores",
]
