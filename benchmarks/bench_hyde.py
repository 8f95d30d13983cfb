"""HyDE on vs off on the shipped eval sets: per intent, rescues by the threshold step-down,
added latency. The numbers behind the `[hyde]` defaults (docs/hyde.md).

    python benchmarks/bench_hyde.py                          # all sets, markdown to stdout
    python benchmarks/bench_hyde.py --sets attrs --set hyde.n=3 --json out.json

Variants: ``no-hyde`` (the baseline), ``hyde`` (gated HyDE for every intent) and
``hyde-always`` (no gate), plus the ``default`` pipeline; any other eval variant runs too
(``llm-rerank``, ``llm-rerank-always``: the LLM listwise stage, whose gate and calls are
recorded per query). ``--set KEY=VALUE`` changes the config of every variant
(``hyde.n=3``, ``hyde.weight=0.5``, ``hyde.rocchio=false``, ``llm.embedded_model=PATH``).
``--compare VARIANT:BASE`` adds, per set intent and pooled, MRR@10 and nDCG@10 with the
paired difference, Wilcoxon p and a paired bootstrap 95% CI, and the LLM's time per call
(p50 / p95) and the whole query's added time where it was called:

    python benchmarks/bench_hyde.py --sets attrs marshmallow \
        --variants no-hyde hyde llm-rerank --set llm.provider=embedded --set hyde.cache=false \
        --compare hyde:no-hyde llm-rerank:no-hyde --json smol.json
Hypotheses are cached in each project's ``.llmc/hyde_cache.db``: the first run of a prompt
version generates them (its HyDE latencies are the cold ones reported); later runs with
other weights reuse them. The LLM is whatever ``[llm]`` resolves to (``llm.provider``;
the embedded SmolLM2 on a machine without ollama). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from llmc.config import load_config  # noqa: E402
from llmc.eval.metrics import QueryScores  # noqa: E402
from llmc.eval.projects import default_cache_dir, fetch_project, resolve_set, shipped_sets  # noqa: E402
from llmc.eval.queries import load_queries  # noqa: E402
from llmc.eval.runner import run_eval  # noqa: E402
from llmc.eval.stats import wilcoxon  # noqa: E402

VARIANTS = ("no-hyde", "hyde", "hyde-always", "default")
BUCKETS = ("all", "code", "docs", "mixed")


class _ListwiseTap:
    """Records what the LLM listwise stage did for the query being searched: whether its
    gate opened, and the outcome of the LLM call (``None``: not called, e.g. skipped by the
    latency budget). Wraps ``llm_rerank.gate`` and ``llm_rerank.llm_rerank`` once."""

    def __init__(self) -> None:
        from llmc.search import llm_rerank

        self.current: dict[str, Any] = {}
        gate, call = llm_rerank.gate, llm_rerank.llm_rerank

        def tapped_gate(*args: Any, **kwargs: Any) -> Any:
            why = gate(*args, **kwargs)
            self.current["gate"] = why
            return why

        def tapped_call(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            self.current["call"] = {"applied": out.applied, "reason": out.reason,
                                    "ms": out.ms, "answer": out.answer[:200],
                                    "order": list(out.order)}  # fmt: skip
            return out

        llm_rerank.gate, llm_rerank.llm_rerank = tapped_gate, tapped_call


_TAP: _ListwiseTap | None = None


class Recorder:
    """A Searcher that keeps every response's HyDE report and what the LLM listwise stage
    did, in call order."""

    def __init__(self, root: Path, cfg: Any, log: list):
        from llmc.search import Searcher

        global _TAP
        if _TAP is None:
            _TAP = _ListwiseTap()
        self._searcher = Searcher(root, cfg)
        self._log = log

    def warm(self) -> None:
        self._searcher.warm()

    def search(self, query: str, k: int | None = None) -> Any:
        assert _TAP is not None
        _TAP.current = {}
        response = self._searcher.search(query, k=k)
        listwise = dict(_TAP.current, stage_ms=response.timings_ms.get("llm_rerank"))
        self._log.append((query, response.hyde, response.took_ms, response.route.intent, listwise))
        return response

    def close(self) -> None:
        self._searcher.close()


def _parse_sets(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key.strip()] = value.strip()
    return out


def run_set(name: str, overrides: dict[str, Any], variants: Sequence[str]) -> dict[str, Any]:
    chosen = resolve_set(name)
    queries = load_queries(chosen.queries_path)
    root = chosen.root
    if root is None and chosen.project is not None:
        base = default_cache_dir(load_config(None).eval.cache_dir)
        root = fetch_project(chosen.project, base)
    root = root.resolve()
    cfg = load_config(root, overrides)
    logs: dict[str, list] = {}
    order: list[str] = list(variants)

    def factory(r: Path, c: Any) -> Recorder:
        variant = order[len(logs)]
        logs[variant] = []
        return Recorder(r, c, logs[variant])

    ignore = []
    try:
        ignore.append(chosen.queries_path.resolve().relative_to(root).as_posix())
    except ValueError:
        pass
    print(f"{chosen.name}: {len(queries)} queries, {root}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    report = run_eval(
        queries, root, cfg, list(variants), set_name=chosen.name,
        ignore_paths=ignore, searcher_factory=factory,
    )  # fmt: skip
    print(f"  done in {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    warmup = cfg.eval.warmup
    out: dict[str, Any] = {"set": chosen.name, "n": len(queries), "variants": {}}
    for v, run in report.variants.items():
        entries = logs[v][warmup:]
        out["variants"][v] = {
            "scores": [
                {**_score_json(s), "route": e[3]} for s, e in zip(run.scores, entries, strict=True)
            ],
            "hyde": [
                (h.to_json() if h is not None else None, took) for _, h, took, _, _ in entries
            ],
            "llm_rerank": [e[4] for e in entries],
        }
    return out


def _score_json(s: QueryScores) -> dict[str, Any]:
    return {"query": s.query, "intent": s.intent, "rr": s.rr, "ndcg": s.ndcg,
            "hit_5": s.hit_5, "took_ms": s.took_ms}  # fmt: skip


def _share(xs: Sequence[Any], n: int) -> str:
    return f"{len(xs)} ({len(xs) / n:.0%})" if n else "0"


def _median(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.0f}" if xs else "-"


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def summarize(
    results: Sequence[dict[str, Any]], variants: Sequence[str], by: str = "intent"
) -> str:
    """Markdown: MRR/nDCG per bucket (the set's ``intent``, or the router's ``route``)
    pooled over the sets, p vs no-hyde, then rescues and latency."""
    lines = [f"| variant | {by} | n | MRR@10 | nDCG@10 | ΔMRR vs no-hyde | p (Wilcoxon RR) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    pooled: dict[str, list[dict]] = {v: [] for v in variants}
    hyde_logs: dict[str, list] = {v: [] for v in variants}
    for res in results:
        for v in variants:
            if v in res["variants"]:
                pooled[v] += res["variants"][v]["scores"]
                hyde_logs[v] += res["variants"][v]["hyde"]
    base = pooled.get("no-hyde", [])
    for v in variants:
        if not pooled[v]:
            continue
        for bucket in BUCKETS:
            idx = [i for i, s in enumerate(pooled[v]) if bucket == "all" or s.get(by) == bucket]
            rr = [pooled[v][i]["rr"] for i in idx]
            nd = [pooled[v][i]["ndcg"] for i in idx]
            delta, p = "", ""
            if base and v != "no-hyde":
                rb = [base[i]["rr"] for i in idx]
                delta = f"{_mean(rr) - _mean(rb):+.4f}"
                p = f"{wilcoxon(rr, rb).p_value:.3f}"
            lines.append(
                f"| {v} | {bucket} | {len(idx)} | {_mean(rr):.4f} | {_mean(nd):.4f} | {delta} | {p} |"
            )
    lines += ["", "| variant | HyDE used | nothing at initial | rescued by step-down | "
              "nothing at min | stage p50 ms (cold) | LLM p50 ms (cold) | added p50 ms |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for v in variants:
        entries = hyde_logs[v]
        used = [(h, took) for h, took in entries if h and h["used"]]
        if not entries:
            continue
        none_initial = [
            h
            for h, _ in used
            if h["thresholds"]
            and all(t["steps"] > 0 or t["threshold"] is None for t in h["thresholds"])
        ]
        rescued = [
            h for h in none_initial if any(t["threshold"] is not None for t in h["thresholds"])
        ]
        none_at_all = [
            h for h in none_initial if not any(t["threshold"] is not None for t in h["thresholds"])
        ]
        cold = [h for h, _ in used if not any(x["cached"] for x in h["hypotheses"])]
        stage = [h["took_ms"] for h in cold]
        llm = [h["llm_ms"] for h in cold]
        added = []
        if "no-hyde" in hyde_logs and len(hyde_logs["no-hyde"]) == len(entries):
            for (h, took), (_, base_took) in zip(entries, hyde_logs["no-hyde"], strict=True):
                if h and h["used"] and not any(x["cached"] for x in h["hypotheses"]):
                    added.append(took - base_took)
        n = len(used)
        cells = [_share(x, n) for x in (none_initial, rescued, none_at_all)]
        cells += [_median(x) for x in (stage, llm, added)]
        lines.append(f"| {v} | {n} of {len(entries)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pct(xs: Sequence[float], q: float) -> float:
    """The q-quantile (numpy's linear interpolation), or nan for no values."""
    import numpy as np

    return float(np.percentile(xs, q * 100)) if xs else float("nan")


def _llm_calls(res_variant: dict[str, Any]) -> tuple[list[float], list[int], int, int]:
    """The LLM's time per query that called it (HyDE: the cold hypotheses' LLM time;
    listwise: the call's time, not the calls its pace predictor skipped), the indices of
    those queries, how many queries the stage's gate let through, and how many calls'
    answers were used (HyDE: hypotheses written; listwise: a valid permutation)."""
    ms: list[float] = []
    where: list[int] = []
    served = applied = 0
    for i, (h, _) in enumerate(res_variant["hyde"]):
        if h and h["used"]:
            served += 1
            if not any(x["cached"] for x in h["hypotheses"]):
                ms.append(h["llm_ms"])
                where.append(i)
                applied += 1
    for i, lw in enumerate(res_variant.get("llm_rerank", [])):
        served += int(bool(lw.get("gate")))
        call = lw.get("call")
        if call and call["ms"] >= 1.0:  # a skip by the pace predictor takes microseconds
            ms.append(call["ms"])
            where.append(i)
            applied += int(call["applied"])
    return ms, where, served, applied


def compare(results: Sequence[dict[str, Any]], variant: str, base: str) -> str:
    """Markdown: ``variant`` against ``base`` per set intent and pooled (MRR@10, nDCG@10,
    the paired difference, Wilcoxon p, a paired bootstrap 95% CI stratified by set), then
    the LLM stage's latency per query that called it."""
    from llmc.eval.stats import paired_bootstrap_ci

    rows, strata = [], []
    ms: list[float] = []
    added: list[float] = []
    served = applied = 0
    for res in results:
        vs = res["variants"]
        if variant not in vs or base not in vs:
            continue
        pairs = list(zip(vs[variant]["scores"], vs[base]["scores"], strict=True))
        rows += pairs
        strata += [res["set"]] * len(pairs)
        set_ms, where, set_served, set_applied = _llm_calls(vs[variant])
        ms += set_ms
        added += [pairs[i][0]["took_ms"] - pairs[i][1]["took_ms"] for i in where]
        served, applied = served + set_served, applied + set_applied
    lines = [f"| {variant} vs {base} | n | MRR@10 off | on | Δ | p | 95% CI | "
             "nDCG@10 off | on | Δ | p | 95% CI |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for bucket in BUCKETS:
        idx = [i for i, (a, _) in enumerate(rows) if bucket == "all" or a["intent"] == bucket]
        if not idx:
            continue
        cells = [f"| {bucket} | {len(idx)}"]
        for key in ("rr", "ndcg"):
            on = [rows[i][0][key] for i in idx]
            off = [rows[i][1][key] for i in idx]
            ci = paired_bootstrap_ci(on, off, [strata[i] for i in idx])
            cells.append(
                f"{_mean(off):.3f} | {_mean(on):.3f} | {_mean(on) - _mean(off):+.3f} | "
                f"{wilcoxon(on, off).p_value:.2f} | [{ci.low:+.3f}, {ci.high:+.3f}]"
            )
        lines.append(" | ".join(cells) + " |")
    lines += ["", f"{variant}: gate let through {served} of {len(rows)} queries, LLM called "
              f"for {len(ms)}, its answer used for {applied}; LLM ms per call p50 "
              f"{_pct(ms, 0.5):.0f}, p95 {_pct(ms, 0.95):.0f}; whole query, on minus off, "
              f"where it was called: p50 {_pct(added, 0.5):+.0f}, p95 {_pct(added, 0.95):+.0f} ms"]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=None, help="set names (default: all shipped)")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", type=Path, default=None, help="write every number here")
    ap.add_argument("--from-json", type=Path, nargs="*", default=None,
                    help="summarize saved runs instead of running")  # fmt: skip
    ap.add_argument("--compare", nargs="*", default=[], metavar="VARIANT:BASE",
                    help="also print VARIANT against BASE per intent, with CIs and LLM latency")  # fmt: skip
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.from_json:
        results = [r for p in args.from_json for r in json.loads(p.read_text())["results"]]
    else:
        overrides = _parse_sets(args.overrides)
        results = [run_set(n, overrides, args.variants) for n in (args.sets or shipped_sets())]
        if args.json:
            args.json.write_text(json.dumps({"overrides": overrides, "results": results}))
    print(summarize(results, args.variants))
    print()
    print(summarize(results, args.variants, by="route").split("\n\n")[0])
    for pair in args.compare:
        variant, _, base = pair.partition(":")
        print()
        print(compare(results, variant, base or "no-hyde"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
