"""Training data of the learned ranker: the pools llmc's own pipeline builds, labelled.

For each project (``ranker_projects``: the train projects of ``llmc.train.projects`` and
``llmc.train.more_projects``; the validation projects of the protocol for choosing):

1. fetch the pinned archive and build the protocol's stripped corpus (every Python
   docstring and JSDoc block removed: ``llmc.eval.protocol.corpus``);
2. queries: the protocol's docstring task (a docstring's first sentence → its function,
   ``llmc.eval.protocol.docstring``, at most ``max_queries`` a project) and, on train
   projects, section titles → their section (``llmc.train.mine.doc_query``, at most
   ``max_doc_queries``; the title stays in the corpus, as a user may quote it);
3. index the corpus with llmc (graph and HyDE off: they are not on by default);
4. for each query, ``Searcher.candidate_pool``: every retriever's top ``ranker_depth``
   with the features of ``llmc.search.features``; a candidate is relevant (label 1) when
   it overlaps a judgment (``llmc.eval.metrics.matches``, as the metrics count a hit).

One ``.npz`` per project is cached under ``<cache>/ranker/<name>-<version>/``, keyed by the
feature list, the embedder and the query settings, so a rerun costs a file read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmc.corpora import Project
from llmc.errors import TrainError
from llmc.search.features import FEATURES

log = logging.getLogger(__name__)

DATA_VERSION = 1
MAX_SPANS = 6000  # a project whose corpus indexes more spans is skipped (time bound)


@dataclass(frozen=True)
class ProjectData:
    """One project's labelled pools: rows of all its queries, grouped by query."""

    project: str
    split: str
    matrix: object  # np.ndarray float32 (rows, len(FEATURES))
    labels: object  # np.ndarray int8 (rows,)
    groups: tuple[int, ...]  # rows per query, in order
    queries: tuple[str, ...]
    kinds: tuple[str, ...]  # code | doc-title, per query
    spans: int
    embedder: str
    seconds: float

    @property
    def answered(self) -> int:
        """Queries with a relevant candidate in the pool."""
        import numpy as np

        labels = np.asarray(self.labels)
        out, start = 0, 0
        for g in self.groups:
            out += int(labels[start : start + g].max(initial=0) > 0)
            start += g
        return out


def feature_key() -> str:
    return hashlib.sha256("\n".join(FEATURES).encode()).hexdigest()[:10]


def embedder_id(corpus: Path) -> str:
    from llmc.config import load_config
    from llmc.models.embedder import resolved_model_id

    cfg = load_config(corpus)
    return resolved_model_id(cfg.embedding, "code")


def _config(corpus: Path, depth: int, graph: bool):  # -> Config
    from llmc.config import load_config

    cfg = load_config(corpus)
    cfg.graph.enabled = graph  # train corpora: no graph (time); validation: as the protocol
    cfg.search.hyde = False
    cfg.search.rerank = False
    cfg.search.llm_rerank = False
    cfg.search.graph = False
    cfg.search.ranker = "learned"
    cfg.search.ranker_depth = depth
    cfg.learn.use_tuned = False
    return cfg


def doc_title_queries(corpus: Path, limit: int, seed: int, project: str) -> list:
    """Section titles → their section, from the index of ``corpus`` (list of EvalQuery)."""
    import random

    from llmc.eval.queries import EvalQuery, Judgment
    from llmc.paths import db_path
    from llmc.store.db import Store
    from llmc.train.mine import DOC_TITLE, _queries_allowed, doc_query, section_body

    store = Store(db_path(corpus), readonly=True)
    try:
        found = []
        seen: set[str] = set()
        for stored in store.iter_spans():
            span = stored.span
            if span.kind != "section" or span.part != 0 or not _queries_allowed(span.path):
                continue
            kind, query, _ = doc_query(span, section_body(span))
            if kind != DOC_TITLE or query.lower() in seen:
                continue
            seen.add(query.lower())
            found.append((query, span.path, span.start_line, span.end_line))
    finally:
        store.close()
    rng = random.Random(f"{seed}:{project}:titles")
    chosen = sorted(rng.sample(range(len(found)), min(limit, len(found))))
    return [
        EvalQuery(q, "docs", (Judgment(p, 3, a, b),), source=f"{p}:{a}")
        for q, p, a, b in (found[i] for i in chosen)
    ]


def _labels(pool, meta, judgments) -> list[int]:
    from llmc.eval.metrics import matches

    out = []
    for span_id in pool.span_ids:
        m = meta.get(span_id)
        out.append(int(m is not None and any(matches(m, j) for j in judgments)))
    return out


