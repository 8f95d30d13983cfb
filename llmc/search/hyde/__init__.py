"""Adaptive HyDE: search with the answer the local LLM expects, when the query is vague.

For a vague natural-language question (``gate``), the LLM (``llmc.models.llm``) writes
``hyde.n`` hypothetical answers with a prompt per route: the code that would answer it
(code route) or the documentation passage (docs route), capped near the median span
length of that route. Then

- each hypothesis is embedded with the corpus embedder as a passage (the corpus's own
  prefix) and searched densely in its route's category; hits count from an adaptive
  threshold: ``initial_threshold`` first, lowered by ``threshold_step`` down to
  ``min_threshold`` until some hit reaches it (``step_down``). The hits of all hypotheses
  of a category form one ``hyde.<category>`` list (by best cosine), fused with BM25 and
  raw dense by the pipeline's fusion at weight ``hyde.weight`` (at 0, the default with the
  small embedded model, it is searched for the diagnostics only: docs/hyde.md);
- the BM25 lists are searched again with Rocchio expansion terms from the hypotheses
  (``rocchio.py``), the original query terms weighted up, not a concatenation.

Before the LLM writes anything, the query's latency budget (``budget.py``) is asked: the
hypotheses the cache does not hold, at this machine's learned cost per hypothesis, must fit
what is left of ``search.budget_ms`` unless HyDE was asked for (``--hyde``, ``search.hyde``
set by the user: ``budget.explicit``); else HyDE is
skipped with a note (a cached question still gets its hypotheses).

Hypotheses are cached by (query, model, prompt version) in ``.llmc/hyde_cache.db``. They
are never results and never passed on: only the trace (``HydeReport``: the text, latency,
effective threshold, steps) shows them. An LLM that is missing, too slow or writes
garbage leaves the lists as they were, with one warning line; nothing raises.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.config import Config
from llmc.errors import ConfigError, LlmcError, LLMTimeout, LLMUnavailable
from llmc.search import fusion, rocchio
from llmc.search.budget import HYDE_LLM, HYDE_REST, Budget, explicit
from llmc.search.hyde.cache import CACHE_NAME, HypothesisCache, cache_key
from llmc.search.hyde.diagnostics import HydeReport, Hypothesis, ThresholdStep
from llmc.search.hyde.rules import (
    CHARS_PER_TOKEN,
    COOLDOWN_S,
    LANG_NAMES,
    MIN_TOKENS,
    NOT_PROGRAMS,
    PROMPT,
    PROMPT_VERSION,
    SYSTEM,
    Corpus,
    Gate,
    Outcome,
    check,
    clean,
    garbage,
    gate,
    plan,
    step_down,
    thresholds,
)
from llmc.search.types import (
    BM25,
    DENSE,
    EXACT,
    HYDE,
    ROUTE_CATEGORY,
    Hit,
    RankedList,
    RouteDecision,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.models.llm import LLM
    from llmc.search.retrieve import Knn
    from llmc.store.db import Store
    from llmc.store.lexical import LexicalIndex

log = logging.getLogger(__name__)

# -- the stage -------------------------------------------------------------------------------
Embed = Callable[
    [str, Sequence[str]], "np.ndarray | None"
]  # (category, texts) → vectors, or None (dense off)


class HydeStage:
    """Adaptive HyDE for one Searcher: holds the LLM handle, the cache and the corpus
    profile; ``run`` is called once per query by the pipeline's retrieve step."""

    def __init__(self, root: Path, cfg: Config):
        self.root = Path(root)
        self.cfg = cfg
        self._llm: LLM | None = None
        self._failed: tuple[float, str] | None = None  # (monotonic time, why)
        self._corpus: tuple[int, Corpus] | None = None  # (store generation, profile)
        self.cache = HypothesisCache(self.root / ".llmc" / CACHE_NAME)
        self.budget: Budget | None = None  # this query's latency budget (``begin``)

    def begin(self, spend: Budget | None) -> None:
        """The next query's latency budget: hypotheses the cache does not hold are written
        only when their expected cost fits it (or HyDE was asked for: ``hyde.mode = always``)."""
        self.budget = spend

    # -- decisions ---------------------------------------------------------------------------
    def decide(self, query: str, decision: RouteDecision, dense_best: float | None = None) -> Gate:
        """Gate by the query's shape, the router's intent and how well raw dense retrieval
        already did (auto), or always."""
        h = self.cfg.hyde
        if h.mode == "always":
            return Gate(True, "hyde.mode = always (or --hyde)")
        shaped = gate(query)
        if not shaped.use:
            return shaped
        if decision.intent not in h.intents:
            return Gate(False, f"{decision.intent} intent: not in hyde.intents")
        if dense_best is not None and dense_best >= h.dense_below:
            return Gate(
                False,
                f"raw dense found cosine {dense_best:.2f} >= hyde.dense_below {h.dense_below:g}",
            )
        return shaped

    # -- run ---------------------------------------------------------------------------------
    def run(
        self,
        query: str,
        decision: RouteDecision,
        lists: Sequence[RankedList],
        *,
        store: Store,
        lexical: LexicalIndex | None,
        embed: Embed,
        depth: int,
        knn: Knn | None = None,
    ) -> Outcome:
        """``knn`` answers the hypotheses' KNN searches (``Sources.knn``: the vectors in
        memory); without it, ``store.knn`` (sqlite-vec) does."""
        started = time.perf_counter()
        lists = list(lists)
        try:
            check(self.cfg)
        except ConfigError as e:
            return Outcome(lists, HydeReport(False, str(e)), (f"hyde skipped: {e}",))
        dense_best = max((r.top_score for r in lists if r.retriever == DENSE), default=None)
        verdict = self.decide(query, decision, dense_best)
        if not verdict.use:
            report = HydeReport(False, verdict.reason, dense_best=dense_best)
            return Outcome(lists, report, notes=(verdict.reason,))
        warnings: list[str] = []
        notes: list[str] = [verdict.reason]
        corpus = self._profile(store)
        hyps, model, llm_ms, why, over = self._hypotheses(query, decision, corpus)
        if over:  # the query's latency budget: a note, not a warning
            report = HydeReport(False, over, model, took_ms=_ms(started), dense_best=dense_best)
            return Outcome(lists, report, notes=(verdict.reason, over))
        if not hyps:
            warnings.append(f"hyde skipped: {why}; plain retrieval")
            report = HydeReport(
                False, why, model, llm_ms=llm_ms, took_ms=_ms(started), dense_best=dense_best
            )
            return Outcome(lists, report, tuple(warnings), tuple(notes))
        if why:
            notes.append(why)
        added, steps = self._dense_lists(knn or store.knn, embed, hyps, depth, notes, warnings)
        expansion: dict[str, float] = {}
        if self.cfg.hyde.rocchio and lexical is not None:
            try:
                lists, expansion = self._expand_bm25(query, hyps, lists, lexical, depth)
            except LlmcError as e:
                warnings.append(f"hyde BM25 expansion skipped: {e}")
            if expansion:
                extra = [t for t, w in expansion.items() if w < 1.0]
                notes.append(
                    f"BM25 expanded with {len(extra)} Rocchio term(s): {', '.join(extra[:10])}"
                )
        if self.budget is not None:
            self.budget.observe(HYDE_REST, max(0.0, _ms(started) - llm_ms))
        report = HydeReport(
            used=True,
            reason=verdict.reason,
            model=model,
            hypotheses=tuple(hyps),
            thresholds=tuple(steps),
            expansion=expansion,
            llm_ms=llm_ms,
            took_ms=_ms(started),
            dense_best=dense_best,
        )
        return Outcome(_insert(lists, added), report, tuple(warnings), tuple(notes))

    # -- hypotheses ----------------------------------------------------------------------------
    def _get_llm(self) -> LLM:
        if self._llm is None:
            from llmc.models.llm import get_llm

            started = time.perf_counter()
            self._llm = get_llm(self.cfg.llm)  # resolving `auto` probes: once a process
            if self.budget is not None:
                self.budget.paid_once(_ms(started))
        return self._llm

    def warm(self, store: Store) -> None:
        """Resolve the LLM provider and profile the corpus now, not in the first vague
        query (``Searcher.warm``); no model is loaded."""
        try:
            self._get_llm()
        except LlmcError:
            pass  # the first query says why, once
        self._profile(store)

    def _hypotheses(
        self, query: str, decision: RouteDecision, corpus: Corpus
    ) -> tuple[list[Hypothesis], str, float, str, str]:
        """``(usable hypotheses, model, generation ms, why some or all are missing, the
        budget's note)``; the note is set when the query's budget skipped the LLM."""
        h = self.cfg.hyde
        if self._failed is not None and time.monotonic() - self._failed[0] < COOLDOWN_S:
            ago = time.monotonic() - self._failed[0]
            why = f"the LLM failed {ago:.0f}s ago ({self._failed[1]}); retry after {COOLDOWN_S:g}s"
            return [], "", 0.0, why, ""
        try:
            llm = self._get_llm()
        except LlmcError as e:
            return [], "", 0.0, f"no LLM ({e})", ""
        model = f"{llm.provider}:{llm.model}"
        sampled = h.n > 1
        temperature = h.temperature if sampled else 0.0
        wanted = []  # (seed, route, length cap, cache key, cached answer or None)
        for seed, route in enumerate(plan(decision, h.n)):
            cap = corpus.span_tokens.get(ROUTE_CATEGORY[route], h.max_tokens)
            key = cache_key(
                query, model, PROMPT_VERSION, route=route, lang=corpus.lang, max_tokens=cap,
                temperature=temperature, seed=seed if sampled else None,
            )  # fmt: skip
            wanted.append((seed, route, cap, key, self.cache.get(key) if h.cache else None))
        unit = f"{HYDE_LLM}:{llm.provider}"
        if self.budget is not None:
            misses = sum(1 for *_, cached in wanted if cached is None)
            expected = self.budget.expect(unit, misses, extra=HYDE_REST)
            asked = h.mode == "always" or explicit(self.cfg, "search.hyde")
            verdict = self.budget.allow("hyde", expected, asked)
            if not verdict.run:
                return [], model, 0.0, "", verdict.note
        deadline = time.monotonic() + h.timeout_s
        out: list[Hypothesis] = []
        problems: list[str] = []
        llm_ms = 0.0
        for seed, route, cap, key, cached in wanted:
            lang = corpus.lang
            if cached is not None:
                text, latency, tokens, hit = cached[0], cached[1], None, True
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    problems.append(
                        f"the LLM time budget (hyde.timeout_s = {h.timeout_s:g}s) ran out"
                    )
                    break
                lines = max(3, round(cap * CHARS_PER_TOKEN / 40))
                try:
                    g = llm.generate(
                        PROMPT[route].format(lang=lang, lines=lines, query=query),
                        system=SYSTEM[route].format(lang=lang),
                        max_tokens=cap,
                        temperature=temperature,
                        timeout=left,
                        seed=seed if sampled else None,
                    )
                except LLMTimeout:  # slow, not down: the next query tries again
                    if self.budget is not None:
                        self.budget.observe(unit, h.timeout_s * 1000)  # at least this slow
                    problems.append(f"the LLM took longer than hyde.timeout_s = {h.timeout_s:g}s")
                    break
                except LLMUnavailable as e:
                    self._failed = (time.monotonic(), str(e))
                    problems.append(str(e))
                    break
                except Exception as e:  # noqa: BLE001 - a provider bug must not break search
                    self._failed = (time.monotonic(), type(e).__name__)
                    problems.append(f"the LLM failed: {type(e).__name__}: {e}")
                    break
                text, latency, tokens, hit = g.text, g.latency_ms, g.tokens, False
                llm_ms += g.latency_ms
                if self.budget is not None:
                    self.budget.observe(unit, g.latency_ms)
                if h.cache:
                    self.cache.put(key, query, model, PROMPT_VERSION, text, latency)
            cleaned = clean(text)
            bad = garbage(cleaned)
            if bad:
                problems.append(f"the LLM's answer was unusable ({bad})")
                continue
            out.append(Hypothesis(route, seed if sampled else 0, cleaned, latency, hit, tokens))
        why = "; ".join(dict.fromkeys(problems))
        return out, model, llm_ms, why, ""

    # -- dense -------------------------------------------------------------------------------
    def _dense_lists(
        self,
        knn: Knn,
        embed: Embed,
        hyps: Sequence[Hypothesis],
        depth: int,
        notes: list[str],
        warnings: list[str],
    ) -> tuple[list[RankedList], list[ThresholdStep]]:
        """The ``hyde.<category>`` lists to fuse (none at weight 0) and every category's
        threshold steps (recorded at any weight)."""
        added: list[RankedList] = []
        steps: list[ThresholdStep] = []
        for route in dict.fromkeys(hyp.route for hyp in hyps):
            category = ROUTE_CATEGORY[route]
            texts = [hyp.text for hyp in hyps if hyp.route == route]
            try:
                ranked, step = self._dense(knn, embed, category, texts, depth)
            except LlmcError as e:
                warnings.append(f"hyde dense search of {category} skipped: {e}")
                continue
            if step is None:  # dense search is off
                continue
            steps.append(step)
            found = f"threshold {step.threshold:g}" if step.threshold is not None else "nothing"
            notes.append(
                f"{ranked.name}: best cosine {step.best:.3f}, {step.steps} step(s) down: "
                f"{found}, {step.hits} hits"
                + ("" if self.cfg.hyde.weight > 0 else " (hyde.weight 0: not fused)")
            )
            if ranked.hits and self.cfg.hyde.weight > 0:
                added.append(ranked)
        return added, steps

    def _dense(
        self, knn: Knn, embed: Embed, category: str, texts: Sequence[str], depth: int
    ) -> tuple[RankedList, ThresholdStep | None]:
        """One ``hyde.<category>`` list: each hypothesis's KNN hits at the effective
        threshold, merged by best cosine. (Searching the mean of the hypotheses' and the
        query's vectors instead, as the HyDE paper does, measured worse: docs/hyde.md.)"""
        from llmc.errors import StoreError

        h = self.cfg.hyde
        vectors = embed(category, list(texts))
        if vectors is None:
            return RankedList(HYDE, category, ()), None
        started = time.perf_counter()
        per_hyp: list[list[tuple[int, float]]] = []
        for vector in vectors:
            try:
                per_hyp.append(knn(category, vector, depth))
            except Exception as e:  # sqlite3 / sqlite-vec errors have no common base
                raise StoreError(f"vector search failed: {e}") from e
        best = max((s for hits in per_hyp for _, s in hits), default=None)
        ladder = thresholds(h.initial_threshold, h.threshold_step, h.min_threshold)
        threshold, steps = step_down(best, ladder)
        kept = [
            RankedList(HYDE, category, tuple(Hit(i, s) for i, s in hits if s >= threshold - 1e-9))
            for hits in per_hyp
            if threshold is not None
        ]
        merged = (
            fusion.merge_lists(HYDE, kept, category) if kept else RankedList(HYDE, category, ())
        )
        merged = RankedList(HYDE, category, merged.hits, (time.perf_counter() - started) * 1000)
        step = ThresholdStep(category, threshold, steps, len(merged.hits), best or 0.0)
        return merged, step

    # -- BM25 --------------------------------------------------------------------------------
    def _expand_bm25(
        self,
        query: str,
        hyps: Sequence[Hypothesis],
        lists: list[RankedList],
        lexical: LexicalIndex,
        depth: int,
    ) -> tuple[list[RankedList], dict[str, float]]:
        """Search each BM25 list's category again with the Rocchio-expanded query."""
        from llmc.search import retrieve
        from llmc.store.tokens import code_tokens

        h = self.cfg.hyde
        surface: dict[str, str] = {}
        memo: dict[str, str | None] = {}

        def analysed(text: str) -> list[str]:
            out = []
            for tok in code_tokens(text):
                if tok not in memo:
                    terms = lexical.query_terms(tok)
                    memo[tok] = terms[0] if terms else None
                term = memo[tok]
                if term:
                    surface.setdefault(term, tok)
                    out.append(term)
            return out

        q_terms = list(dict.fromkeys(analysed(query)))
        docs = [analysed(hyp.text) for hyp in hyps]
        candidates = {t for d in docs for t in d if rocchio.keep_term(t)} - set(q_terms)
        try:
            df = lexical.document_frequencies(sorted(candidates))
            n_docs = lexical.num_docs()
        except (ValueError, OSError, RuntimeError) as e:
            from llmc.errors import StoreError

            raise StoreError(f"lexical statistics failed: {e}") from e
        weights = rocchio.expand(
            q_terms, docs, df, n_docs, h.rocchio_alpha, h.rocchio_beta, h.max_terms,
            h.rocchio_max_df,
        )  # fmt: skip
        extra = {surface[t]: w for t, w in weights.items() if w != 1.0}
        if not extra:  # no expansion term, no query term weighted up: BM25 as it was
            return lists, {}
        out = []
        for ranked in lists:
            if ranked.retriever == BM25 and ranked.category:
                ranked = retrieve.bm25(lexical, query, ranked.category, depth, extra_terms=extra)
            out.append(ranked)
        return out, extra

    # -- corpus ------------------------------------------------------------------------------
    def _profile(self, store: Store) -> Corpus:
        """The main programming language and per-category length caps, per generation."""
        generation = getattr(store, "generation", 0)
        if self._corpus is not None and self._corpus[0] == generation:
            return self._corpus[1]
        cap = self.cfg.hyde.max_tokens
        lang, caps = "Python", {}
        try:
            rows = store.code_languages()
            programs = [r[0] for r in rows if r[0] not in NOT_PROGRAMS]
            if programs:
                lang = LANG_NAMES.get(programs[0], programs[0].title())
            for category in ROUTE_CATEGORY.values():
                sizes = store.text_lengths(category)
                if sizes:
                    tokens = round(statistics.median(sizes) / CHARS_PER_TOKEN)
                    caps[category] = max(MIN_TOKENS, min(cap, tokens))
        except Exception as e:  # noqa: BLE001 - a profile is a nicety; defaults do
            log.debug("hyde: corpus profile failed (%s); defaults used", e)
        corpus = Corpus(lang, {c: caps.get(c, cap) for c in ROUTE_CATEGORY.values()})
        self._corpus = (generation, corpus)
        return corpus


def _insert(lists: list[RankedList], added: Sequence[RankedList]) -> list[RankedList]:
    """``added`` after the other retrievers' lists, before ``exact``."""
    head = [r for r in lists if r.retriever != EXACT]
    return head + list(added) + [r for r in lists if r.retriever == EXACT]


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


__all__ = ["HydeReport", "HydeStage", "Hypothesis", "ThresholdStep"]
