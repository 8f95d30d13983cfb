"""The learned ranker's training data of the kinds issue 28 added, beside
``ranker_data``'s docstring and docs-intent pools:

- **test-name** and **readme-/guide-sentence** queries (``lab.train.kind_queries``) of a
  project whose ``ranker_data.project_data`` ran (its corpus is indexed): test names on
  train and validation projects (no cut), example sentences on train projects only, their
  sentences cut out of the corpus after the docs plan's cuts (``EXTRA_MARKER`` says which
  plan the corpus carries; ``ranker_data.doc_queries`` drops it when it re-cuts), sections
  the docs plan used left out. Cached per project as ``ranker-extra-<key>.npz``.
- **report** queries from git history (``lab.protocol.report_queries``, task (d)'s
  rules): on a train project with a local mirror (``HISTORIES``), a base about
  ``REPORT_AFTER`` commits before the mirror's head, its snapshot as the corpus (not
  stripped, as task (d)'s), and every commit of base..head whose body reads as a report →
  the non-test files it changed. On validation projects, task (d)'s mined reports over its
  own base snapshot. Cached as ``ranker-reports-<key>.npz`` beside the snapshot.

Test projects are never read here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lab.train.ranker_data import (
    DOCS_PLAN_MARKER,
    EXTRA_MARKER,
    ProjectData,
    _config,
    _stored_spans,
    _write_atomic,
    embedder_id,
    feature_key,
    load_data,
    pools,
    save_data,
)
from llmc.corpora import Project

log = logging.getLogger(__name__)

EXTRA_VERSION = 1
REPORT_VERSION = 1
REPORT_AFTER = 800  # non-merge commits between a train history's base and its head
REPORT = "report"
# Train projects whose git history is mined for reports (GitHub owner/name of the mirror).
HISTORIES = {
    "urllib3": "urllib3/urllib3",
    "httpx": "encode/httpx",
    "python-dateutil": "dateutil/dateutil",
    "arrow": "arrow-py/arrow",
    "loguru": "Delgan/loguru",
    "mkdocs": "mkdocs/mkdocs",
    "boltons": "mahmoud/boltons",
    "cattrs": "python-attrs/cattrs",
    "more-itertools": "more-itertools/more-itertools",
}


def _key(*parts: object) -> str:
    return hashlib.sha256(" ".join(str(p) for p in parts).encode()).hexdigest()[:12]


def _as_eval(found: Sequence) -> list:
    """``DocQuery`` → ``EvalQuery``: every target grade 3; intent code when the answer is
    code only, else mixed."""
    from lab.train.kind_queries import TEST_NAME
    from llmc.eval.queries import EvalQuery, Judgment

    return [
        EvalQuery(
            d.query,
            "code" if d.kind == TEST_NAME else "mixed",
            tuple(Judgment(t.path, 3, t.start_line, t.end_line) for t in d.targets),
            source=f"{d.targets[0].path}:{d.targets[0].start_line}",
        )
        for d in found
    ]


def _test_docstrings(spans: Sequence, original: Path) -> dict[str, dict[str, str]]:
    from lab.train.kind_queries import docstrings_of_tests
    from llmc.search.router import is_test_path

    out: dict[str, dict[str, str]] = {}
    for path in sorted({s.path for s in spans if s.path.endswith(".py") and is_test_path(s.path)}):
        file = original / path
        if file.is_file():
            out[path] = docstrings_of_tests(file.read_text(encoding="utf-8", errors="replace"))
    return out


def _docs_plan_sections(work: Path) -> set[tuple[str, int]]:
    """The sections the corpus's docs plan took a query from (path, first line)."""
    marker = work / DOCS_PLAN_MARKER
    if not marker.is_file():
        return set()
    plan = work / marker.read_text(encoding="utf-8").split()[0]
    if not plan.is_file():
        return set()
    rows = json.loads(plan.read_text(encoding="utf-8"))
    return {(r["targets"][0][0], int(r["targets"][0][1])) for r in rows}


def example_plan(corpus: Path, work: Path, project: str, limit: int, seed: int, cfg) -> list:
    """The example-sentence queries of a train corpus, mined once (plan file) and cut out
    of the corpus once (``EXTRA_MARKER``); the corpus is re-indexed after a cut."""
    from lab.train import docs_queries as dq
    from lab.train.kind_queries import example_sentence_queries
    from llmc.eval.runner import ensure_index

    plan = work / f"extra-plan-v{EXTRA_VERSION}-n{limit}-s{seed}.json"
    main = work / DOCS_PLAN_MARKER
    want = f"{plan.name} {main.read_text(encoding='utf-8').strip() if main.is_file() else ''}"
    marker = work / EXTRA_MARKER
    if plan.is_file():
        found = [dq.from_json(r) for r in json.loads(plan.read_text(encoding="utf-8"))]
    else:
        used = _docs_plan_sections(work)
        found = [
            d for d in example_sentence_queries(_stored_spans(corpus), project, limit, seed)
            if (d.targets[0].path, d.targets[0].start_line) not in used
        ]  # fmt: skip
        _write_atomic(plan, json.dumps([dq.to_json(d) for d in found], indent=1))
    if not marker.is_file() or marker.read_text(encoding="utf-8").strip() != want:
        dq.apply_cuts(corpus, [d.cut for d in found if d.cut is not None])
        _write_atomic(marker, want + "\n")
        ensure_index(corpus, cfg)
    return found


