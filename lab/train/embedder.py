"""Fine-tune the packaged all-MiniLM-L6-v2 for code search (``python -m lab train embedder``).

Contrastive training with sentence-transformers' ``MultipleNegativesRankingLoss`` (in-batch
negatives plus one mined BM25 hard negative per pair) on pairs from the train projects
(``lab.train.embedder_data``). The word-embedding table stays frozen: it is 23 MB of the
model, the pairs are too few to move it well, and a frozen table is bit-identical to the
base model's, so the shipped model only adds the layers that changed (``llmc.models.shipped``).

Every candidate (each learning rate and epoch count asked for) is scored on the
*validation* projects' docstring queries (MRR@10 of a dense search over the stripped corpus,
as the protocol's ``dense-only`` system ranks) next to the base model, and the run keeps
the best one only if it beats the base. The loop is ours (twenty lines) because the
library's Trainer needs the ``datasets`` package, which accelerator images often lack; the
loss, the model and the tokenisation are the library's.

Runs on CUDA when there is one (bf16 autocast), else on the CPU (slow: hours on 2 cores
for the full set; use ``--max-pairs``). Reads only JSONL, so it needs sentence-transformers
and torch and none of llmc's index dependencies.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FROZEN = ("embeddings.word_embeddings.weight",)


@dataclass(frozen=True)
class FitOptions:
    lr: float = 3e-5
    epochs: int = 1
    batch_size: int = 128
    max_seq_length: int = 256
    warmup: float = 0.1
    weight_decay: float = 0.01
    scale: float = 20.0
    seed: int = 42
    max_pairs: int = 0  # 0: all


def read_jsonl(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def batches_without_duplicates(
    pairs: Sequence[dict], batch_size: int, rng: random.Random
) -> list[list[dict]]:
    """Shuffled batches in which no passage text appears twice (an in-batch negative that
    equals the positive would be a false negative)."""
    order = list(pairs)
    rng.shuffle(order)
    batches: list[list[dict]] = []
    pending = order
    while pending:
        batch: list[dict] = []
        seen: set[str] = set()
        rest: list[dict] = []
        for p in pending:
            keys = {p["positive"], p["negative"], p["query"]}
            if len(batch) < batch_size and not keys & seen:
                batch.append(p)
                seen |= keys
            else:
                rest.append(p)
        if len(batch) < 2:
            break
        batches.append(batch)
        pending = rest
    return batches


def mrr_at_10(
    model, corpus: Sequence[dict], queries: Sequence[dict], batch_size: int = 256
) -> float:
    """MRR@10 of a dense search over ``corpus`` (any span of the target symbol counts)."""
    import torch

    span_vecs = model.encode(
        [s["text"] for s in corpus],
        batch_size=batch_size,
        convert_to_tensor=True,
        normalize_embeddings=True,
    )
    query_vecs = model.encode(
        [q["query"] for q in queries],
        batch_size=batch_size,
        convert_to_tensor=True,
        normalize_embeddings=True,
    )
    top = torch.topk(query_vecs @ span_vecs.T, k=min(10, len(corpus)), dim=1).indices.tolist()
    total = 0.0
    for q, hits in zip(queries, top, strict=True):
        for rank, i in enumerate(hits, 1):
            s = corpus[i]
            if s["path"] == q["path"] and (not q["qualname"] or s["qualname"] == q["qualname"]):
                total += 1.0 / rank
                break
    return total / max(1, len(queries))


def validation_mrr(model, selection: dict[str, tuple[list[dict], list[dict]]]) -> dict[str, float]:
    per = {name: round(mrr_at_10(model, c, q), 4) for name, (c, q) in selection.items()}
    per["mean"] = round(sum(per.values()) / max(1, len(per)), 4)
    return per


def fit(model, pairs: Sequence[dict], opts: FitOptions) -> dict:
    """Train ``model`` in place; returns the run's statistics."""
    import torch

    try:
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )
    except ImportError:  # sentence-transformers < 6.2
        from sentence_transformers.losses import MultipleNegativesRankingLoss

    device = model.device
    model.max_seq_length = opts.max_seq_length
    for name, param in model[0].auto_model.named_parameters():
        if name in FROZEN:
            param.requires_grad_(False)
    loss_fn = MultipleNegativesRankingLoss(model, scale=opts.scale)
    rng = random.Random(opts.seed)
    torch.manual_seed(opts.seed)
    plan = [
        b
        for _ in range(opts.epochs)
        for b in batches_without_duplicates(pairs, opts.batch_size, rng)
    ]
    params = [p for p in model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=opts.lr, weight_decay=opts.weight_decay)
    warm = max(1, int(len(plan) * opts.warmup))

    def schedule(step: int) -> float:
        return (
            (step + 1) / warm
            if step < warm
            else max(0.0, (len(plan) - step) / max(1, len(plan) - warm))
        )

    sched = torch.optim.lr_scheduler.LambdaLR(optim, schedule)
    model.train()
    started = time.perf_counter()
    losses: list[float] = []
    use_amp = device.type == "cuda"
    tokenize = getattr(model, "preprocess", None) or model.tokenize
    for batch in plan:
        features = [
            _to(tokenize([p[col] for p in batch]), device)
            for col in ("query", "positive", "negative")
        ]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = loss_fn(features, None)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optim.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return {
        "steps": len(plan),
        "pairs_seen": sum(len(b) for b in plan),
        "seconds": round(time.perf_counter() - started, 1),
        "first_loss": round(sum(losses[:20]) / max(1, len(losses[:20])), 4),
        "final_loss": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4),
        "device": str(device),
    }


