"""`llmc tune`: learn fusion weights and an intent classifier for one repository.

1. Pool the judged queries (labels, query files, commits mined from git) and split them:
   ``learn.holdout`` of them are held out, never seen while fitting. Mined commits are
   split by time (the newest held out); the rest at random within each intent (seeded).
2. Fusion and route weights (``SPACE``): greedy steepest ascent over a grid of values from
   the current config (at most ``MAX_MOVES`` moves), on the training queries, with the
   real search pipeline. A move must raise mean nDCG@10 by ``MIN_GAIN`` *and* improve
   more queries than it worsens beyond chance (one-sided sign test, ``better``), so a
   couple of queries with large swings cannot carry it. Each text is embedded and each
   (query, passage) pair reranked once (``memo_embeddings``); all else runs for real.
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

import contextlib
import copy
import logging
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.errors import LearnError
from llmc.learn.sets import QuerySet

log = logging.getLogger(__name__)

# key → candidate values. The search starts from the configured value (added when absent).
SPACE: dict[str, tuple[Any, ...]] = {
    "search.bm25_weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.dense_weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.exact_weight": (0.0, 0.25, 0.5, 1.0, 2.0),
    "search.rrf_k": (5, 10, 20, 40, 60, 100),
    "search.min_route_weight": (0.1, 0.25, 0.5, 0.75, 1.0),
    "search.route_drop_confidence": (0.6, 0.7, 0.8, 0.9, 1.01),
    "search.test_weight": (0.1, 0.25, 0.5, 0.75, 1.0),
    "hyde.weight": (0.5, 0.75, 1.0, 1.5, 2.0),
    "search.fusion": ("rrf", "weighted"),
    "search.rerank": (False, True),  # the cross-encoder stage, blended with the fused score
    "rerank.blend_weight": (0.3, 0.5, 0.7),
}
MIN_GAIN = 0.002  # mean nDCG@10 a change must add on the training queries
MAX_SIGN_P = 0.05  # ... and it improves more queries than it worsens, beyond chance
MAX_MOVES = 4  # changed keys at most (a key may move twice)
K = 10


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


@contextlib.contextmanager
def memo_embeddings() -> Iterator[dict]:
    """While tuning, run each model once per input: a query's embedding (and HyDE's
    hypotheses') and the reranker's score of a (query, passage) pair are the same under
    every candidate weighting. Patches the sentence-transformers embedder and the
    cross-encoder reranker classes in this process only, and restores them."""
    from llmc.models.embedder import SentenceTransformerEmbedder as embedder_cls
    from llmc.models.reranker import CrossEncoderReranker as reranker_cls

    originals = {
        (embedder_cls, "embed_queries"): embedder_cls.embed_queries,
        (embedder_cls, "embed_passages"): embedder_cls.embed_passages,
        (reranker_cls, "score"): reranker_cls.score,
    }
    cache: dict[tuple, Any] = {}

    def embed(name: str, original: Callable) -> Callable:
        def cached(self: Any, texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
            if args or kwargs:  # progress callbacks: indexing, not a query
                return original(self, texts, *args, **kwargs)
            key = (name, str(getattr(self, "model_id", id(self))), tuple(texts))
            if key not in cache:
                cache[key] = original(self, texts)
            return cache[key].copy()

        return cached

    def score(original: Callable) -> Callable:
        def cached(self: Any, query: str, texts: list[str]) -> list[float]:
            model = str(getattr(self, "model_id", id(self)))
            missing = list(dict.fromkeys(t for t in texts if ("rr", model, query, t) not in cache))
            if missing:
                for t, v in zip(missing, original(self, query, missing), strict=True):
                    cache[("rr", model, query, t)] = v
            return [cache[("rr", model, query, t)] for t in texts]

        return cached

    for (cls, name), fn in originals.items():
        setattr(cls, name, score(fn) if name == "score" else embed(name, fn))
    try:
        yield cache
    finally:
        for (cls, name), fn in originals.items():
            setattr(cls, name, fn)


def _get(cfg: Any, key: str) -> Any:
    section, _, name = key.partition(".")
    return getattr(getattr(cfg, section), name)


def _has(cfg: Any, key: str) -> bool:
    section, _, name = key.partition(".")
    return hasattr(getattr(cfg, section, None), name)


def with_params(cfg: Any, params: dict[str, Any]) -> Any:
    out = copy.deepcopy(cfg)
    for key, value in params.items():
        section, _, name = key.partition(".")
        setattr(getattr(out, section), name, value)
        out.sources[key] = "tune"
    return out


def untuned(cfg: Any) -> Any:
    """``cfg`` with the tuned overlay off: what search does without `llmc tune`."""
    out = copy.deepcopy(cfg)
    out.learn.use_tuned = False
    return out


def run_queries(
    root: Path, cfg: Any, queries: Sequence[Any], ignore: frozenset[str] = frozenset()
) -> list:
    """Per-query scores (llmc.eval.metrics.QueryScores) of ``queries`` under ``cfg``;
    results in ``ignore`` (query files inside the repo) are dropped first."""
    from llmc.eval.runner import run_variant
    from llmc.search import Searcher

    with Searcher(root, cfg) as searcher:
        return run_variant("tune", searcher, queries, K, warmup=0, ignore_paths=ignore).scores


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


def sign_p(wins: int, losses: int) -> float:
    """One-sided sign test: P(at least ``wins`` of ``wins + losses`` fair coin flips)."""
    from llmc.eval.stats import sign_test_p

    return sign_test_p(wins, losses)


def better(new: Sequence[float], old: Sequence[float], min_gain: float = MIN_GAIN) -> bool:
    """A move worth taking: a mean per-query gain of at least ``min_gain``, *and* more
    queries improved than worsened beyond chance (one-sided sign test, p <= ``MAX_SIGN_P``).
    Picking the best of ~40 candidates on a few dozen queries otherwise mostly fits noise:
    a gain carried by two or three queries with large swings is not taken."""
    deltas = [a - b for a, b in zip(new, old, strict=True)]
    wins = sum(d > 1e-9 for d in deltas)
    losses = sum(d < -1e-9 for d in deltas)
    return _mean(deltas) >= min_gain and sign_p(wins, losses) <= MAX_SIGN_P


def search_weights(
    score: Callable[[dict[str, Any]], Sequence[float]],
    start: dict[str, Any],
    space: dict[str, tuple[Any, ...]],
    max_moves: int = MAX_MOVES,
    min_gain: float = MIN_GAIN,
    on_eval: Callable[[], None] | None = None,
) -> tuple[dict[str, Any], float, int]:
    """Greedy steepest ascent from ``start``: (best params, their mean score, evaluations).

    ``score(params)`` gives one score per training query. Each round tries every other
    value of every key against the current setting and takes the single move with the
    best mean among those that are ``better``; it stops when none is, or after
    ``max_moves`` moves (few changes, each clearly earned: less to overfit). Ties go to
    the key listed first. Pure over ``score``."""
    memo: dict[tuple, list[float]] = {}

    def evaluate(params: dict[str, Any]) -> list[float]:
        key = tuple(sorted(params.items()))
        if key not in memo:
            memo[key] = list(score(params))
            if on_eval is not None:
                on_eval()
        return memo[key]

    best = dict(start)
    current = evaluate(best)
    for _ in range(max_moves):
        moves = []
        for key, values in space.items():
            for v in dict.fromkeys((*values, start[key])):
                if v == best[key]:
                    continue
                sc = evaluate({**best, key: v})
                if better(sc, current, min_gain):
                    moves.append((_mean(sc), -len(moves), key, v, sc))
        if not moves:
            break
        _, _, key, value, current = max(moves)
        best = {**best, key: value}
    return best, _mean(current), len(memo)


def defined_symbols(root: Path, cfg: Any, queries: Sequence[str]) -> list[tuple[str, ...]]:
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


@dataclass
class Comparison:
    a: str
    b: str
    delta_ndcg: float
    p_ndcg: float
    p_rr: float
    p_hit5: float
    n: int

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def compare(a: Evaluated, b: Evaluated, name_a: str, name_b: str) -> Comparison:
    from llmc.eval.stats import mcnemar, wilcoxon

    return Comparison(
        a=name_a,
        b=name_b,
        delta_ndcg=b.ndcg - a.ndcg,
        p_ndcg=wilcoxon([s.ndcg for s in b.scores], [s.ndcg for s in a.scores]).p_value,
        p_rr=wilcoxon([s.rr for s in b.scores], [s.rr for s in a.scores]).p_value,
        p_hit5=mcnemar([s.hit_5 for s in b.scores], [s.hit_5 for s in a.scores]).p_value,
        n=len(a.scores),
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


class Progress:
    """What `tune` reports while it runs (the CLI draws it; tests pass nothing)."""

    def phase(self, name: str, total: int | None) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def note(self, message: str) -> None: ...


def _prepare(root: Path, cfg: Any, qs: QuerySet, index: bool, progress: Any) -> dict:
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


def space_for(cfg: Any) -> dict[str, tuple[Any, ...]]:
    """The search space, without keys this build lacks, the user pinned in config, or
    whose stage is switched off (``hyde.*`` without ``search.hyde``)."""
    off = {"hyde"} if not getattr(cfg.search, "hyde", False) else set()
    return {
        k: v
        for k, v in SPACE.items()
        if _has(cfg, k) and k not in cfg.sources and k.split(".", 1)[0] not in off
    }


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


def _candidate(cfg: Any, stage: Path) -> Any:
    out = copy.deepcopy(cfg)
    out.learn.use_tuned = True
    out.learn.tuned_dir = str(stage)
    return out


def fit(
    root: Path,
    cfg: Any,
    train: Sequence[Any],
    defined: dict[str, tuple[str, ...]],
    stage: Path,
    *,
    intent: bool = True,
    progress: Any = None,
    ignore: frozenset[str] = frozenset(),
) -> Fitted:
    """Weights by coordinate ascent, then the intent model, on ``train`` only."""

    progress = progress or Progress()
    base = untuned(cfg)
    space = space_for(base)
    start = {k: _get(base, k) for k in space}
    untuned_train = Evaluated(run_queries(root, base, train, ignore))
    progress.phase("tune weights", (MAX_MOVES + 1) * sum(len(v) for v in space.values()))
    best, _, evals = search_weights(
        lambda p: [s.ndcg for s in run_queries(root, with_params(base, p), train, ignore)],
        start,
        space,
        on_eval=lambda: progress.advance(1),
    )
    fitted = Fitted(start, best, evals)
    fitted.train["untuned"] = untuned_train
    fitted.train["tuned weights"] = Evaluated(
        run_queries(root, with_params(base, best), train, ignore)
    )
    if not intent:
        return fitted
    progress.phase("intent model", None)
    model, fitted.intent = _fit_intent(train, defined, cfg.learn.seed)
    if model is not None:
        pairs = _oof_retrieval(root, cfg, train, defined, fitted, stage, ignore)
        model = _restrict(model, pairs, fitted)
    fitted.model = model
    return fitted


def _oof_retrieval(
    root: Path,
    cfg: Any,
    train: Sequence[Any],
    defined: dict,
    fitted: Fitted,
    stage: Path,
    ignore: frozenset[str],
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
        scores = run_queries(root, _candidate(cfg, stage), [q for q, _ in decided], ignore)
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
    import dataclasses

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
    root: Path,
    cfg: Any,
    fitted: Fitted,
    queries: Sequence[Any],
    stage: Path,
    ignore: frozenset[str] = frozenset(),
) -> dict[str, Evaluated]:
    """Untuned, tuned weights alone, and the tuned state as search reads it from disk."""
    from llmc.learn.tuned import write_tuned

    base = untuned(cfg)
    out = {
        "untuned": Evaluated(run_queries(root, base, queries, ignore)),
        "tuned weights": Evaluated(
            run_queries(root, with_params(base, fitted.best), queries, ignore)
        ),
    }
    write_tuned(stage, {"params": fitted.changed}, fitted.model)
    out["tuned"] = Evaluated(run_queries(root, _candidate(cfg, stage), queries, ignore))
    return out


def _route_accuracy(model: Any, queries: Sequence[Any], defined: dict) -> dict[str, float]:
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


def _comparisons(heldout: dict[str, Evaluated]) -> list[Comparison]:
    base = heldout["untuned"]
    return [compare(base, heldout[n], "untuned", n) for n in ("tuned weights", "tuned")]


def tune(
    root: Path,
    cfg: Any,
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
    defined = _prepare(root, cfg, qs, index, progress or Progress())
    ignore = frozenset(qs.ignore)
    split = split_queries(qs, cfg.learn.holdout, cfg.learn.seed)
    if len(split.train) < 2 or len(split.test) < 2:
        raise LearnError("too few queries to hold some out (lower learn.holdout?)")
    final_dir = tuned_path(root, cfg.learn.tuned_dir)
    stage = final_dir.with_name(f".{final_dir.name}.candidate")
    ft_dir = final_dir.with_name(f".{final_dir.name}.reranker")
    ft: dict[str, Any] = {}
    try:
        with memo_embeddings():
            fitted = fit(
                root, cfg, split.train, defined, stage, intent=intent, progress=progress,
                ignore=ignore,
            )  # fmt: skip
            heldout = measure(root, cfg, fitted, split.test, stage, ignore)
            if finetune:
                ft = _finetune(root, cfg, fitted, split, stage, ft_dir, ignore, finetune_steps)
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
        report.intent.update(_route_accuracy(fitted.model, split.test, defined))
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
    root: Path,
    cfg: Any,
    fitted: Fitted,
    split: Split,
    stage: Path,
    out: Path,
    ignore: frozenset[str],
    steps: int,
) -> dict[str, Any]:
    """Fine-tune the reranker on training pairs; rerank the held-out queries with the
    shipped and the fine-tuned model on top of the tuned state; keep the better."""
    from llmc.learn.finetune import RERANKER_DIR, finetune_reranker, repo_groups
    from llmc.learn.tuned import IN_DIR, write_tuned

    groups, counts = repo_groups(root, cfg, split.train, cfg.learn.seed, ignore=ignore)
    stats = finetune_reranker(groups, out, steps, cfg.learn.seed, device=cfg.rerank.device)
    rerank_on = copy.deepcopy(cfg)
    rerank_on.search.rerank = True
    write_tuned(stage, {"params": fitted.changed}, fitted.model)
    shipped = Evaluated(run_queries(root, _candidate(rerank_on, stage), split.test, ignore))
    params = {**fitted.changed, "rerank.model": IN_DIR + RERANKER_DIR}
    write_tuned(stage, {"params": params}, fitted.model, {RERANKER_DIR: out})
    tuned = Evaluated(run_queries(root, _candidate(rerank_on, stage), split.test, ignore))
    return {
        **stats,
        "pairs": counts,
        "kept": tuned.ndcg > shipped.ndcg,
        "heldout": {"rerank shipped": shipped, "rerank fine-tuned": tuned},
    }


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


def cross_validate(
    root: Path,
    cfg: Any,
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
    defined = _prepare(root, cfg, qs, index, progress or Progress())
    ignore = frozenset(qs.ignore)
    assign = fold_of(qs, folds, cfg.learn.seed)
    stage = tuned_path(root, cfg.learn.tuned_dir).with_name(".tuned.cv")
    pooled: dict[str, list] = {"untuned": [], "tuned weights": [], "tuned": []}
    order: list[Any] = []
    fold_params: list[dict[str, Any]] = []
    evaluations = 0
    intents: list[dict[str, Any]] = []
    try:
        with memo_embeddings():
            for f in range(folds):
                train = [q for q, a in zip(qs.queries, assign, strict=True) if a != f]
                test = [q for q, a in zip(qs.queries, assign, strict=True) if a == f]
                if not test or len(train) < 2:
                    continue
                fitted = fit(
                    root, cfg, train, defined, stage, intent=intent, progress=progress,
                    ignore=ignore,
                )  # fmt: skip
                measured = measure(root, cfg, fitted, test, stage, ignore)
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
                    intents.append(_route_accuracy(fitted.model, test, defined) | {"n": len(test)})
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


def estimate(root: Path, cfg: Any, qs: QuerySet, sample: int = 4) -> Estimate:
    """`llmc tune --dry-run`: how long tuning would take (times a few real searches)."""
    from llmc.index.status import index_status
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
    with memo_embeddings(), Searcher(root, base) as searcher:
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
    "cross_validate",
    "estimate",
    "fit",
    "measure",
    "memo_embeddings",
    "search_weights",
    "split_queries",
    "tune",
]
