"""The steps of `llmc tune` (``llmc.learn.tune``): split the judged queries, run them under
a config, fit weights and the intent model on training queries, measure held out.

Every search runs through ``Runs``: the real pipeline on the repository, with the
embedder and reranker behind memos (``llmc.learn.memo``) so each input is computed once
however many weightings are tried.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.errors import LearnError
from llmc.eval.metrics import QueryScores
from llmc.learn.memo import MemoModels
from llmc.learn.sets import QuerySet
from llmc.learn.weight_search import MAX_MOVES, better, search_weights, space_for
from llmc.search.sources import Models

log = logging.getLogger(__name__)

K = 10
SOURCE = "tune"  # what a tuned value's source says in ``llmc config``


@dataclass(frozen=True)
class Split:
    train: list
    test: list


def split_queries(qs: QuerySet, holdout: float, seed: int = 0) -> Split:
    """Hold out ``holdout`` of the queries: the newest mined commits, else stratified."""
    from llmc.learn.judgments import query_key

    if not 0.0 < holdout < 1.0:
        raise LearnError(f"learn.holdout must be between 0 and 1, got {holdout}")
    rng = random.Random(seed)
    train: list = []
    test: list = []
    mined = [q for q in qs.queries if query_key(q.query) in qs.times]
    mined.sort(key=lambda q: qs.times[query_key(q.query)])  # oldest first
    n_test = round(len(mined) * holdout)
    train += mined[: len(mined) - n_test]
    test += mined[len(mined) - n_test :]
    rest = [q for q in qs.queries if query_key(q.query) not in qs.times]
    for intent in sorted({q.intent for q in rest}):
        group = [q for q in rest if q.intent == intent]
        rng.shuffle(group)
        n_test = round(len(group) * holdout)
        test += group[:n_test]
        train += group[n_test:]
    return Split(train, test)


@dataclass
class Runs:
    """Runs judged queries on one repository under any config (results in ``ignore``, the
    query files inside the repo, dropped first); ``models`` are shared by every run."""

    root: Path
    ignore: frozenset[str] = frozenset()
    models: Models = field(default_factory=MemoModels)

    def __call__(self, cfg: Config, queries: Sequence[Any]) -> list[QueryScores]:
        """Per-query scores of ``queries`` under ``cfg``."""
        from llmc.eval.runner import run_variant
        from llmc.search import Searcher

        with Searcher(self.root, cfg) as searcher:
            searcher.sources.models = self.models
            return run_variant(
                "tune", searcher, queries, K, warmup=0, ignore_paths=self.ignore
            ).scores


def with_params(cfg: Config, params: dict[str, Any]) -> Config:
    """``cfg`` with tuned ``params`` set."""
    return cfg.with_values(params, SOURCE)


def untuned(cfg: Config) -> Config:
    """``cfg`` with the tuned overlay off: what search does without `llmc tune`."""
    out = copy.deepcopy(cfg)
    out.learn.use_tuned = False
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


@dataclass
class Evaluated:
    """Mean metrics of one config on one query list, with the per-query scores."""

    scores: list

    @property
    def ndcg(self) -> float:
        return _mean([s.ndcg for s in self.scores])

    @property
    def mrr(self) -> float:
        return _mean([s.rr for s in self.scores])

    @property
    def hit5(self) -> float:
        return _mean([float(s.hit_5) for s in self.scores])

    def to_json(self) -> dict[str, Any]:
        return {
            "n": len(self.scores),
            "ndcg@10": round(self.ndcg, 4),
            "mrr@10": round(self.mrr, 4),
            "hit@5": round(self.hit5, 4),
        }


def defined_symbols(root: Path, cfg: Config, queries: Sequence[str]) -> list[tuple[str, ...]]:
    """The code-shaped names each query mentions that the index defines (as search's
    exact-symbol stage finds them), for the intent model's features."""
    from llmc.paths import db_path
    from llmc.search.exact import defined_names
    from llmc.store.db import Store

    store = Store(db_path(root), readonly=True)
    try:
        return [defined_names(store, q, cfg.search.exact_max) for q in queries]
    finally:
        store.close()


