"""Training data of the learned ranker: the pools llmc's own pipeline builds, labelled.

For each project (``ranker_projects``: the train projects of ``lab.train.projects`` and
``lab.train.more_projects``; the validation projects of the protocol for choosing):

1. fetch the pinned archive and build the protocol's stripped corpus (every Python
   docstring and JSDoc block removed: ``lab.protocol.corpus``);
2. index the corpus with llmc (graph and HyDE off on train projects: they are not on by
   default; validation projects as the protocol indexes them);
3. queries: the protocol's docstring task (a docstring's first sentence → its function,
   ``lab.protocol.docstring``, at most ``max_queries`` a project, kind ``code``) and
   docs-intent queries mined from the project's Markdown/reST sections
   (``lab.train.docs_queries``, at most ``max_doc_queries`` split over ``doc-title``,
   ``doc-question`` and ``doc-sentence``, and ``max_mention_queries`` ``doc-mention``). On
   train projects the sentences that ``doc-sentence`` and ``doc-mention`` queries come from
   are cut out of the corpus files (lines kept) and the corpus is re-indexed, as docstrings
   are stripped; the plan (queries, targets, cuts) is written next to the corpus, so a rerun
   uses the same queries. On validation projects, whose corpus the protocol shares, only
   the kinds that need no cut are mined (``VALIDATION_DOC_SHARES``), ``valid_doc_queries``
   of them, so choosing (early stopping, the grid) sees docs targets too;
4. for each query, ``Searcher.candidate_pool``: every retriever's top ``ranker_depth``
   with the features of ``llmc.search.features``; a candidate is relevant (label 1) when
   it overlaps a target (``llmc.eval.metrics.matches``, as the metrics count a hit).

Everything is seeded (``seed`` and the project's name). One ``.npz`` per project is cached
under ``<cache>/ranker/<name>-<version>/``, keyed by the feature list, the embedder and the
query settings, so a rerun costs a file read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmc.corpora import Project
from llmc.errors import TrainError
from llmc.search.features import BASE_FEATURES, FEATURES, SHAPE_FEATURES

log = logging.getLogger(__name__)

DATA_VERSION = 2
DOCS_PLAN_MARKER = "docs-cuts.txt"  # in the work dir: which plan the corpus carries
EXTRA_MARKER = "extra-cuts.txt"  # ... and which example-sentence plan (``ranker_kinds``)
MAX_SPANS = 6000  # a project whose corpus indexes more spans is skipped (time bound)
# Validation projects: their corpus is the protocol's, never cut, so only these kinds.
VALIDATION_DOC_SHARES = {"doc-title": 0.5, "doc-question": 0.5}


@dataclass(frozen=True)
class ProjectData:
    """One project's labelled pools: rows of all its queries, grouped by query."""

    project: str
    split: str
    matrix: object  # np.ndarray float32 (rows, len(FEATURES))
    labels: object  # np.ndarray int8 (rows,)
    groups: tuple[int, ...]  # rows per query, in order
    queries: tuple[str, ...]
    kinds: tuple[str, ...]  # code | doc-title | doc-question | doc-sentence | doc-mention
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
    """The cache key of the pools' features: the shape features are left out, as a cached
    pool gets them from its queries' text (``load_data``)."""
    return hashlib.sha256("\n".join(BASE_FEATURES).encode()).hexdigest()[:10]


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


def _stored_spans(corpus: Path) -> list:
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(corpus), readonly=True)
    try:
        return [stored.span for stored in store.iter_spans()]
    finally:
        store.close()


def _eval_queries(found: Sequence) -> list:
    """``DocQuery`` → ``EvalQuery`` (grade 3 for every target; intent docs, or mixed when a
    definition is a target too)."""
    from llmc.eval.queries import EvalQuery, Judgment

    return [
        EvalQuery(
            d.query,
            "mixed" if len(d.targets) > 1 else "docs",
            tuple(Judgment(t.path, 3, t.start_line, t.end_line) for t in d.targets),
            source=f"{d.targets[0].path}:{d.targets[0].start_line}",
        )
        for d in found
    ]


def plan_name(limit: int, mentions: int, seed: int, shares: Mapping[str, float]) -> str:
    from lab.train.docs_queries import DOCS_VERSION

    tag = "-".join(f"{k}{v:g}" for k, v in sorted(shares.items()))
    return f"docs-plan-v{DOCS_VERSION}-n{limit}-m{mentions}-s{seed}-{tag}.json"


def _stamp(corpus: Path) -> str:
    from lab.protocol.corpus import CORPUS_MARKER

    marker = corpus / CORPUS_MARKER
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""