def project_data(
    project: Project,
    split: str,
    root_of: Callable[[Project], Path],
    work: Path,
    *,
    max_queries: int,
    max_doc_queries: int,
    seed: int,
    depth: int,
    progress: Callable[[str], None] | None = None,
) -> ProjectData | None:
    """The labelled pools of one project (cached); None when it is skipped (too large,
    or no query)."""
    import numpy as np

    from llmc.eval.protocol.corpus import build_corpus
    from llmc.eval.protocol.docstring import docstring_queries
    from llmc.eval.runner import anchor_symbols, ensure_index
    from llmc.search import Searcher

    started = time.perf_counter()
    original = root_of(project)
    corpus = build_corpus(original, work / "corpus", project.sha256)
    embedder = embedder_id(corpus)
    key = hashlib.sha256(
        f"{DATA_VERSION} {feature_key()} {embedder} {max_queries} {max_doc_queries} {seed} "
        f"{depth}".encode()
    ).hexdigest()[:12]
    cached = work / f"ranker-data-{key}.npz"
    if cached.is_file():
        return load_data(cached)
    skip = work / f"ranker-skip-{key}.json"
    if skip.is_file():
        return None
    cfg = _config(corpus, depth, graph=split != "train")
    if progress:
        progress(f"{project.dir_name}: indexing the stripped corpus")
    from llmc.index.walk import walk

    files = len(walk(corpus, cfg.index).files)
    if files > MAX_SPANS // 4:
        log.warning("%s: %d files, skipped (more than %d)", project.dir_name, files, MAX_SPANS // 4)
        skip.write_text(json.dumps({"files": files}), encoding="utf-8")
        return None
    ensure_index(corpus, cfg)
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(corpus), readonly=True)
    try:
        spans = store.counts()["spans"]
    finally:
        store.close()
    queries, _ = docstring_queries(original, work, project.name, max_queries, seed)
    queries, _ = anchor_symbols(queries, corpus)
    kinds = ["code"] * len(queries)
    if max_doc_queries:
        titles = doc_title_queries(corpus, max_doc_queries, seed, project.name)
        queries += titles
        kinds += ["doc-title"] * len(titles)
    if not queries:
        skip.write_text(json.dumps({"queries": 0}), encoding="utf-8")
        return None
    if progress:
        progress(f"{project.dir_name}: {len(queries)} queries over {spans} spans")
    rows, labels, groups = [], [], []
    with Searcher(corpus, cfg) as searcher:
        searcher.warm()
        for q in queries:
            pool = searcher.candidate_pool(q.query)
            assert searcher._ranker is not None
            meta = searcher._ranker.meta.get(searcher.sources.store, pool.span_ids)
            rows.append(pool.matrix)
            labels.extend(_labels(pool, meta, q.relevant))
            groups.append(len(pool))
    data = ProjectData(
        project.name,
        split,
        np.concatenate(rows) if rows else np.zeros((0, len(FEATURES)), dtype=np.float32),
        np.asarray(labels, dtype=np.int8),
        tuple(groups),
        tuple(q.query for q in queries),
        tuple(kinds),
        spans,
        embedder,
        time.perf_counter() - started,
    )
    save_data(data, cached)
    return data


def save_data(data: ProjectData, path: Path) -> None:
    import numpy as np

    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(
        tmp,
        matrix=data.matrix,
        labels=data.labels,
        groups=np.asarray(data.groups, dtype=np.int32),
        meta=np.asarray(
            json.dumps(
                {
                    "project": data.project,
                    "split": data.split,
                    "queries": list(data.queries),
                    "kinds": list(data.kinds),
                    "spans": data.spans,
                    "embedder": data.embedder,
                    "seconds": data.seconds,
                    "features": list(FEATURES),
                }
            )
        ),
    )
    tmp.replace(path)


def load_data(path: Path) -> ProjectData:
    import numpy as np

    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        if tuple(meta["features"]) != FEATURES:
            raise TrainError(f"{path}: cached for other features")
        return ProjectData(
            meta["project"],
            meta["split"],
            z["matrix"],
            z["labels"],
            tuple(int(g) for g in z["groups"]),
            tuple(meta["queries"]),
            tuple(meta["kinds"]),
            int(meta["spans"]),
            meta["embedder"],
            float(meta["seconds"]),
        )


def collect(
    projects: Sequence[tuple[Project, str]],
    cache_dir: Path,
    *,
    max_queries: int = 60,
    max_doc_queries: int = 15,
    seed: int = 0,
    depth: int = 100,
    progress: Callable[[str], None] | None = None,
) -> list[ProjectData]:
    """Labelled pools of every project (``(project, split)``); train projects are fetched
    into ``cache_dir``, validation projects come from the protocol's eval cache."""
    from llmc import corpora
    from llmc.train.projects import fetch as fetch_train

    out = []
    for project, split in projects:
        if split == "train":
            work = cache_dir / "ranker" / project.dir_name

            def root_of(p: Project) -> Path:
                return fetch_train(p, cache_dir)

            doc_queries = max_doc_queries
        else:
            from llmc.eval.projects import fetch_project

            eval_cache = corpora.default_cache_dir("eval")
            work = eval_cache / "protocol" / project.dir_name

            def root_of(p: Project, base: Path = eval_cache) -> Path:
                return fetch_project(p, base)

            doc_queries = 0  # validation: exactly the protocol's docstring task
        try:
            data = project_data(
                project, split, root_of, work,
                max_queries=max_queries, max_doc_queries=doc_queries, seed=seed, depth=depth,
                progress=progress,
            )  # fmt: skip
        except TrainError:
            raise
        except Exception as e:  # noqa: BLE001 - one broken project is skipped, not fatal
            log.warning("%s: skipped (%s)", project.dir_name, e)
            continue
        if data is not None:
            out.append(data)
            if progress:
                progress(
                    f"{project.dir_name}: {len(data.groups)} queries, {data.answered} answered "
                    f"in the pool, {data.spans} spans, {data.seconds:.0f} s"
                )
    return out


__all__ = [
    "DATA_VERSION",
    "MAX_SPANS",
    "ProjectData",
    "collect",
    "doc_title_queries",
    "feature_key",
    "load_data",
    "project_data",
    "save_data",
]
