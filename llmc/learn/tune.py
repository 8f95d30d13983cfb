"""`llmc tune`: learn fusion weights and an intent classifier for one repository.

1. Pool the judged queries (labels, query files, commits mined from git) and split them:
   ``learn.holdout`` of them are held out, never seen while fitting. Mined commits are
   split by time (the newest held out); the rest at random within each intent (seeded).
2. Fusion and route weights (``SPACE``): greedy steepest ascent over a grid of values from
   the current config (at most ``MAX_MOVES`` moves), on the training queries, with the
   real search pipeline. A move must raise mean nDCG@10 by ``MIN_GAIN`` *and* improve
   more queries than it worsens beyond chance (one-sided sign test, ``better``), so a
   couple of queries with large swings cannot carry it. Each text is embedded and each
   (query, passage) pair reranked once (``llmc.learn.memo``); all else runs for real.
3. Intent classifier (``intent_model``): trained on the training queries' intents, gated
   where out of fold it beats the heuristic's route accuracy; then, per intent, kept only
   where models trained without a query raised that query's nDCG@10 over the heuristic
   router (an inner cross-validation, so the check is not in-sample).
4. Held out: untuned, tuned weights alone, and the whole tuned state (read back from disk
   the way search reads it) are run on the held-out queries; paired Wilcoxon tests on
   nDCG@10 and reciprocal rank, exact McNemar on hit@5. ``cross_validate`` does it K
   times so every query is held out once.
5. The tuned state is written to ``.llmc/tuned/`` only if it is not worse on the held-out
   queries than untuned (``force`` writes it anyway); `llmc tune --reset` removes it.
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.errors import LearnError
from llmc.eval.compare import Comparison, compare_scores
from llmc.learn.fit import (
    Evaluated,
    Fitted,
    K,
    Progress,
    Runs,
    Split,
    candidate_config,
    fit,
    fold_of,
    measure,
    prepare,
    route_accuracy,
    split_queries,
    untuned,
)
from llmc.learn.sets import QuerySet
from llmc.learn.weight_search import (
    MAX_MOVES,
    SPACE,
    better,
    search_weights,
    sign_p,
    space_for,
)


@dataclass
class TuneReport:
    root: Path
    sources: dict[str, int]
    n_train: int
    n_test: int
    before: dict[str, Any]
    after: dict[str, Any]
    evaluations: int
    train: dict[str, Evaluated] = field(default_factory=dict)
    heldout: dict[str, Evaluated] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    intent: dict[str, Any] = field(default_factory=dict)
    saved: bool = False
    why_not_saved: str = ""
    path: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    folds: int = 0  # > 0: a cross-validation (held-out = every query, once)
    fold_params: list[dict[str, Any]] = field(default_factory=list)
    finetune: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "repo": str(self.root),
            "sources": self.sources,
            "train_queries": self.n_train,
            "heldout_queries": self.n_test,
            "params": {"before": self.before, "after": self.after},
            "evaluations": self.evaluations,
            "train": {k: v.to_json() for k, v in self.train.items()},
            "heldout": {k: v.to_json() for k, v in self.heldout.items()},
            "comparisons": [c.to_json() for c in self.comparisons],
            "intent": self.intent,
            "saved": self.saved,
            "why_not_saved": self.why_not_saved,
            "path": self.path,
            "seconds": round(self.seconds, 1),
            "notes": self.notes,
        }
        if self.finetune:
            out["finetune"] = self.finetune
        if self.folds:
            out["folds"] = self.folds
            out["fold_params"] = self.fold_params
        return out


def _comparisons(heldout: dict[str, Evaluated]) -> list[Comparison]:
    base = heldout["untuned"].scores
    return [
        compare_scores("untuned", base, name, heldout[name].scores)
        for name in ("tuned weights", "tuned")
    ]


def tune(
    root: Path,
    cfg: Config,
    qs: QuerySet,
    *,
    index: bool = True,
    save: bool = True,
    force: bool = False,
    intent: bool = True,
    progress: Any = None,
    finetune: bool = False,
    finetune_steps: int = 150,
) -> TuneReport:
    """Fit, measure on held-out queries, and write ``.llmc/tuned/`` (module docstring);
    ``finetune`` also fine-tunes the reranker (llmc.learn.finetune)."""
    from llmc.learn.tuned import tuned_path, write_tuned

    started = time.perf_counter()
    root = Path(root).resolve()
    defined = prepare(root, cfg, qs, index, progress or Progress())
    run = Runs(root, frozenset(qs.ignore))
    split = split_queries(qs, cfg.learn.holdout, cfg.learn.seed)
    if len(split.train) < 2 or len(split.test) < 2:
        raise LearnError("too few queries to hold some out (lower learn.holdout?)")
    final_dir = tuned_path(root, cfg.learn.tuned_dir)
    stage = final_dir.with_name(f".{final_dir.name}.candidate")
    ft_dir = final_dir.with_name(f".{final_dir.name}.reranker")
    ft: dict[str, Any] = {}
    try:
        fitted = fit(run, cfg, split.train, defined, stage, intent=intent, progress=progress)
        heldout = measure(run, cfg, fitted, split.test, stage)
        if finetune:
            ft = _finetune(run, cfg, fitted, split, stage, ft_dir, finetune_steps)
            heldout.update(ft.pop("heldout"))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    report = TuneReport(
        root, qs.counts(), len(split.train), len(split.test), fitted.start, fitted.best,
        fitted.evaluations, train=fitted.train, heldout=heldout, intent=fitted.intent,
        notes=list(qs.notes),
    )  # fmt: skip
    report.comparisons = _comparisons(heldout)
    report.finetune = ft
    if intent:
        report.intent.update(route_accuracy(fitted.model, split.test, defined))
    untuned_ev, tuned_ev = heldout["untuned"], heldout["tuned"]
    params = dict(fitted.changed)
    attachments = {}
    if ft.get("kept"):
        from llmc.learn.finetune import RERANKER_DIR
        from llmc.learn.tuned import IN_DIR

        params["rerank.model"] = IN_DIR + RERANKER_DIR
        attachments[RERANKER_DIR] = ft_dir
    if not params and fitted.model is None:
        report.why_not_saved = "nothing learned beats the current settings"
    elif tuned_ev.ndcg < untuned_ev.ndcg and not force:
        report.why_not_saved = (
            f"held out, tuned nDCG@10 {tuned_ev.ndcg:.4f} < untuned {untuned_ev.ndcg:.4f} "
            "(--force saves it anyway)"
        )
    elif not save:
        report.why_not_saved = "--no-save"
    if not report.why_not_saved:
        data = {
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "params": params,
            "sources": report.sources,
            "train_queries": report.n_train,
            "heldout_queries": report.n_test,
            "heldout": {k: v.to_json() for k, v in heldout.items()},
            "comparisons": [c.to_json() for c in report.comparisons],
            "intent": report.intent,
        }
        if ft:
            data["finetune"] = ft
        write_tuned(final_dir, data, fitted.model, attachments)
        report.saved = True
        report.path = str(final_dir)
    shutil.rmtree(ft_dir, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _finetune(
    run: Runs, cfg: Config, fitted: Fitted, split: Split, stage: Path, out: Path, steps: int
) -> dict[str, Any]:
    """Fine-tune the reranker on training pairs; rerank the held-out queries with the
    shipped and the fine-tuned model on top of the tuned state; keep the better."""
    from llmc.learn.finetune import RERANKER_DIR, finetune_reranker, repo_groups
    from llmc.learn.tuned import IN_DIR, write_tuned

    groups, counts = repo_groups(run.root, cfg, split.train, cfg.learn.seed, ignore=run.ignore)
    stats = finetune_reranker(groups, out, steps, cfg.learn.seed, device=cfg.rerank.device)
    rerank_on = copy.deepcopy(cfg)
    rerank_on.search.rerank = True
    write_tuned(stage, {"params": fitted.changed}, fitted.model)
    shipped = Evaluated(run(candidate_config(rerank_on, stage), split.test))
    params = {**fitted.changed, "rerank.model": IN_DIR + RERANKER_DIR}
    write_tuned(stage, {"params": params}, fitted.model, {RERANKER_DIR: out})
    tuned = Evaluated(run(candidate_config(rerank_on, stage), split.test))
    return {
        **stats,
        "pairs": counts,
        "kept": tuned.ndcg > shipped.ndcg,
        "heldout": {"rerank shipped": shipped, "rerank fine-tuned": tuned},
    }


def cross_validate(
    root: Path,
    cfg: Config,
    qs: QuerySet,
    folds: int = 5,
    *,
    index: bool = True,
    intent: bool = True,
    progress: Any = None,
) -> TuneReport:
    """K-fold: fit on K-1 folds, measure on the last; every query is held out once, so the
    paired tests run over all of them. Measures only: nothing is written."""
    from llmc.learn.tuned import tuned_path

    if folds < 2:
        raise LearnError(f"--cv needs at least 2 folds, got {folds}")
    started = time.perf_counter()
    root = Path(root).resolve()
    defined = prepare(root, cfg, qs, index, progress or Progress())
    run = Runs(root, frozenset(qs.ignore))
    assign = fold_of(qs, folds, cfg.learn.seed)
    stage = tuned_path(root, cfg.learn.tuned_dir).with_name(".tuned.cv")
    pooled: dict[str, list] = {"untuned": [], "tuned weights": [], "tuned": []}
    order: list[Any] = []
    fold_params: list[dict[str, Any]] = []
    evaluations = 0
    intents: list[dict[str, Any]] = []
    try:
        for f in range(folds):
            train = [q for q, a in zip(qs.queries, assign, strict=True) if a != f]
            test = [q for q, a in zip(qs.queries, assign, strict=True) if a == f]
            if not test or len(train) < 2:
                continue
            fitted = fit(run, cfg, train, defined, stage, intent=intent, progress=progress)
            measured = measure(run, cfg, fitted, test, stage)
            for name in pooled:
                pooled[name] += measured[name].scores
            order += test
            evaluations += fitted.evaluations
            fold_params.append(
                {
                    "params": fitted.changed,
                    "intent_model": fitted.model is not None,
                    "allowed": list(fitted.model.allowed) if fitted.model else [],
                }
            )
            if intent:
                intents.append(route_accuracy(fitted.model, test, defined) | {"n": len(test)})
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    heldout = {name: Evaluated(scores) for name, scores in pooled.items()}
    report = TuneReport(
        root, qs.counts(), len(qs.queries) - len(qs.queries) // folds, len(order), {}, {},
        evaluations, heldout=heldout, notes=list(qs.notes), folds=folds,
        fold_params=fold_params, why_not_saved="cross-validation measures only",
    )  # fmt: skip
    report.comparisons = _comparisons(heldout)
    if intents:
        n = sum(i["n"] for i in intents)
        report.intent = {
            k: sum(i[k] * i["n"] for i in intents) / n
            for k in ("heldout_heuristic_acc", "heldout_combined_acc")
        }
    report.seconds = time.perf_counter() - started
    return report


@dataclass(frozen=True)
class Estimate:
    queries: int
    train: int
    heldout: int
    searches: int
    seconds_per_search: float
    seconds_first_search: float
    index_stale: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def estimate(root: Path, cfg: Config, qs: QuerySet, sample: int = 4) -> Estimate:
    """`llmc tune --dry-run`: how long tuning would take (times a few real searches)."""
    from llmc.index.status import index_status
    from llmc.learn.memo import MemoModels
    from llmc.search import Searcher

    root = Path(root).resolve()
    if len(qs.queries) < cfg.learn.min_queries:
        raise LearnError(
            f"{len(qs.queries)} judged queries; tuning needs at least {cfg.learn.min_queries}"
        )
    split = split_queries(qs, cfg.learn.holdout, cfg.learn.seed)
    base = untuned(cfg)
    evals = (MAX_MOVES + 1) * sum(len(v) for v in space_for(base).values())
    n_train, n_test = len(split.train), len(split.test)
    # fit: untuned + evals + tuned + intent check on train; measure: 3 runs of held-out
    cached_searches = (evals + 2) * n_train + 3 * n_test
    stale = not index_status(root, cfg).fresh
    texts = [q.query for q in qs.queries[:sample]]
    with Searcher(root, base) as searcher:
        searcher.sources.models = MemoModels()  # as tuning runs them
        searcher.warm()
        t0 = time.perf_counter()
        for t in texts:
            searcher.search(t, k=K)
        first = (time.perf_counter() - t0) / max(1, len(texts))
        t0 = time.perf_counter()
        for t in texts:
            searcher.search(t, k=K)
        again = (time.perf_counter() - t0) / max(1, len(texts))
    intent_s = 15.0  # scikit-learn import, 6 strengths x 5 folds
    seconds = (n_train + n_test) * first + cached_searches * again + intent_s
    return Estimate(
        queries=len(qs.queries), train=n_train, heldout=n_test,
        searches=cached_searches + n_train + n_test, seconds_per_search=again,
        seconds_first_search=first, index_stale=stale, seconds=math.ceil(seconds),
    )  # fmt: skip


__all__ = [
    "SPACE",
    "Estimate",
    "Fitted",
    "TuneReport",
    "better",
    "cross_validate",
    "estimate",
    "fit",
    "measure",
    "search_weights",
    "sign_p",
    "split_queries",
    "tune",
]