def _to(features: dict, device) -> dict:
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in features.items()}


def load_selection(data: Path) -> dict[str, tuple[list[dict], list[dict]]]:
    out = {}
    for corpus in sorted(data.glob("val-*-corpus.jsonl")):
        name = corpus.name[len("val-") : -len("-corpus.jsonl")]
        out[name] = (read_jsonl(corpus), read_jsonl(data / f"val-{name}-queries.jsonl"))
    return out


def run(data: Path, base: Path, out: Path, grid: Sequence[FitOptions]) -> dict:
    """Train one candidate per options in ``grid`` from ``base``; keep the best on validation.

    ``out/best`` gets the winner's weights (when one beats the base), ``out/report.json``
    every candidate's numbers.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    pairs = read_jsonl(data / "pairs.jsonl")
    selection = load_selection(data)
    base_model = SentenceTransformer(str(base), device=device)
    base_model.max_seq_length = grid[0].max_seq_length if grid else 256
    report: dict = {
        "pairs": len(pairs),
        "projects": sorted({p["project"] for p in pairs}),
        "validation_projects": sorted(selection),
        "base_validation_mrr@10": validation_mrr(base_model, selection),
        "candidates": [],
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
    }
    log.info("base: %s", report["base_validation_mrr@10"])
    best_score, best_state = report["base_validation_mrr@10"]["mean"], None
    for opts in grid:
        use = (
            pairs
            if not opts.max_pairs
            else random.Random(opts.seed).sample(pairs, min(opts.max_pairs, len(pairs)))
        )
        model = SentenceTransformer(str(base), device=device)
        stats = fit(model, use, opts)
        score = validation_mrr(model, selection)
        report["candidates"].append(
            {"options": asdict(opts), "stats": stats, "validation_mrr@10": score}
        )
        log.info("%s: %s %s", asdict(opts), stats, score)
        if score["mean"] > best_score:
            best_score = score["mean"]
            best_state = (
                opts,
                {k: v.detach().to("cpu", torch.float16) for k, v in model.state_dict().items()},
            )
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    out.mkdir(parents=True, exist_ok=True)
    if best_state is not None:
        from safetensors.torch import save_file

        opts, state = best_state
        changed = {k: v.contiguous() for k, v in shipped_layers(state).items()}
        save_file(changed, str(out / "layers.fp16.safetensors"))
        report["chosen"] = asdict(opts)
    else:
        report["chosen"] = None
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def parse_grid(spec: str, base: FitOptions) -> list[FitOptions]:
    """``"5e-5:1,1e-4:3"`` → one FitOptions per lr:epochs."""
    out = []
    for item in spec.split(","):
        lr, _, epochs = item.strip().partition(":")
        out.append(FitOptions(**{**asdict(base), "lr": float(lr), "epochs": int(epochs or 1)}))
    return out


def shipped_layers(state: dict) -> dict:
    """A trained model's state dict under Hugging Face names, without the frozen table."""
    out = {}
    for key, value in state.items():
        for prefix in ("0.model.", "0.auto_model."):
            if key.startswith(prefix):
                key = key[len(prefix) :]
        if key not in FROZEN:
            out[key] = value
    return out


__all__ = ["FitOptions", "fit", "parse_grid", "run", "shipped_layers", "validation_mrr"]
