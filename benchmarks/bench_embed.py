"""Embedding runtime benchmark: torch fp32 against llmc's ONNX Runtime int8, same spans, same run.

    python benchmarks/bench_embed.py [--repo .] [--limit N] [--out FILE] [--no-threads]

Spans come from llmc's own walker and chunker over ``--repo`` (default: this repository), as
``llmc index`` would embed them. (a) is a plain batched ``SentenceTransformer.encode`` in
fp32 with torch's default threads; (b) is llmc's embedder with ``runtime="onnx"`` (exported
and checked on first use, cached under $XDG_CACHE_HOME/llmc/onnx). Prints spans/s for both,
the ratio (wall and CPU time; blocks of spans run in turn so load changes hit both), mean/min
cosine of (b) to (a), and the machine; (c) llmc's torch runtime (bf16 where the CPU has it)
is measured the same way unless --no-llmc-torch. ``--plans`` adds other int8 exports as
columns, built and checked like (b) (a plan whose check fails is still measured, and marked):
``static`` is static QDQ int8 calibrated on the export's fixed sample, ``mixed`` dynamic int8
of every projection but the first three layers' FFN outputs (both: benchmarks/README.md).
Then, unless --no-threads, the
query thread policy: median latency of one query and of 16 texts with 1 and with 2
onnxruntime threads, idle and with one busy process per core in the background.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def machine() -> dict[str, object]:
    model = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    from llmc.models.onnx_runtime import cpu_count, cpu_flags, detect_isa

    flags = cpu_flags()
    return {
        "cpu": model,
        "cores": cpu_count(),
        "flags": [f for f in FLAGS if f in flags],
        "isa": detect_isa(),
    }


def spans(repo: Path, limit: int) -> list[str]:
    from llmc.config import load_config
    from llmc.index.chunk import chunk_file
    from llmc.index.walk import read_text, walk
    from llmc.languages import detect_language

    cfg = load_config(repo)
    texts: dict[str, None] = {}
    for f in walk(repo, cfg.index).files:
        read = read_text(repo, f.path)
        if read.text is None:
            continue
        lang, category = detect_language(f.path, read.text.split("\n", 1)[0][:200])
        for span in chunk_file(f.path, read.text, lang, category, cfg.index):
            texts[span.embed_text] = None
    out = list(texts)
    return out[:limit] if limit else out


def extra_plans(isa: str) -> dict[str, object]:
    """The int8 plans ``--plans`` can add, by name."""
    from dataclasses import replace

    from llmc.models.onnx_plan import quant_plan

    mixed = replace(
        quant_plan(isa), keep_gelu_fed_fp32=False, gelu_fed_fp32_layers=3, quantize_attention=True
    )
    return {"static": replace(mixed, activations="static"), "mixed": mixed}


def plan_encoder(name: str, plan, source: str, results: dict[str, object]):
    """The checked export for ``plan``, built on first use; measured even if refused."""
    from llmc.models.embedder import DEFAULT_MODEL_ID, _load
    from llmc.models.onnx_runtime import OnnxEncoder, cache_dir, load_onnx_encoder

    t = time.perf_counter()
    enc = load_onnx_encoder(
        DEFAULT_MODEL_ID, source, 256, lambda: _load.__wrapped__(source, "cpu", "fp32"), plan=plan
    )
    directory = cache_dir(DEFAULT_MODEL_ID, source, plan)
    if enc is None:
        enc = OnnxEncoder(directory, 256)
    results[f"onnx_{name}_load_s"] = round(time.perf_counter() - t, 1)
    results[f"onnx_{name}_check"] = enc.meta.get("check")
    results[f"onnx_{name}_fp32_matmuls"] = len(enc.meta.get("fp32_matmuls", []))
    return enc


def _burn(stop) -> None:  # one busy core
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def thread_policy(encoder, rounds: int = 30) -> dict[str, dict[str, float]]:
    """Median ms for one query and for 16 texts at 1 and 2 threads, idle and loaded."""
    one = ["where is the embedding cache keyed by model and text hash"]
    sixteen = [
        f"def handler_{i}(request):\n    return render(request, 'page_{i}.html')" for i in range(16)
    ]
    out: dict[str, dict[str, float]] = {}
    for load in ("idle", "loaded"):
        stop = multiprocessing.Event()
        burners = []
        if load == "loaded":
            burners = [
                multiprocessing.Process(target=_burn, args=(stop,))
                for _ in range(encoder.batch_threads)
            ]
            for p in burners:
                p.start()
            time.sleep(0.5)
        try:
            for threads in (1, 2):
                session = encoder._session(threads)
                for name, texts in (("1 text", one), ("16 texts", sixteen)):
                    saved = encoder.query_threads
                    encoder.query_threads = threads
                    try:
                        encoder.encode(texts)
                        times = []
                        for _ in range(rounds):
                            t = time.perf_counter()
                            encoder.encode(texts)
                            times.append((time.perf_counter() - t) * 1000)
                    finally:
                        encoder.query_threads = saved
                    out.setdefault(f"{load}, {name}", {})[f"{threads} thread(s) ms"] = round(
                        statistics.median(times), 1
                    )
                del session
        finally:
            stop.set()
            for p in burners:
                p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--limit", type=int, default=0, help="at most this many spans (0: all)")
    ap.add_argument(
        "--batch-size",
        type=int,
        default=0,
        help="texts per forward pass for every column (0: llmc's on a CPU, also ST's default)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-threads", action="store_true", help="skip the thread-policy table")
    ap.add_argument("--no-llmc-torch", action="store_true", help="skip llmc's torch runtime")
    ap.add_argument("--block", type=int, default=256, help="spans per timed block")
    ap.add_argument(
        "--plans", default="static,mixed", help="other int8 plans to add as columns ('' for none)"
    )
    args = ap.parse_args()
    if not args.batch_size:
        from llmc.models.embedder import CPU_BATCH

        args.batch_size = CPU_BATCH
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from llmc.models.embedder import SentenceTransformerEmbedder, resolve_model

    texts = spans(args.repo.resolve(), args.limit)
    results: dict[str, object] = {"machine": machine(), "spans": len(texts)}
    _, source = resolve_model("default")

    # (a) baseline: plain batched encode, fp32, torch's default threads
    st = SentenceTransformer(source, device="cpu")
    st.max_seq_length = 256
    results["torch_threads"] = torch.get_num_threads()

    def baseline(block: list[str]) -> np.ndarray:
        with torch.inference_mode():
            return st.encode(
                block, batch_size=args.batch_size, normalize_embeddings=True, convert_to_numpy=True
            )

    # (b) llmc's embedder on the onnx int8 runtime (first use exports and checks; not timed)
    t = time.perf_counter()
    emb = SentenceTransformerEmbedder(runtime="onnx", batch_size=args.batch_size)
    results["onnx_load_s"] = round(time.perf_counter() - t, 1)
    results["runtime"] = emb.runtime
    results["runtime_detail"] = emb.choice.reason
    runners = {"torch_fp32": baseline, "onnx_int8": emb.embed_passages}
    if not args.no_llmc_torch:  # (c) llmc's torch path as `auto` picks it without onnx
        llmc_torch = SentenceTransformerEmbedder(runtime="torch", batch_size=args.batch_size)
        results["llmc_torch_detail"] = llmc_torch.choice.reason
        runners["llmc_torch"] = llmc_torch.embed_passages
    plans = extra_plans(str(results["machine"]["isa"]))  # type: ignore[index]
    for name in filter(None, args.plans.split(",")):
        enc = plan_encoder(name, plans[name], source, results)
        runners[f"onnx_{name}"] = lambda block, enc=enc: enc.encode(block, args.batch_size)
    for run in runners.values():
        run(texts[:8])

    # Blocks in turn, so a change in the machine's load hits every runtime alike.
    wall = dict.fromkeys(runners, 0.0)
    cpu = dict.fromkeys(runners, 0.0)
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in runners}
    for start in range(0, len(texts), args.block):
        block = texts[start : start + args.block]
        for name, run in runners.items():
            t, c = time.perf_counter(), time.process_time()
            vectors[name].append(np.asarray(run(block), dtype=np.float32))
            wall[name] += time.perf_counter() - t
            cpu[name] += time.process_time() - c
    ref = np.concatenate(vectors["torch_fp32"])
    for name in runners:
        results[f"{name}_spans_per_s"] = round(len(texts) / wall[name], 1)
        results[f"{name}_cpu_ms_per_span"] = round(1000 * cpu[name] / len(texts), 1)
        if name != "torch_fp32":
            cos = (ref * np.concatenate(vectors[name])).sum(axis=1)
            results[f"{name}_speedup_wall"] = round(wall["torch_fp32"] / wall[name], 2)
            results[f"{name}_speedup_cpu"] = round(cpu["torch_fp32"] / cpu[name], 2)
            results[f"{name}_cosine_mean"] = round(float(cos.mean()), 4)
            results[f"{name}_cosine_min"] = round(float(cos.min()), 4)
            results[f"{name}_cosine_below_0.99"] = int((cos < 0.99).sum())
    if emb._onnx is not None and not args.no_threads:
        results["query_threads"] = thread_policy(emb._onnx)
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