def cut_corpus(original: Path, dest: Path, stamp: str, work: Path, plan: str) -> Path:
    """The stripped corpus at ``dest``, rebuilt pristine when it carries the cuts of a plan
    other than ``plan`` (its index is kept: re-indexing is incremental)."""
    from lab.protocol.corpus import CORPUS_MARKER, build_corpus

    corpus = build_corpus(original, dest, stamp)
    marker = work / DOCS_PLAN_MARKER
    have = marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""
    if have and have != f"{plan} {_stamp(corpus)}":
        if have.endswith(f" {_stamp(corpus)}"):  # another plan's cuts: start from scratch
            (corpus / CORPUS_MARKER).unlink()
            marker.unlink()
            corpus = build_corpus(original, dest, stamp)
        else:  # rebuilt since those cuts: pristine already
            marker.unlink()
    return corpus


def doc_queries(
    corpus: Path,
    cfg,  # Config
    work: Path,
    project: str,
    *,
    limit: int,
    mentions: int,
    seed: int,
    cut: bool,
    shares: Mapping[str, float] | None = None,
) -> tuple[list, list[str]]:
    """Docs-intent queries of ``corpus`` (``lab.train.docs_queries``) and their kinds.

    With ``cut`` (train projects; ``cut_corpus`` made the corpus pristine or cut by this
    very plan), the plan is mined from the pristine corpus's index, the sentences it names
    are cut out of the files, and the corpus is re-indexed; the plan is kept in ``work``
    and the corpus marked with it, so a rerun reuses both. Without, the corpus is only read
    (its index must be up to date)."""
    from lab.train import docs_queries as dq
    from llmc.eval.runner import ensure_index

    shares = dict(dq.DOC_SHARES if shares is None else shares)
    if not cut:
        found = dq.mine(_stored_spans(corpus), project, limit, mentions, seed, shares)
        if any(d.cut for d in found):
            raise TrainError("queries that need a cut were mined without one")
        return _eval_queries(found), [d.kind for d in found]
    plan = work / plan_name(limit, mentions, seed, shares)
    marker = work / DOCS_PLAN_MARKER
    want = f"{plan.name} {_stamp(corpus)}"
    cut_done = marker.is_file() and marker.read_text(encoding="utf-8").strip() == want
    if plan.is_file():
        found = [dq.from_json(r) for r in json.loads(plan.read_text(encoding="utf-8"))]
    elif cut_done:
        raise TrainError(f"{corpus}: cut by {plan.name}, which is gone; delete {marker}")
    else:
        ensure_index(corpus, cfg)
        found = dq.mine(_stored_spans(corpus), project, limit, mentions, seed, shares)
        _write_atomic(plan, json.dumps([dq.to_json(d) for d in found], indent=1))
    if not cut_done:
        (work / EXTRA_MARKER).unlink(missing_ok=True)  # cut anew: later cuts are gone too
        dq.apply_cuts(corpus, [d.cut for d in found if d.cut is not None])
        _write_atomic(marker, want + "\n")
    ensure_index(corpus, cfg)
    return _eval_queries(found), [d.kind for d in found]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


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
    max_mention_queries: int = 0,
    seed: int,
    depth: int,
    progress: Callable[[str], None] | None = None,
) -> ProjectData | None:
    """The labelled pools of one project (cached); None when it is skipped (too large,
    or no query). On train projects the docs-intent queries cut their sentences out of the
    corpus; on validation projects only the kinds that need no cut are mined."""

    from lab.protocol.corpus import build_corpus
    from lab.protocol.docstring import docstring_queries
    from lab.train.docs_queries import DOC_SHARES, DOCS_VERSION
    from llmc.eval.runner import anchor_symbols, ensure_index

    started = time.perf_counter()
    original = root_of(project)
    train = split == "train"
    shares = DOC_SHARES if train else VALIDATION_DOC_SHARES
    mentions = max_mention_queries if train else 0
    plan = plan_name(max_doc_queries, mentions, seed, shares)
    if train and max_doc_queries + mentions:
        corpus = cut_corpus(original, work / "corpus", project.sha256, work, plan)
    else:
        corpus = build_corpus(original, work / "corpus", project.sha256)
    embedder = embedder_id(corpus)
    key = hashlib.sha256(
        f"{DATA_VERSION} {feature_key()} {embedder} {max_queries} {seed} {depth} "
        f"{DOCS_VERSION if max_doc_queries + mentions else 0} {plan}".encode()
    ).hexdigest()[:12]
    cached = work / f"ranker-data-{key}.npz"
    if cached.is_file():
        return load_data(cached)
    skip = work / f"ranker-skip-{key}.json"
    if skip.is_file():
        return None
    cfg = _config(corpus, depth, graph=not train)
    if progress:
        progress(f"{project.dir_name}: indexing the stripped corpus")
    from llmc.index.walk import walk

    files = len(walk(corpus, cfg.index).files)
    if files > MAX_SPANS // 4:
        log.warning("%s: %d files, skipped (more than %d)", project.dir_name, files, MAX_SPANS // 4)
        skip.write_text(json.dumps({"files": files}), encoding="utf-8")
        return None
    ensure_index(corpus, cfg)
    queries, _ = docstring_queries(original, work, project.name, max_queries, seed)
    kinds = ["code"] * len(queries)
    if max_doc_queries + mentions:
        found, found_kinds = doc_queries(
            corpus, cfg, work, project.name, limit=max_doc_queries, mentions=mentions,
            seed=seed, cut=train, shares=shares,
        )  # fmt: skip
        queries += found
        kinds += found_kinds
    queries, _ = anchor_symbols(queries, corpus)
    if not queries:
        skip.write_text(json.dumps({"queries": 0}), encoding="utf-8")
        return None
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(corpus), readonly=True)
    try:
        spans = store.counts()["spans"]
    finally:
        store.close()
    if progress:
        progress(f"{project.dir_name}: {len(queries)} queries over {spans} spans")
    matrix, labels, groups = pools(corpus, cfg, queries)
    data = ProjectData(
        project.name, split, matrix, labels, groups, tuple(q.query for q in queries),
        tuple(kinds), spans, embedder, time.perf_counter() - started,
    )  # fmt: skip
    save_data(data, cached)
    return data