def extra_data(
    project: Project,
    split: str,
    original: Path,
    work: Path,
    *,
    max_test_queries: int,
    max_example_queries: int,
    seed: int,
    depth: int,
    progress: Callable[[str], None] | None = None,
) -> ProjectData | None:
    """The test-name (and, on train projects, example-sentence) pools of a project whose
    ``project_data`` ran; None when it gives no query."""
    from lab.train.kind_queries import mine_test_names

    started = time.perf_counter()
    corpus = work / "corpus"
    train = split == "train"
    examples = max_example_queries if train else 0
    main = work / DOCS_PLAN_MARKER
    stamp = main.read_text(encoding="utf-8").strip() if main.is_file() else ""
    embedder = embedder_id(corpus)
    key = _key(EXTRA_VERSION, feature_key(), embedder, max_test_queries, examples, seed, depth,
               stamp)  # fmt: skip
    cached = work / f"ranker-extra-{key}.npz"
    if cached.is_file():
        return load_data(cached)
    cfg = _config(corpus, depth, graph=not train)
    from llmc.eval.runner import ensure_index

    ensure_index(corpus, cfg)  # up to date after ``project_data``: a stat per file
    found = []
    if examples:
        found += example_plan(corpus, work, project.name, examples, seed, cfg)
    spans = _stored_spans(corpus)
    found += mine_test_names(
        spans, project.name, max_test_queries, seed, _test_docstrings(spans, original)
    )
    if not found:
        return None
    queries = _as_eval(found)
    if progress:
        progress(f"{project.dir_name}: {len(queries)} test-name / example-sentence queries")
    matrix, labels, groups = pools(corpus, cfg, queries)
    data = ProjectData(
        project.name, split, matrix, labels, groups, tuple(q.query for q in queries),
        tuple(d.kind for d in found), len(spans), embedder, time.perf_counter() - started,
    )  # fmt: skip
    save_data(data, cached)
    return data


def find_git_dir(mirrors: Path, repo: str) -> Path | None:
    """The git directory of a local mirror of GitHub ``repo`` (owner/name) under
    ``mirrors`` (``owner+name/repo``, ``owner+name`` or ``owner+name.git``)."""
    from lab.protocol.commits import _git_dir_of

    name = repo.replace("/", "+")
    for cand in (mirrors / name / "repo", mirrors / name, mirrors / f"{name}.git"):
        git_dir = _git_dir_of(cand)
        if git_dir is not None:
            return git_dir
    return None


def history_reports(
    name: str, repo: str, mirrors: Path, cache_dir: Path, *, depth: int, seed: int,
    progress: Callable[[str], None] | None = None,
) -> ProjectData | None:  # fmt: skip
    """The report pools of train project ``name`` from its mirror's history (see the
    module's docstring); None without a mirror or a report. Its ``project`` is
    ``<name>@history`` and it records base and head in ``queries``' order of commits."""
    from lab.protocol.commits import _git, base_snapshot, indexable_files, pick_base
    from lab.protocol.report_queries import mine_reports
    from llmc.eval.runner import ensure_index
    from llmc.gitlog import read_commits

    started = time.perf_counter()
    git_dir = find_git_dir(mirrors, repo)
    if git_dir is None:
        log.warning("%s: no mirror of %s under %s: no reports", name, repo, mirrors)
        return None
    head = _git(git_dir, "rev-parse", "HEAD^{commit}").strip()
    base, _tag = pick_base(git_dir, head, REPORT_AFTER)
    work = cache_dir / "ranker-reports" / f"{name}-{base[:12]}"
    corpus = base_snapshot(git_dir, base, work / "corpus")
    embedder = embedder_id(corpus)
    key = _key(REPORT_VERSION, feature_key(), embedder, head, depth, seed)
    cached = work / f"ranker-reports-{key}.npz"
    if cached.is_file():
        return load_data(cached)
    commits = list(reversed(read_commits(git_dir, None, f"{base}..{head}")))
    mined = mine_reports(commits, indexable_files(corpus), git_dir=git_dir, max_queries=10**6)
    _write_atomic(work / "mined.json", json.dumps({"repo": repo, "base": base, "head": head,
                                                    **mined.summary()}, indent=1))  # fmt: skip
    if not mined.queries:
        return None
    cfg = _config(corpus, depth, graph=False)
    if progress:
        progress(f"{name}: {len(mined.queries)} reports from {repo} {base[:12]}..{head[:12]}")
    ensure_index(corpus, cfg)
    return _report_pools(f"{name}@history", "train", corpus, cfg, mined.queries, embedder,
                         cached, started)  # fmt: skip