class Progress:
    """What `tune` reports while it runs (the CLI draws it; tests pass nothing)."""

    def phase(self, name: str, total: int | None) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def note(self, message: str) -> None: ...


def prepare(root: Path, cfg: Config, qs: QuerySet, index: bool, progress: Any) -> dict:
    """Index, anchor symbol judgments; the defined symbols of every query (query key →)."""
    from llmc.eval.runner import anchor_symbols, ensure_index
    from llmc.learn.judgments import query_key

    if len(qs.queries) < cfg.learn.min_queries:
        raise LearnError(
            f"{len(qs.queries)} judged queries; tuning needs at least {cfg.learn.min_queries} "
            "(label more with `llmc label`, add --from-git, or lower learn.min_queries)"
        )
    if index:
        ensure_index(root, cfg, progress)
    anchored, problems = anchor_symbols(qs.queries, root)
    for p in problems:
        log.info("%s", p)
    qs.queries = anchored
    texts = [q.query for q in qs.queries]
    return dict(zip(map(query_key, texts), defined_symbols(root, cfg, texts), strict=True))


@dataclass
class Fitted:
    """What one fit learned: weights (``best`` against ``start``) and the intent model."""

    start: dict[str, Any]
    best: dict[str, Any]
    evaluations: int
    model: Any = None
    intent: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Evaluated] = field(default_factory=dict)

    @property
    def changed(self) -> dict[str, Any]:
        return {k: v for k, v in self.best.items() if v != self.start[k]}


def candidate_config(cfg: Config, stage: Path) -> Config:
    """``cfg`` reading the tuned state staged at ``stage`` (as search would)."""
    out = copy.deepcopy(cfg)
    out.learn.use_tuned = True
    out.learn.tuned_dir = str(stage)
    return out


def fit(
    run: Runs,
    cfg: Config,
    train: Sequence[Any],
    defined: dict[str, tuple[str, ...]],
    stage: Path,
    *,
    intent: bool = True,
    progress: Any = None,
) -> Fitted:
    """Weights by coordinate ascent, then the intent model, on ``train`` only."""

    progress = progress or Progress()
    base = untuned(cfg)
    space = space_for(base)
    start = {k: base.get(k) for k in space}
    untuned_train = Evaluated(run(base, train))
    progress.phase("tune weights", (MAX_MOVES + 1) * sum(len(v) for v in space.values()))
    best, _, evals = search_weights(
        lambda p: [s.ndcg for s in run(with_params(base, p), train)],
        start,
        space,
        on_eval=lambda: progress.advance(1),
    )
    fitted = Fitted(start, best, evals)
    fitted.train["untuned"] = untuned_train
    fitted.train["tuned weights"] = Evaluated(run(with_params(base, best), train))
    if not intent:
        return fitted
    progress.phase("intent model", None)
    model, fitted.intent = _fit_intent(train, defined, cfg.learn.seed)
    if model is not None:
        pairs = _oof_retrieval(run, cfg, train, defined, fitted, stage)
        model = _restrict(model, pairs, fitted)
    fitted.model = model
    return fitted


def _oof_retrieval(
    run: Runs,
    cfg: Config,
    train: Sequence[Any],
    defined: dict,
    fitted: Fitted,
    stage: Path,
) -> dict[str, tuple[list[float], list[float]]]:
    """Per intent, the nDCG@10 of training queries where an intent model trained *without
    them* decided, next to the heuristic router's (both with the tuned weights)."""
    from llmc.learn.judgments import query_key
    from llmc.learn.tuned import write_tuned

    heuristic = {
        query_key(q.query): s.ndcg
        for q, s in zip(train, fitted.train["tuned weights"].scores, strict=True)
    }
    qs = QuerySet()
    qs.add(train, "train")
    folds = max(2, min(5, min(Counter(q.intent for q in train).values())))
    assign = fold_of(qs, folds, cfg.learn.seed)
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for f in range(folds):
        inner = [q for q, a in zip(qs.queries, assign, strict=True) if a != f]
        held = [q for q, a in zip(qs.queries, assign, strict=True) if a == f]
        model, _ = _fit_intent(inner, defined, cfg.learn.seed)
        if model is None or not held:
            continue
        decided = [(q, model.used(q.query, defined[query_key(q.query)])) for q in held]
        decided = [(q, used) for q, used in decided if used is not None]
        if not decided:
            continue
        write_tuned(stage, {"params": fitted.changed}, model)
        scores = run(candidate_config(cfg, stage), [q for q, _ in decided])
        for (q, used), sc in zip(decided, scores, strict=True):
            new, old = pairs.setdefault(used, ([], []))
            new.append(sc.ndcg)
            old.append(heuristic[query_key(q.query)])
    return pairs


