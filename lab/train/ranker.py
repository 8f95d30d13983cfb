"""`python -m lab train ranker`: fit the learned ranker (LightGBM lambdarank) and ship it as JSON.

One reproducible command: the labelled pools of the train projects and of the protocol's
validation projects (``ranker_data.collect``: fetch, strip, index, search, label; cached
per project), then a small grid of hyperparameters, each fitted on the train projects with
early stopping on the validation projects' NDCG@10; the grid point with the best validation
MRR@10 (over the pool, as the ranker orders it) is kept, checked against LightGBM's own
predictions, and written as ``model.json`` (``llmc.search.learned.FORMAT``) with
``TRAINING.json`` (projects, queries, features, parameters, time, validation numbers,
embedder). ``--ablate`` also fits the chosen parameters without each feature group
(``llmc.search.features.GROUPS``) and reports what each adds on validation.

Test projects are never read here: the protocol's test split reports only.
"""

from __future__ import annotations

import json
import logging
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.train.ranker_data import ProjectData, collect, queries_by_kind
from lab.train.ranker_dump import check_dump, dump_model, safe_names
from llmc.corpora import Project
from llmc.errors import TrainError
from llmc.search.features import FEATURES, GROUPS, MISSING_RANK, MISSING_REL, MISSING_SCORE
from llmc.search.learned import MODEL_DIR

log = logging.getLogger(__name__)

BASE_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [10],
    "lambdarank_truncation_level": 20,
    "min_data_in_leaf": 50,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "verbose": -1,
    "deterministic": True,
    "force_row_wise": True,
}
GRID: tuple[dict[str, Any], ...] = (
    {"num_leaves": 15, "learning_rate": 0.05},
    {"num_leaves": 31, "learning_rate": 0.05},
    {"num_leaves": 63, "learning_rate": 0.05},
    {"num_leaves": 31, "learning_rate": 0.1},
)
MAX_ROUNDS = 600
EARLY_STOP = 50
VALID_MAX_QUERIES = 60  # the protocol's docstring task: its default queries per project
KEEP_RANK = 30  # training keeps every candidate within some list's top 30 ...
NEG_SAMPLE = 0.25  # ... and a quarter of the rest (seeded)


# Chosen on validation (docs/reports/2026-11-23-learned-ranker.md): the mention queries are
# mined (their sentences cut from the corpus) but not trained on, and a docs-intent query
# weighs half a docstring query. Issue 28 adds test names, example sentences and reports
# (``lab.train.ranker_kinds``); their weights are chosen on validation (``WEIGHT_GRID``).
TRAIN_KINDS = (
    "code", "doc-title", "doc-question", "doc-sentence", "test-name", "readme-sentence",
    "guide-sentence", "report",
)  # fmt: skip
DOC_WEIGHT = 0.5
# Kind groups: how weights are given and validation is reported.
KIND_GROUPS: dict[str, tuple[str, ...]] = {
    "code": ("code",),
    "docs": ("doc-title", "doc-question", "doc-sentence", "doc-mention"),
    "test": ("test-name",),
    "example": ("readme-sentence", "guide-sentence"),
    "report": ("report",),
}
CHOOSE_GROUPS = ("code", "docs", "test", "report")  # the grid's score: their mean MRR@10
# Weights per kind group tried on validation (code is 1), before the tree grid.
WEIGHT_GRID: tuple[dict[str, float], ...] = (
    {"docs": 0.5, "test": 0.5, "example": 0.5, "report": 1.0},
    {"docs": 0.5, "test": 1.0, "example": 1.0, "report": 2.0},
    {"docs": 1.0, "test": 1.0, "example": 1.0, "report": 1.0},
    {"docs": 0.5, "test": 0.25, "example": 0.25, "report": 0.5},
)
HELD_OUT_MOD = 8  # a train project whose name hashes to 0 mod this is held out (reported)


def held_out(name: str) -> bool:
    """Whether a train project's queries are held out of fitting (reported per kind)."""
    import hashlib

    base = name.split("@", 1)[0]
    return int(hashlib.sha256(base.encode()).hexdigest(), 16) % HELD_OUT_MOD == 0


def group_of(kind: str) -> str:
    return next((g for g, kinds in KIND_GROUPS.items() if kind in kinds), kind)