def validation_reports(
    name: str, eval_cache: Path, *, depth: int, progress: Callable[[str], None] | None = None
) -> ProjectData | None:
    """Task (d)'s reports of validation project ``name`` as pools over its base snapshot;
    None when it has none (or no mirror)."""
    from lab.protocol.commits import prepare
    from lab.protocol.reports import load_report_queries
    from llmc.errors import EvalError
    from llmc.eval.runner import ensure_index

    started = time.perf_counter()
    try:
        queries = load_report_queries(name)
        _cp, corpus, _ = prepare(name, eval_cache, 1)
    except EvalError as e:
        log.warning("%s: no validation reports (%s)", name, e)
        return None
    if not queries:
        return None
    embedder = embedder_id(corpus)
    key = _key(REPORT_VERSION, feature_key(), embedder, depth, *(q.id for q in queries))
    cached = corpus.parent / f"ranker-reports-{key}.npz"
    if cached.is_file():
        return load_data(cached)
    cfg = _config(corpus, depth, graph=True)
    ensure_index(corpus, cfg)
    if progress:
        progress(f"{name}: {len(queries)} validation reports")
    return _report_pools(f"{name}@history", "validation", corpus, cfg, queries, embedder,
                         cached, started)  # fmt: skip


def _report_pools(project: str, split: str, corpus: Path, cfg, queries: Sequence, embedder: str,
                  cached: Path, started: float) -> ProjectData:  # fmt: skip
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(corpus), readonly=True)
    try:
        spans = store.counts()["spans"]
    finally:
        store.close()
    matrix, labels, groups = pools(corpus, cfg, queries)
    data = ProjectData(
        project, split, matrix, labels, groups, tuple(q.query for q in queries),
        (REPORT,) * len(queries), spans, embedder, time.perf_counter() - started,
    )  # fmt: skip
    save_data(data, cached)
    return data


def collect_extra(
    projects: Sequence[tuple[Project, str]],
    cache_dir: Path,
    *,
    max_test_queries: int,
    max_example_queries: int,
    reports: bool,
    mirrors: Path | None,
    seed: int,
    depth: int,
    progress: Callable[[str], None] | None = None,
) -> list[ProjectData]:
    """The new kinds' pools of every ``(project, split)`` whose ``ranker_data.collect``
    ran (same work dirs): test names and example sentences, and with ``reports`` the
    history reports of the train projects in ``HISTORIES`` (mirrors under ``mirrors``) and
    task (d)'s reports of the validation projects. A project that fails is skipped."""
    from lab.train.projects import fetch as fetch_train
    from llmc import corpora
    from llmc.eval.projects import fetch_project

    eval_cache = corpora.default_cache_dir("eval")
    out: list[ProjectData] = []
    for project, split in projects:
        if split == "train":
            work = cache_dir / "ranker" / project.dir_name
        else:
            work = eval_cache / "protocol" / project.dir_name
        try:
            if not (work / "corpus").is_dir():
                continue  # its main data was skipped
            original = (
                fetch_train(project, cache_dir) if split == "train"
                else fetch_project(project, eval_cache)
            )  # fmt: skip
            found = [
                extra_data(
                    project, split, original, work, max_test_queries=max_test_queries,
                    max_example_queries=max_example_queries, seed=seed, depth=depth,
                    progress=progress,
                )
            ]  # fmt: skip
            if reports and split == "train" and project.name in HISTORIES and mirrors:
                found.append(
                    history_reports(
                        project.name,
                        HISTORIES[project.name],
                        mirrors,
                        cache_dir,
                        depth=depth,
                        seed=seed,
                        progress=progress,
                    )  # fmt: skip
                )
            if reports and split != "train":
                found.append(
                    validation_reports(project.name, eval_cache, depth=depth, progress=progress)
                )
        except Exception as e:  # noqa: BLE001 - one broken project is skipped, not fatal
            log.warning("%s: new kinds skipped (%s)", project.dir_name, e)
            continue
        for data in found:
            if data is not None:
                out.append(data)
                if progress:
                    progress(
                        f"{data.project}: {len(data.groups)} more queries "
                        f"({', '.join(sorted(set(data.kinds)))}), {data.answered} answered"
                    )
    return out


__all__ = [
    "EXTRA_VERSION",
    "HISTORIES",
    "REPORT",
    "collect_extra",
    "REPORT_AFTER",
    "example_plan",
    "extra_data",
    "find_git_dir",
    "history_reports",
    "validation_reports",
]