def _fit_intent(train: Sequence[Any], defined: dict, seed: int) -> tuple[Any, dict]:
    from llmc.learn.intent_model import train_intent
    from llmc.learn.judgments import query_key

    fit_ = train_intent(
        [q.query for q in train],
        [defined[query_key(q.query)] for q in train],
        [q.intent for q in train],
        seed,
    )
    return fit_.model, dict(fit_.report)


def _restrict(model: Any, pairs: dict[str, tuple[list[float], list[float]]], fitted: Fitted) -> Any:
    """Keep the intents where out-of-fold decisions beat the heuristic's on nDCG@10."""
    allowed = tuple(c for c in model.classes if c in pairs and better(*pairs[c], 1e-9))
    fitted.intent["train_ndcg_gain_by_intent"] = {
        c: round(sum(new) - sum(old), 4) for c, (new, old) in pairs.items()
    }
    fitted.intent["train_decided_by_intent"] = {c: len(new) for c, (new, _) in pairs.items()}
    fitted.intent["allowed"] = list(allowed)
    if not allowed:
        fitted.intent["kept"] = False
        fitted.intent["why"] = (
            "out of fold, its decisions do not raise nDCG@10 over the heuristic's"
        )
        return None
    return dataclasses.replace(model, allowed=allowed)


def measure(
    run: Runs,
    cfg: Config,
    fitted: Fitted,
    queries: Sequence[Any],
    stage: Path,
) -> dict[str, Evaluated]:
    """Untuned, tuned weights alone, and the tuned state as search reads it from disk."""
    from llmc.learn.tuned import write_tuned

    base = untuned(cfg)
    out = {
        "untuned": Evaluated(run(base, queries)),
        "tuned weights": Evaluated(run(with_params(base, fitted.best), queries)),
    }
    write_tuned(stage, {"params": fitted.changed}, fitted.model)
    out["tuned"] = Evaluated(run(candidate_config(cfg, stage), queries))
    return out


def route_accuracy(model: Any, queries: Sequence[Any], defined: dict) -> dict[str, float]:
    from llmc.learn.intent_model import heuristic_intent
    from llmc.learn.judgments import query_key

    heur, used = [], []
    for q in queries:
        d = defined[query_key(q.query)]
        h = heuristic_intent(q.query, d)
        heur.append(h == q.intent)
        decided = model.used(q.query, d) if model is not None else None
        used.append((decided or h) == q.intent)
    return {"heldout_heuristic_acc": _mean(heur), "heldout_combined_acc": _mean(used)}


def fold_of(qs: QuerySet, folds: int, seed: int = 0) -> list[int]:
    """A fold number per query: shuffled within each intent, then dealt round-robin."""
    rng = random.Random(seed)
    out = [0] * len(qs.queries)
    turn = 0
    for intent in sorted({q.intent for q in qs.queries}):
        idx = [i for i, q in enumerate(qs.queries) if q.intent == intent]
        rng.shuffle(idx)
        for i in idx:
            out[i] = turn % folds
            turn += 1
    return out


__all__ = [
    "K",
    "Evaluated",
    "Fitted",
    "Progress",
    "Runs",
    "Split",
    "candidate_config",
    "defined_symbols",
    "fit",
    "fold_of",
    "measure",
    "prepare",
    "route_accuracy",
    "split_queries",
    "untuned",
    "with_params",
]