def pools(corpus: Path, cfg, queries: Sequence) -> tuple[object, object, tuple[int, ...]]:
    """Each query's candidate pool over ``corpus`` (``Searcher.candidate_pool``), labelled
    by its judgments: (rows, labels, rows per query). The shape features are worked out
    from the whole query (``features.query_shape``), as the ranker reads it when the
    pipeline gives it the query's parts."""
    import numpy as np

    from llmc.search import Searcher
    from llmc.search.features import query_shape

    rows, labels, groups = [], [], []
    cols = [FEATURES.index(f) for f in SHAPE_FEATURES]
    with Searcher(corpus, cfg) as searcher:
        searcher.warm()
        for q in queries:
            pool = searcher.candidate_pool(q.query)
            assert searcher._ranker is not None
            meta = searcher._ranker.meta.get(searcher.sources.store, pool.span_ids)
            matrix = np.array(pool.matrix, dtype=np.float32)
            shape = query_shape(q.query, cfg.search.max_query_chars)
            matrix[:, cols] = [shape[f] for f in SHAPE_FEATURES]
            rows.append(matrix)
            labels.extend(_labels(pool, meta, q.relevant))
            groups.append(len(pool))
    return (
        np.concatenate(rows) if rows else np.zeros((0, len(FEATURES)), dtype=np.float32),
        np.asarray(labels, dtype=np.int8),
        tuple(groups),
    )


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

    from llmc.search.features import widen

    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        matrix = z["matrix"]
        groups = tuple(int(g) for g in z["groups"])
        if tuple(meta["features"]) != FEATURES:  # older features: the shape ones are added
            try:
                matrix = widen(matrix, meta["features"], meta["queries"], groups)
            except ValueError as e:
                raise TrainError(f"{path}: cached for other features ({e})") from None
        return ProjectData(
            meta["project"],
            meta["split"],
            matrix,
            z["labels"],
            groups,
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
    max_doc_queries: int = 30,
    max_mention_queries: int = 10,
    seed: int = 0,
    depth: int = 100,
    progress: Callable[[str], None] | None = None,
) -> list[ProjectData]:
    """Labelled pools of every project (``(project, split)``); train projects are fetched
    into ``cache_dir``, validation projects come from the protocol's eval cache (their
    docs-intent queries are titles and questions only, never cut, no mentions)."""
    from lab.train.projects import fetch as fetch_train
    from llmc import corpora

    out = []
    for project, split in projects:
        if split == "train":
            work = cache_dir / "ranker" / project.dir_name

            def root_of(p: Project) -> Path:
                return fetch_train(p, cache_dir)

        else:
            from llmc.eval.projects import fetch_project

            eval_cache = corpora.default_cache_dir("eval")
            work = eval_cache / "protocol" / project.dir_name

            def root_of(p: Project, base: Path = eval_cache) -> Path:
                return fetch_project(p, base)

        try:
            data = project_data(
                project, split, root_of, work,
                max_queries=max_queries, max_doc_queries=max_doc_queries,
                max_mention_queries=max_mention_queries, seed=seed, depth=depth, progress=progress,
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


def queries_by_kind(data: Sequence[ProjectData], kinds: Sequence[str] = ()) -> dict[str, int]:
    """How many mined queries of each kind (of ``kinds`` only, when given) ``data`` holds."""
    out: dict[str, int] = {}
    for d in data:
        for k in d.kinds:
            if not kinds or k in kinds:
                out[k] = out.get(k, 0) + 1
    return out


__all__ = [
    "queries_by_kind",
    "DATA_VERSION",
    "MAX_SPANS",
    "ProjectData",
    "VALIDATION_DOC_SHARES",
    "collect",
    "cut_corpus",
    "doc_queries",
    "feature_key",
    "load_data",
    "pools",
    "project_data",
    "save_data",
]