@dataclass
class RankerJob:
    """What `python -m lab train ranker` does (the CLI's options)."""

    out: Path = MODEL_DIR
    cache_dir: Path | None = None
    max_queries: int = 60
    max_doc_queries: int = 30
    max_mention_queries: int = 10
    valid_doc_queries: int = 20
    kinds: tuple[str, ...] = TRAIN_KINDS  # query kinds to train on (empty: every kind mined)
    doc_weight: float = DOC_WEIGHT  # a docs-intent query's weight; a docstring query's is 1
    max_test_queries: int = 40  # test-name queries per project
    max_example_queries: int = 10  # readme- and guide-sentence queries (each) per train project
    reports: bool = True  # history reports (train: ``ranker_kinds.HISTORIES``; validation: (d))
    mirrors: Path | None = None  # git mirrors (default: ``commits.mirrors_dir()``)
    weights: tuple[dict[str, float], ...] = ()  # kind-group weights to try (default WEIGHT_GRID)
    collect_until: float = 0.0  # a Unix time: no project is started after it (0: none)
    grid: tuple[dict[str, Any], ...] = ()  # tree settings (default GRID; the last one first)
    depth: int = 100
    seed: int = 0
    threads: int = 2
    ablate: bool = False
    projects: tuple[str, ...] = ()  # train project names (default: every pinned one)
    command: str = "python -m lab train ranker"
    progress: Callable[[str], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def train_projects(names: Sequence[str] = ()) -> list[Project]:
    """The pinned train projects (``lab.train.projects`` and ``more_projects``), or those
    named; never a validation, test, eval-set or pallets project."""
    from lab.protocol.splits import protocol_projects
    from lab.train.more_projects import MORE_PROJECTS
    from lab.train.projects import TRAIN_PROJECTS, reserved_names

    held = {p.name.lower() for p in protocol_projects() if p.split != "train"}
    held |= set(reserved_names())
    every = list(MORE_PROJECTS) + [p for p in TRAIN_PROJECTS if p.name not in BIG_PROJECTS]
    bad = sorted(p.name for p in every if p.name.lower() in held)
    if bad:
        raise TrainError(f"held out from training (validation, test or reserved): {bad}")
    if not names:
        return every
    by_name = {p.name.lower(): p for p in every}
    missing = [n for n in names if n.lower() not in by_name]
    if missing:
        raise TrainError(f"not pinned train projects: {', '.join(missing)}")
    return [by_name[n.lower()] for n in names]


# Too large to index on a 2-core machine in the time budget (thousands of spans each).
BIG_PROJECTS = frozenset({"networkx", "tornado", "black", "pytest", "rich", "trio", "fsspec"})


def validation_projects() -> list[Project]:
    from lab.protocol.splits import select_projects

    return [sp.project for sp in select_projects("validation")]


def stack(
    data: Sequence[ProjectData],
    sample: float = 1.0,
    seed: int = 0,
    kinds: Sequence[str] = (),
) -> tuple[Any, Any, list[int]]:
    """Rows, labels and group sizes of every answered query of ``data`` (of ``kinds``
    only, when given). With ``sample`` < 1, candidates outside every list's top
    ``KEEP_RANK`` (the bulk of a pool, nearly all negatives) are kept with that probability
    (seeded), to fit faster; positives and the head of each pool are always kept."""
    import numpy as np

    rng = np.random.default_rng(seed)
    best = FEATURES.index("pool:best_rank")
    xs, ys, groups = [], [], []
    for d in data:
        labels = np.asarray(d.labels)
        matrix = np.asarray(d.matrix)
        start = 0
        for g, kind in zip(d.groups, d.kinds, strict=True):
            y = labels[start : start + g]
            x = matrix[start : start + g]
            start += g
            if not g or y.max(initial=0) <= 0 or (kinds and kind not in kinds):
                continue
            if sample < 1.0:
                keep = (y > 0) | (x[:, best] <= KEEP_RANK) | (rng.random(g) < sample)
                x, y = x[keep], y[keep]
            xs.append(x)
            ys.append(y)
            groups.append(len(y))
    if not xs:
        return np.zeros((0, len(FEATURES)), np.float32), np.zeros(0, np.int8), []
    return np.concatenate(xs), np.concatenate(ys), groups


def query_weights(
    data: Sequence[ProjectData],
    groups: Sequence[int],
    kinds: Sequence[str],
    doc_weight: float | Mapping[str, float],
) -> Any:
    """One weight per row of ``stack(data, ..., kinds)`` (whose group sizes are ``groups``):
    1 for a code (docstring) query's rows; a docs-intent query's ``doc_weight`` when it is a
    number (None when that is 1), or its kind group's weight (``KIND_GROUPS``; 1 when not
    given) when it is a mapping."""
    import numpy as np

    if not isinstance(doc_weight, Mapping) and doc_weight == 1.0:
        return None
    per_query = []
    for d in data:
        labels = np.asarray(d.labels)
        start = 0
        for g, kind in zip(d.groups, d.kinds, strict=True):
            answered = g and labels[start : start + g].max(initial=0) > 0
            start += g
            if answered and (not kinds or kind in kinds):
                if isinstance(doc_weight, Mapping):
                    per_query.append(1.0 if kind in CODE_KINDS else
                                     float(doc_weight.get(group_of(kind), 1.0)))  # fmt: skip
                else:
                    per_query.append(1.0 if kind in CODE_KINDS else doc_weight)
    if len(per_query) != len(groups):
        raise TrainError("query weights do not match the stacked queries")
    return np.repeat(np.asarray(per_query, dtype=np.float64), groups)


def pool_metrics(
    scores: Any, data: Sequence[ProjectData], kinds: Sequence[str] = ()
) -> dict[str, float]:
    """MRR@10 and hit@5 over every query of ``data`` (of ``kinds`` only, when given;
    unanswered ones count 0), with the candidates ordered by ``scores`` (one per row, in
    ``data``'s row order)."""
    import numpy as np

    rr, hit5, n = 0.0, 0.0, 0
    pos = 0
    for d in data:
        labels = np.asarray(d.labels)
        start = 0
        for g, kind in zip(d.groups, d.kinds, strict=True):
            if kinds and kind not in kinds:
                start += g
                continue
            y = labels[start : start + g]
            s = scores[pos + start : pos + start + g]
            order = np.argsort(-s, kind="stable")[:10]
            hits = np.nonzero(y[order] > 0)[0]
            if hits.size:
                rank = int(hits[0]) + 1
                rr += 1.0 / rank
                hit5 += 1.0 if rank <= 5 else 0.0
            n += 1
            start += g
        pos += len(labels)
    return {"mrr@10": rr / max(n, 1), "hit@5": hit5 / max(n, 1), "queries": n}


CODE_KINDS = ("code",)
DOCS_KINDS = ("doc-title", "doc-question", "doc-sentence", "doc-mention")


def split_metrics(scores: Any, data: Sequence[ProjectData]) -> dict[str, Any]:
    """Pool metrics per kind group (``KIND_GROUPS``: code, docs, test, example, report; a
    group with no query is left out), and the score the grid is chosen by: the mean MRR@10
    of the ``CHOOSE_GROUPS`` present (each kind of query counts alike, however many it has)."""
    out: dict[str, Any] = {}
    for group, kinds in KIND_GROUPS.items():
        m = pool_metrics(scores, data, kinds)
        if m["queries"] or group in ("code", "docs"):
            out[group] = m
    present = [out[g]["mrr@10"] for g in CHOOSE_GROUPS if g in out and out[g]["queries"]]
    return {"score": sum(present) / max(len(present), 1), **out}


def all_rows(data: Sequence[ProjectData]) -> Any:
    import numpy as np

    return np.concatenate([np.asarray(d.matrix) for d in data])


def masked(matrix: Any, group: str) -> Any:
    """``matrix`` with a feature group's columns set to their missing values."""
    out = matrix.copy()
    for name in GROUPS[group]:
        j = FEATURES.index(name)
        if name.endswith(":rank") or name == "pool:best_rank":
            out[:, j] = MISSING_RANK
        elif name.endswith(":rel"):
            out[:, j] = MISSING_REL
        elif name.endswith(":score"):
            out[:, j] = MISSING_SCORE
        else:
            out[:, j] = 0.0
    return out


def fit(
    train: tuple[Any, Any, list[int]],
    valid: tuple[Any, Any, list[int]],
    params: Mapping[str, Any],
    threads: int,
    seed: int,
    weight: Any = None,
) -> Any:
    """One lambdarank booster (lightgbm's training API: only ever imported here);
    ``weight``: one per training row (``query_weights``), or None."""
    import lightgbm as lgb

    x, y, g = train
    vx, vy, vg = valid
    dtrain = lgb.Dataset(
        x, y, group=g, weight=weight, feature_name=safe_names(), free_raw_data=False
    )
    dvalid = lgb.Dataset(vx, vy, group=vg, reference=dtrain)
    p = {**BASE_PARAMS, **params, "num_threads": threads, "seed": seed}
    return lgb.train(
        p,
        dtrain,
        num_boost_round=MAX_ROUNDS,
        valid_sets=[dvalid],
        callbacks=[lgb.early_stopping(EARLY_STOP, verbose=False)],
    )


def run(job: RankerJob) -> dict[str, Any]:
    """Collect the pools, fit the grid, keep the best on validation, write model and report."""
    from lab.protocol.commits import mirrors_dir
    from lab.train.ranker_kinds import HISTORIES, collect_extra
    from llmc import corpora

    started = time.perf_counter()
    note = job.progress or (lambda s: log.info("%s", s))
    cache = job.cache_dir or corpora.default_cache_dir("train")
    # validation first (choosing needs it), then the train projects with a history
    train_list = sorted(
        [(p, "train") for p in train_projects(job.projects)],
        key=lambda t: t[0].name not in HISTORIES,
    )
    valid_list = [(p, "validation") for p in validation_projects()]
    train_data: list[ProjectData] = []
    valid_data: list[ProjectData] = []
    todo = [*valid_list, *train_list]
    for i, (project, split) in enumerate(todo):
        train = split == "train"
        if job.collect_until and time.time() > job.collect_until and train_data:
            note(f"collection stopped at its deadline: {i} of {len(todo)} projects read")
            job.extra["collection_stopped"] = f"{i} of {len(todo)} projects"
            break
        got = collect(
            [(project, split)], cache, max_queries=job.max_queries if train else VALID_MAX_QUERIES,
            max_doc_queries=job.max_doc_queries if train else job.valid_doc_queries,
            max_mention_queries=job.max_mention_queries if train else 0, progress=note,
            seed=job.seed, depth=job.depth,
        )  # fmt: skip
        if got and (job.max_test_queries or job.max_example_queries or job.reports):
            got += collect_extra(
                [(project, split)], cache, max_test_queries=job.max_test_queries,
                max_example_queries=job.max_example_queries, reports=job.reports,
                mirrors=job.mirrors or mirrors_dir(), progress=note, seed=job.seed,
                depth=job.depth,
            )  # fmt: skip
        (train_data if train else valid_data).extend(got)
    data_s = time.perf_counter() - started
    held = [d for d in train_data if held_out(d.project)]
    fitted = [d for d in train_data if not held_out(d.project)]
    model_json, report = train_on(fitted, valid_data, job, held)
    report["data"].update(
        train_projects=[_project_row(d, train_list) for d in fitted],
        held_out_projects=[_project_row(d, train_list) for d in held],
        validation_projects=[_project_row(d, valid_list) for d in valid_data],
    )
    report["data"]["collection_stopped"] = job.extra.get("collection_stopped", "")
    report["seconds"]["data"] = round(data_s, 1)
    report["seconds"]["total"] = round(time.perf_counter() - started, 1)
    write_model(job.out, model_json, report)
    note(f"wrote {job.out / 'model.json'} ({len(model_json['trees'])} trees)")
    return report


def train_on(
    train_data: Sequence[ProjectData],
    valid_data: Sequence[ProjectData],
    job: RankerJob,
    held: Sequence[ProjectData] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit on ``train_data``, choose on ``valid_data``: first the kind weights
    (``WEIGHT_GRID``, with the last tree setting of ``GRID``), then the tree setting with
    the chosen weights; (model JSON, report). ``held``: train projects held out of fitting,
    reported per kind beside validation."""
    import lightgbm

    note = job.progress or (lambda s: log.info("%s", s))
    if len(train_data) < 2 or not valid_data:
        raise TrainError("too few projects gave training or validation data")
    train = stack(train_data, NEG_SAMPLE, job.seed, job.kinds)
    valid = stack(valid_data)
    vx = all_rows(valid_data)
    fit_started = time.perf_counter()
    best, grid = _search_grid(train_data, valid_data, job, train, valid, vx, note)
    assert best is not None
    _, booster, params, chosen_w = best
    weight = query_weights(train_data, train[2], job.kinds, chosen_w)
    fit_s = time.perf_counter() - fit_started
    validation = compare(booster, valid_data)
    held_out_metrics = compare(booster, held) if held else {}
    ablation = (
        _ablation(job, train, valid, vx, valid_data, params, weight, note) if job.ablate else {}
    )
    importance = booster.feature_importance("gain")
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": job.command,
        "embedder": sorted({d.embedder for d in [*train_data, *valid_data]}),
        "features": list(FEATURES),
        "params": {**BASE_PARAMS, **params, "rounds": booster.best_iteration,
                   "keep_rank": KEEP_RANK, "negative_sample": NEG_SAMPLE, "seed": job.seed},
        "grid": grid,
        "lightgbm": lightgbm.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "data": _data_report(job, train_data, valid_data, held, train),
        "kind_weights": chosen_w,
        "validation": validation,
        "held_out": held_out_metrics,
        "ablation": ablation,
        "gain_top": {
            FEATURES[i]: round(float(importance[i]), 1)
            for i in sorted(range(len(FEATURES)), key=lambda i: -importance[i])[:15]
        },
        "seconds": {"fit": round(fit_s, 1)},
    }  # fmt: skip
    model_json = dump_model(booster, {"trained": report["date"], "embedder": report["embedder"]})
    diff = check_dump(model_json, booster, vx[:2000])
    report["dump_max_abs_diff"] = diff
    if diff > 1e-4:
        raise TrainError(f"the dumped trees differ from LightGBM's predictions by {diff}")
    return model_json, report


def _search_grid(
    train_data: Sequence[ProjectData], valid_data: Sequence[ProjectData], job: RankerJob,
    train: Any, valid: Any, vx: Any, note: Callable[[str], None],
) -> tuple[tuple[float, Any, dict[str, Any], Any], list[dict[str, Any]]]:  # fmt: skip
    """The kind weights first (``WEIGHT_GRID``, with the last tree setting of ``GRID``),
    then the tree setting with the chosen weights, each scored on validation:
    ``((score, booster, params, kind weights) of the best, every try's row)``."""
    grid = []
    best: tuple[float, Any, dict[str, Any], Any] | None = None
    weight_grid = job.weights or WEIGHT_GRID
    if job.doc_weight != DOC_WEIGHT:  # --doc-weight given: the docs weight is not searched
        weight_grid = tuple({**w, "docs": job.doc_weight} for w in weight_grid)
    trees = job.grid or GRID
    tries = [(trees[-1], w) for w in dict((json.dumps(w), w) for w in weight_grid).values()]
    for stage in ("weights", "trees"):
        if stage == "trees":
            assert best is not None
            tries = [(p, best[3]) for p in trees[:-1]]
        for params, kind_w in tries:
            t = time.perf_counter()
            weight = query_weights(train_data, train[2], job.kinds, kind_w)
            booster = fit(train, valid, params, job.threads, job.seed, weight)
            m = split_metrics(booster.predict(vx, num_iteration=booster.best_iteration), valid_data)
            row = {**params, "weights": kind_w, "rounds": booster.best_iteration, **m,
                   "seconds": time.perf_counter() - t}  # fmt: skip
            grid.append(row)
            note(
                f"grid {params} {kind_w}: validation score {m['score']:.4f} ("
                + ", ".join(f"{g} {m[g]['mrr@10']:.4f}" for g in KIND_GROUPS if g in m)
                + f"; {booster.best_iteration} trees)"
            )
            if best is None or m["score"] > best[0]:
                best = (m["score"], booster, dict(params), kind_w)
    assert best is not None
    return best, grid


def _ablation(
    job: RankerJob, train: Any, valid: Any, vx: Any, valid_data: Sequence[ProjectData],
    params: dict[str, Any], weight: Any, note: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """Validation without each feature group (refitted with it masked out); each
    model kept in ``job.extra["ablation_models"]``."""
    ablation = {}
    for group in GROUPS:
        tx = masked(train[0], group)
        b = fit((tx, train[1], train[2]), (masked(valid[0], group), valid[1], valid[2]),
                params, job.threads, job.seed, weight)  # fmt: skip
        m = split_metrics(b.predict(masked(vx, group), num_iteration=b.best_iteration), valid_data)
        ablation[f"without {group}"] = {**m, "rounds": b.best_iteration}
        job.extra.setdefault("ablation_models", {})[group] = dump_model(b, {"without": group})
        note(f"without {group}: validation score {m['score']:.4f}")
    return ablation


def _data_report(
    job: RankerJob, train_data: Sequence[ProjectData], valid_data: Sequence[ProjectData],
    held: Sequence[ProjectData], train: Any,
) -> dict[str, Any]:  # fmt: skip
    """The report's ``data`` section: the mining limits and what was fitted on."""
    return {
        "max_queries": job.max_queries,
        "valid_max_queries": VALID_MAX_QUERIES,
        "max_doc_queries": job.max_doc_queries,
        "max_mention_queries": job.max_mention_queries,
        "valid_doc_queries": job.valid_doc_queries,
        "kinds": list(job.kinds) or "all",
        "max_test_queries": job.max_test_queries,
        "max_example_queries": job.max_example_queries,
        "reports": job.reports,
        "depth": job.depth,
        "train_project_count": len(train_data),
        "train_queries": sum(queries_by_kind(train_data, job.kinds).values()),
        "train_queries_answered": len(train[2]),
        "train_rows": int(train[0].shape[0]),
        "train_queries_by_kind": queries_by_kind(train_data, job.kinds),
        "validation_projects": [d.project for d in valid_data],
        "validation_queries": int(sum(len(d.groups) for d in valid_data)),
        "validation_queries_by_kind": queries_by_kind(valid_data),
        "held_out_queries_by_kind": queries_by_kind(held),
    }


def compare(booster: Any, data: Sequence[ProjectData]) -> dict[str, Any]:
    """Per kind group on ``data``: RRF over the pool's lists, the shipped model (as it
    loads today: an older feature list is mapped onto ``FEATURES``), and ``booster``."""
    import json as _json

    from llmc.search.learned import DEFAULT_MODEL, model_from_json

    x = all_rows(data)
    out = {"rrf over the pool's lists": split_metrics(x[:, FEATURES.index("pool:rrf")], data)}
    if DEFAULT_MODEL.is_file():
        shipped = model_from_json(_json.loads(DEFAULT_MODEL.read_text(encoding="utf-8")))
        out["shipped model"] = split_metrics(shipped.predict(x), data)
    out["learned"] = split_metrics(booster.predict(x, num_iteration=booster.best_iteration), data)
    return out


def write_model(out: Path, model_json: Mapping[str, Any], report: Mapping[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "model.json", json.dumps(model_json, separators=(",", ":")))
    _write(out / "TRAINING.json", json.dumps(report, indent=2) + "\n")


def _project_row(d: ProjectData, listed: Sequence[tuple[Project, str]]) -> dict[str, Any]:
    p = next((p for p, _ in listed if p.name == d.project), None)
    if p is None:  # a history's reports: ``<name>@history``
        return {"name": d.project, "spans": d.spans, "queries": len(d.groups),
                "answered_in_pool": d.answered, "kinds": sorted(set(d.kinds))}  # fmt: skip
    return {
        "name": p.name,
        "version": p.version,
        "sha256": p.sha256,
        "spans": d.spans,
        "queries": len(d.groups),
        "answered_in_pool": d.answered,
        "kinds": sorted(set(d.kinds)),
    }


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


__all__ = [
    "BIG_PROJECTS",
    "DOC_WEIGHT",
    "TRAIN_KINDS",
    "CODE_KINDS",
    "DOCS_KINDS",
    "GRID",
    "RankerJob",
    "split_metrics",
    "check_dump",
    "dump_model",
    "fit",
    "masked",
    "pool_metrics",
    "query_weights",
    "run",
    "stack",
    "train_on",
    "train_projects",
    "validation_projects",
    "write_model",
]
