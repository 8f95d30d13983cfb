"""On a GPU machine: what the `gpu` profile and the latency budget decide there, from a
measured cross-encoder cost rather than the prior.

    python benchmarks/bench_budget_gpu.py [--json out.json]

It needs torch and transformers only (no index, no llmc extras): the shipped reranker's
architecture and tokenizer (llmc/models/reranker: MiniLM-L6, 6 layers, 384 wide) in fp16 on
the GPU with random weights (a forward pass costs the same whatever the values), scoring
(query, span) pairs cut at rerank.max_length = 128 tokens, made of this repository's own
questions and source files. It prints the profile `auto` resolves to, the warm cost of
scoring the top 10 / 20 / 50 (p50 and p95 of 50 runs, torch.cuda.synchronize around each),
and the budget's decision for the default top 20 once those timings have taught the cost
model (and before, from the prior).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from llmc.models.device import detect_accelerator, machine_profile  # noqa: E402
from llmc.search import budget  # noqa: E402

RERANKER = HERE.parent / "llmc" / "models" / "reranker"
SET = HERE.parent / "llmc" / "eval" / "sets" / "llmc.jsonl"


def pairs(n: int) -> tuple[list[str], list[str]]:
    queries = [json.loads(line)["query"] for line in SET.read_text().splitlines() if line]
    files = sorted((HERE.parent / "llmc" / "search").glob("*.py"))
    texts = [f.read_text()[:2000] for f in files]
    return [queries[i % len(queries)] for i in range(n)], [texts[i % len(texts)] for i in range(n)]


def main() -> None:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    device = detect_accelerator()
    profile = machine_profile("auto")
    print(f"detect_accelerator: {device}; profile: {profile.reason}")
    if device != "cuda":
        print("no CUDA here: nothing to measure")
        return
    print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    config = AutoConfig.from_pretrained(RERANKER)
    model = AutoModelForSequenceClassification.from_config(config).half().cuda().eval()
    tokenizer = AutoTokenizer.from_pretrained(RERANKER)
    out: dict = {"device": device, "profile": profile.name, "gpu": torch.cuda.get_device_name(0)}
    costs = budget.CostModel(None)
    prior = budget.Budget(150, time.perf_counter(), costs, device)
    before = prior.allow("rerank", prior.expect(budget.RERANK_PAIR, 20), False)
    print(f"top 20 from the prior: {before.note}")
    for n in (10, 20, 50):
        qs, ts = pairs(n)
        timings = []
        for run in range(60):
            started = time.perf_counter()
            batch = tokenizer(
                qs, ts, truncation=True, max_length=128, padding=True, return_tensors="pt"
            ).to("cuda")
            with torch.inference_mode():
                model(**batch).logits.float().cpu()
            torch.cuda.synchronize()
            if run >= 10:  # warm
                timings.append((time.perf_counter() - started) * 1000)
        p50 = statistics.median(timings)
        p95 = sorted(timings)[int(0.95 * len(timings)) - 1]
        out[f"top{n}"] = {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2)}
        print(f"top {n}: p50 {p50:.2f} ms, p95 {p95:.2f} ms ({p50 / n:.3f} ms a pair)")
        if n == 20:
            for t in timings:
                costs.observe(device, budget.RERANK_PAIR, t / n)
    learned = budget.Budget(150, time.perf_counter(), costs, device)
    after = learned.allow("rerank", learned.expect(budget.RERANK_PAIR, 20), False)
    print(f"top 20 learned: {after.note}")
    out["decision"] = {"prior": before.note, "learned": after.note}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
