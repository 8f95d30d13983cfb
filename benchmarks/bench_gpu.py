"""On a CUDA machine: train the code embedder's grid, then time GPU inference (fp16).

This is the script that ran on the lent H100 (benchmarks/README.md, "GPU"). It takes the
mined data (``python -m lab train embedder --mine-only``, xz-compressed, under .gpu/data) and the base
model's tensors split in two files (a workspace that could carry at most 64 MiB: layers-a
came in an earlier call to /tmp/llmc-base/, layers-b with this one; the word table is taken
from the shipped reranker, which keeps the base's frozen table bit for bit). On a machine
with llmc installed, ``python -m lab train embedder --data DIR --out DIR`` does the training part.

    python3 benchmarks/bench_gpu.py OUT [GRID]

Inference: (a) plain ``SentenceTransformer.encode`` fp32, batch 64; llmc's embedder as
``embedding.device = auto`` loads it on CUDA (fp16) at batch 64/256/512, cosine to (a);
one-query embedding latency; the shipped cross-encoder (fp16) on top-20 and top-100.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

OUT = Path(sys.argv[1])
GRID = sys.argv[2] if len(sys.argv) > 2 else "2e-5:1,5e-5:1,1e-4:1,5e-5:3,1e-4:3"
base = Path("/tmp/llmc-base/model")
base.mkdir(parents=True, exist_ok=True)
state = {}
state.update(load_file("/tmp/llmc-base/layers-a.safetensors"))
state.update(load_file(".gpu/partB/layers-b.safetensors"))
if Path("/tmp/llmc-base/wa.npy").exists():  # the table carried in two halves
    halves = [np.load(f"/tmp/llmc-base/w{h}.npy") for h in "ab"]
    state["embeddings.word_embeddings.weight"] = torch.from_numpy(np.concatenate(halves))
else:  # a reranker shipped whole keeps the base's frozen table bit for bit
    rr = load_file("llmc/models/reranker/model.safetensors")
    state["embeddings.word_embeddings.weight"] = rr["bert.embeddings.word_embeddings.weight"]
state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
save_file(state, str(base / "model.safetensors"))
shutil.copytree(".gpu/partB/base-config", base, dirs_exist_ok=True)
data = Path("/tmp/llmc-data")
data.mkdir(exist_ok=True)
for f in Path(os.environ.get("LLMC_GPU_DATA", ".gpu/data")).iterdir():
    if f.name.endswith(".xz"):
        subprocess.run(f"xz -dc {f} > {data / f.name[:-3]}", shell=True, check=True)
    else:
        shutil.copy(f, data / f.name)

sys.path.insert(0, os.getcwd())
import logging

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
from lab.train.embedder import FitOptions, run
from lab.train.embedder import parse_grid as _grid

t0 = time.perf_counter()
report = run(data, base, OUT / "train", _grid(GRID, FitOptions()))
report["wall_seconds"] = round(time.perf_counter() - t0, 1)
(OUT / "train" / "report.json").write_text(json.dumps(report, indent=2))
print(json.dumps({k: v for k, v in report.items() if k != "projects"}, indent=1))
lay = OUT / "train" / "layers.fp16.safetensors"
if lay.exists():
    subprocess.run(
        f"cd {OUT}/train && split -b 12M layers.fp16.safetensors layers.part. && rm layers.fp16.safetensors",
        shell=True,
        check=True,
    )

if os.environ.get("LLMC_GPU_SKIP_BENCH"):
    sys.exit(0)
# ---- GPU inference numbers (issue 14 item 5)
from sentence_transformers import SentenceTransformer

from llmc.models.embedder import SentenceTransformerEmbedder
from llmc.models.reranker import CrossEncoderReranker

texts = []
for f in sorted(data.glob("val-*-corpus.jsonl")):
    texts += [json.loads(l)["text"] for l in f.read_text().splitlines() if l.strip()]
bench = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "spans": len(texts)}


def timed(fn, reps=3):
    best = None
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        d = time.perf_counter() - t
        best = d if best is None else min(best, d)
    return best, out


plain = SentenceTransformer(str(base), device="cuda")
plain.max_seq_length = 256
plain.encode(texts[:256], batch_size=64)
d, ref = timed(
    lambda: plain.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
)
bench["plain_fp32_b64_spans_per_s"] = round(len(texts) / d, 1)
for bs in (64, 256, 512):
    emb = SentenceTransformerEmbedder(str(base), device="cuda", precision="auto", batch_size=bs)
    emb.embed_passages(texts[:256])
    d, vec = timed(lambda: emb.embed_passages(texts))
    cos = float(
        np.min(
            np.sum(vec * ref, axis=1) / (np.linalg.norm(vec, axis=1) * np.linalg.norm(ref, axis=1))
        )
    )
    bench[f"llmc_b{bs}_spans_per_s"] = round(len(texts) / d, 1)
    bench[f"llmc_b{bs}_min_cosine_vs_fp32"] = round(cos, 5)
    bench["llmc_precision"] = emb.choice.precision
q = [
    "how is the configuration validated",
    "where are retries scheduled",
    "parse the header of a message",
]
lat = []
emb = SentenceTransformerEmbedder(str(base), device="cuda", precision="auto")
for i in range(60):
    torch.cuda.synchronize()
    t = time.perf_counter()
    emb.embed_queries([q[i % 3]])
    torch.cuda.synchronize()
    lat.append((time.perf_counter() - t) * 1000)
bench["query_embed_ms_p50"] = round(statistics.median(lat[10:]), 2)
rer = CrossEncoderReranker(device="cuda", precision="auto")
bench["reranker_precision"] = rer.choice.precision
for k in (20, 100):
    lat = []
    for i in range(60):
        cand = texts[(i * 37) % (len(texts) - k) :][:k]
        torch.cuda.synchronize()
        t = time.perf_counter()
        rer.score(q[i % 3], cand)
        torch.cuda.synchronize()
        lat.append((time.perf_counter() - t) * 1000)
    lat = lat[10:]
    bench[f"rerank_top{k}_ms_p50"] = round(statistics.median(lat), 2)
    bench[f"rerank_top{k}_ms_p95"] = round(sorted(lat)[int(0.95 * len(lat)) - 1], 2)
(OUT / "gpu_bench.json").write_text(json.dumps(bench, indent=2))
print(json.dumps(bench, indent=1))
