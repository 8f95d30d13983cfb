"""Cross-encoder runtimes on this CPU: torch fp32, torch bf16, ONNX Runtime fp32 and int8.

    HF_HUB_OFFLINE=1 python benchmarks/bench_rerank_runtime.py [--model default] \
        [--queries 3] [--pairs 20] [--max-length 128] [--threads 1] [--json]

Issue 14 asks for the cross-encoder on ONNX Runtime int8 on CPUs (as the embedder has it).
This measures whether that pays before it is built: the shipped reranker (or ``--model``)
scores ``--pairs`` (query, span) pairs of this repository's Python files per query, as the
search pipeline does (top 20 x 128 tokens), with each runtime:

* torch fp32 and torch bf16 (what ``rerank.precision = auto`` picks on AVX512-BF16/AMX CPUs);
* ONNX Runtime on the model's logits exported with ``torch.onnx.export``, fused by
  onnxruntime's BERT optimizer: fp32; int8 dynamic quantization with the GELU-fed matmuls
  kept fp32 (the embedder's plan); int8 with every matmul quantized.

Reported: CPU milliseconds per call (``time.process_time`` of this single-threaded process,
so a busy machine distorts it less than wall time), median over queries x repeats, and the
agreement with torch fp32 per query: Spearman's rho and the top-5 overlap. Nothing here is a
test; it states the machine.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_searchable import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERIES = (
    "where is the lexical index rebuilt after a crash",
    "how does the daemon coalesce reindex requests",
    "check the onnx export against torch by cosine",
    "which files does the walker skip as generated",
    "how are graph edges merged from every file",
)


def _export(model, tok_inputs, names, directory: Path) -> dict[str, Path]:
    """The cross-encoder's logits exported with ``torch.onnx.export``, then fused and
    quantized by the embedder's own export steps (``llmc.models.onnx_export``)."""
    import torch

    from llmc.models.onnx_export import _fuse, _quantize
    from llmc.models.onnx_plan import QuantPlan, detect_isa

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(names, tensors, strict=True))).logits

    raw, fused = directory / "fp32.onnx", directory / "fused.onnx"
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter("eager")  # the graph onnxruntime's optimizer fuses
    axes = {n: {0: "batch", 1: "seq"} for n in names} | {"logits": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(
            Logits(model).eval(),
            tuple(tok_inputs[n] for n in names),
            str(raw),
            input_names=names,
            output_names=["logits"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )
    if not _fuse(raw, fused, {"auto_model": model, "dim": model.config.hidden_size}):
        fused = raw
    out = {"onnx fp32": fused}
    isa = detect_isa()
    for label, keep_gelu_fed in (("onnx int8, GELU-fed fp32", True), ("onnx int8, all", False)):
        dst = directory / f"{len(out)}.onnx"
        _quantize(fused, dst, QuantPlan(isa, "qint8", keep_gelu_fed_fp32=keep_gelu_fed))
        out[label] = dst
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--queries", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import onnxruntime as ort
    import torch
    from scipy.stats import spearmanr
    from sentence_transformers import CrossEncoder

    from llmc.models.onnx_export import quiet
    from llmc.models.reranker import CHARS_PER_TOKEN, passage_text, resolve_model

    torch.set_num_threads(args.threads)
    model_id, source = resolve_model(args.model)
    ce = CrossEncoder(source, device="cpu", model_kwargs={"dtype": torch.float32})
    model = ce.model.float().eval()
    tok = ce.tokenizer
    files = sorted((ROOT / "llmc").rglob("*.py"))
    cut = args.max_length * CHARS_PER_TOKEN
    batches = []
    for i, q in enumerate(QUERIES[: args.queries]):
        chosen = files[i * args.pairs : (i + 1) * args.pairs]
        texts = [passage_text(str(f.relative_to(ROOT)), f.read_text())[:cut] for f in chosen]
        enc = tok(
            [q] * len(texts),
            texts,
            truncation=True,
            max_length=args.max_length,
            padding=True,
            return_tensors="pt",
        )
        batches.append(enc)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in batches[0]]

    def timed(fn) -> tuple[list[float], list]:
        cpu, outs = [], []
        for enc in batches:
            outs.append(fn(enc))
            for _ in range(args.repeat):
                t = time.process_time()
                fn(enc)
                cpu.append(time.process_time() - t)
        return cpu, outs

    results: dict[str, dict] = {}
    with torch.inference_mode():
        ref_cpu, refs = timed(lambda enc: model(**enc).logits[:, 0].float().numpy())
        results["torch fp32"] = {"cpu": ref_cpu, "outs": refs}
        bf16 = copy.deepcopy(model).to(torch.bfloat16)  # .to() is in place: keep fp32 intact
        cpu, outs = timed(lambda enc: bf16(**enc).logits[:, 0].float().numpy())
        results["torch bf16"] = {"cpu": cpu, "outs": outs}
    with tempfile.TemporaryDirectory(prefix="llmc-ce-onnx-") as tmp, quiet():
        paths = _export(model, batches[0], names, Path(tmp))
        for label, path in paths.items():
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            cpu, outs = timed(
                lambda enc, s=session: s.run(None, {n: enc[n].numpy() for n in names})[0][:, 0]
            )
            results[label] = {"cpu": cpu, "outs": outs}

    rows = []
    for label, r in results.items():
        rho = [float(spearmanr(ref, o)[0]) for ref, o in zip(refs, r["outs"], strict=True)]
        top5 = [
            len(set(np.argsort(-ref)[:5]) & set(np.argsort(-o)[:5])) / 5
            for ref, o in zip(refs, r["outs"], strict=True)
        ]
        rows.append(
            {
                "runtime": label,
                "cpu_ms_median": round(1000 * statistics.median(r["cpu"]), 1),
                "spearman_min": round(min(rho), 4),
                "top5_overlap_min": min(top5),
            }
        )
    report = {
        "machine": machine(),
        "model": model_id,
        "pairs": args.pairs,
        "max_length": args.max_length,
        "threads": args.threads,
        "queries": args.queries,
        "rows": rows,
        "load_at_end": round(os.getloadavg()[0], 1),
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{report['machine']}; model {model_id}; {args.pairs} pairs x {args.max_length} tokens")
    print(
        "| runtime | CPU ms per call (median) | Spearman vs torch fp32 (min) | top-5 overlap (min) |"
    )
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['runtime']} | {r['cpu_ms_median']} | {r['spearman_min']} "
            f"| {r['top5_overlap_min']:.1f} |"
        )
    print(f"load average at the end: {report['load_at_end']}")


if __name__ == "__main__":
    main()
