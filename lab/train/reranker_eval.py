"""Held-out evaluation of a trained reranker (step 5 of ``lab.train.reranker``): BM25's
top 20 against the same list reranked, and against a blend of both, by MRR@10 and nDCG@10,
with the saved weights loaded the way llmc loads them.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from llmc.learn.mine import CODE_QUERY, Example, Mined

log = logging.getLogger("lab.train.reranker")

# Held-out "blend", as rerank.blend = "blend" in llmc.search.rerank: BLEND_WEIGHT * reranker
# score + (1 - it) * BM25 score, both min-max scaled over the list.
BLEND_WEIGHT = 0.5
BLEND_NAME = f"bm25+rerank blend {BLEND_WEIGHT} (min-max)"


def _minmax(values: list[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


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


__all__ = ["BLEND_NAME", "BLEND_WEIGHT", "evaluate"]
