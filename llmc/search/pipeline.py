"""The search pipeline: wires the stages and fills the trace, nothing more.

    query ─▶ normalize ─▶ exact symbols (definitions the query names)
          ─▶ route (intent; weights for code, docs, tests; reasons)
          ─▶ retrieve: BM25 + dense per route (the other route too when the favoured one
             finds nothing above the floor); adaptive HyDE when the query is vague
          ─▶ fuse: one list per retriever, each span weighted by its route (rrf, weighted,
             max); pin the exact definitions first
          ─▶ results: hydrate from SQLite, drop what vanished, per-file cap, snippets

          ─▶ graph: neighbors of the top results, graph priors (search.graph, [expand])
          ─▶ rerank: cross-encoder over the top k, original query (search.rerank, [rerank])
          ─▶ LLM listwise rerank of the top few, gated (search.llm_rerank, [llm_rerank])

``Searcher`` opens the store, the lexical index and the embedders lazily, once, and then
answers any number of queries (batch mode, eval, daemon). Every stage reads its switch
from ``cfg.search``; an ablation is a modified copy of the config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.errors import IndexMissingError, LlmcError, ModelError, StoreError
from llmc.paths import db_path, lexical_path
from llmc.search import fusion, hyde, results, retrieve, router
from llmc.search.query import identifiers, normalize_query, paths, word_groups
from llmc.search.threads import ThreadLimiter
from llmc.search.types import (
    CODE_ROUTE,
    DOCS_ROUTE,
    ROUTE_CATEGORY,
    TESTS,
    Candidate,
    Explain,
    ExplainHit,
    RankedList,
    RouteDecision,
    SearchResponse,
    StageNote,
)
from llmc.types import StoredSpan

log = logging.getLogger(__name__)

MAX_K = 1000
EXPLAIN_HITS = 10


class _Trace:
    """Per-query bookkeeping: stage timings, notes for --explain, warnings."""

    def __init__(self, warnings: Sequence[str] = ()):
        self.timings: dict[str, float] = {}
        self.notes: list[StageNote] = []
        self.warnings: list[str] = list(warnings)
        self.hyde: Any = None  # hyde.HydeReport once the HyDE stage considered the query
        self.query_vectors: dict[str, Any] = {}  # model id → the user query's vector

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - started) * 1000
            self.timings[name] = self.timings.get(name, 0.0) + ms

    def note(self, stage: str, note: str) -> None:
        self.notes.append(StageNote(stage, note))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            log.info("%s", message)
            self.warnings.append(message)


@dataclasses.dataclass(frozen=True)
class _Exact:
    """What the exact-symbol fast path found."""

    pinned: tuple[int, ...] = ()
    fused: tuple[StoredSpan, ...] = ()  # definitions fused as the ``exact`` list
    defined: tuple[str, ...] = ()  # names the query mentions that the index defines


class Searcher:
    """Search one indexed repository. Reusable across queries and thread-safe (queries
    run one at a time); ``close()`` releases the store."""

    def __init__(self, root: Path, cfg: Config):
        self.root = Path(root).resolve()
        from llmc.learn.tuned import TunedOverlay  # `llmc tune`'s .llmc/tuned/ (llmc/learn)

        self._tuned = TunedOverlay(self.root, cfg)
        self.cfg = self._tuned.cfg
        self._store: Any = None
        self._lexical: Any = None
        self._lexical_error: str | None = None
        self._lexical_generation: int | None = None
        self._span_count: tuple[int, int] | None = None  # (generation, spans)
        self._embedders: dict[str, Any] = {}
        self._dense_off: dict[str, str] = {}  # category → why dense search is off
        self._checked_generation: int | None = None  # store generation of those decisions
        self._path_cache: dict[int, str] = {}
        self._lock = threading.RLock()
        self._threads = ThreadLimiter(cfg.search.blas_threads, cfg.search.torch_threads)
        self._hyde_stage: hyde.HydeStage | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
            self._store = None
            self._lexical = None

    def warm(self) -> None:
        """Open everything and load the models now, not on the first query."""
        with self._lock:
            self._open()
            if self.cfg.search.dense:
                for category in ROUTE_CATEGORY.values():
                    embedder = self._embedder(category)
                    if embedder is not None:
                        with self._threads.torch():
                            retrieve.embed_query(embedder, "warm up")
                self._threads.rescan()
            if self.cfg.search.rerank:  # the cross-encoder too (a missing one warns per query)
                from llmc.models.reranker import reranker_from_config

                with contextlib.suppress(ModelError), self._threads.torch():
                    reranker_from_config(self.cfg.rerank).score("warm up", ["warm up"])

    def _open(self) -> None:
        if self._store is not None:
            return
        from llmc.store.db import Store

        path = db_path(self.root)
        if not path.exists():
            raise IndexMissingError(f"no index in {self.root} (run `llmc index {self.root}` first)")
        self._store = Store(path, readonly=True)
        if self.cfg.search.bm25:
            self._open_lexical()
        if self.cfg.search.dense:
            self._check_vector_spaces()

    def _recheck_sources(self, generation: int) -> None:
        """An index run since the last query may have created the lexical index or changed
        a model: decisions taken at open are revisited once per new generation."""
        if self._checked_generation is not None:
            if self.cfg.search.bm25 and self._lexical_error:
                self._lexical_error = None
                self._lexical = None
                self._open_lexical()
            if self.cfg.search.dense:
                self._dense_off.clear()
                self._check_vector_spaces()
        self._checked_generation = generation

    def _open_lexical(self) -> None:
        from llmc.store.lexical import LexicalIndex

        lex = lexical_path(self.root)
        if not lex.is_dir():
            self._lexical_error = "no lexical index (run `llmc index`): BM25 search is off"
            return
        try:
            self._lexical = LexicalIndex(lex, readonly=True)
        except (LlmcError, ValueError, OSError, RuntimeError) as e:
            self._lexical_error = f"lexical index unreadable ({e}): BM25 search is off"

    def _check_vector_spaces(self) -> None:
        from llmc.models.embedder import resolved_model_id

        for category in ROUTE_CATEGORY.values():
            space = self._store.vector_space(category)
            if space is None:
                continue  # nothing of this category was embedded; KNN finds nothing
            try:
                wanted = resolved_model_id(self.cfg.embedding, category)
            except ModelError as e:
                self._dense_off[category] = f"{e}: dense search of {category} spans is off"
                continue
            if wanted != space.model_id:
                self._dense_off[category] = (
                    f"the index's {category} vectors come from {space.model_id} but the "
                    f"config names {wanted}: dense search of {category} spans is off "
                    "(run `llmc index` to re-embed)"
                )

    def _embedder(self, category: str) -> Any:
        if category in self._dense_off:
            return None
        if category not in self._embedders:
            from llmc.models.embedder import embedder_from_config

            try:
                self._embedders[category] = embedder_from_config(self.cfg.embedding, category)
            except ModelError as e:
                self._dense_off[category] = f"{e}: dense search of {category} spans is off"
                return None
        return self._embedders[category]

    # -- the pipeline -------------------------------------------------------------------
    def search(
        self, query: str, k: int | None = None, route: str | None = None, explain: bool = False
    ) -> SearchResponse:
        """Answer one query; see the module docstring for the stages."""
        started = time.perf_counter()
        scfg = self.cfg.search
        text, warnings = normalize_query(query, scfg.max_query_chars)
        k = _check_k(scfg.k if k is None else k)
        trace = _Trace(warnings)
        with self._lock:
            self.cfg = self._tuned.refresh()  # a new `llmc tune` or reset applies at once
            try:
                decision, found, groups, explained = self._run(text, k, route, explain, trace)
            except LlmcError:
                raise
            except _sqlite_error() as e:
                raise StoreError(f"reading the index failed: {e} (run `llmc index`)") from e
        return SearchResponse(
            query=text,
            route=decision,
            results=tuple(r for _, r in found),
            timings_ms=trace.timings,
            took_ms=(time.perf_counter() - started) * 1000,
            warnings=tuple(trace.warnings),
            highlight_terms=tuple(f for g in groups for f in g),
            explain=explained,
            hyde=trace.hyde,
        )

    def _run(
        self, text: str, k: int, route: str | None, explain: bool, trace: _Trace
    ) -> tuple[RouteDecision, list[tuple[Candidate, Any]], tuple, Explain | None]:
        """The stages, in the order of the diagram in the module docstring."""
        scfg = self.cfg.search
        with trace.stage("open"):
            self._open()
        with self._threads.blas():
            self._freshness(trace)
            with trace.stage("exact"):
                exact = self._exact_symbols(text, trace)
            with trace.stage("route"):
                decision = self._route(text, route, exact.defined, trace)
            exact = self._exact_words(text, decision, exact, trace)
            lists, decision = self._retrieve(text, decision, exact, k, trace)
            with trace.stage("fusion"):
                lists, item_weights = self._fusion_lists(decision, lists)
                decision = self._weigh(decision, lists)
                fused = fusion.fuse(
                    scfg.fusion, lists, decision.list_weights, scfg.rrf_k, item_weights
                )
                fused = fusion.pin_first(fused, exact.pinned)
            trace.note("fusion", f"{scfg.fusion} over {len(lists)} lists: {len(fused)} spans")
            fused = self._graph(text, decision, fused, trace)
            fused = self._rerank(text, fused, trace)
            fused = self._llm_rerank(text, fused, trace)
            with trace.stage("results"):
                found, groups = self._results(text, fused, k, trace)
            explained = self._explain(lists, found, groups, trace) if explain else None
            if not found:
                self._why_empty(trace)
        return decision, found, groups, explained

    # -- stages -------------------------------------------------------------------------
    def _freshness(self, trace: _Trace) -> None:
        generation = self._store.generation
        if generation != self._checked_generation:
            self._recheck_sources(generation)
        if self._lexical_error:
            trace.warn(self._lexical_error)
        elif self._lexical is not None:
            lex_gen = self._lexical.generation
            if lex_gen != self._lexical_generation:
                if self._lexical_generation is not None:
                    with contextlib.suppress(Exception):
                        self._lexical.index.reload()
                self._lexical_generation = lex_gen
            if lex_gen != generation:
                trace.warn(
                    f"the lexical index reflects generation {lex_gen} but the store is at "
                    f"{generation}: BM25 results may be stale (run `llmc index` to repair)"
                )
        for why in self._dense_off.values():
            trace.warn(why)

    def _exact_symbols(self, text: str, trace: _Trace) -> _Exact:
        """Definitions of the code-looking names in the query: pinned first when a name
        has few definitions, else fused as the ``exact`` list."""
        scfg = self.cfg.search
        if not scfg.exact_symbol:
            return _Exact()
        strong = [i for i in identifiers(text) if i.strong]
        pinned: list[int] = []
        fused: list[StoredSpan] = []
        defined: list[str] = []
        for ident, defs in retrieve.definitions(self._store, strong):
            if len(defs) > scfg.exact_max:  # __init__, run, main: naming it says little
                trace.note("exact", f"`{ident.name}`: {len(defs)} definitions, too common to pin")
            elif len(pinned) < scfg.exact_max:
                defined.append(ident.name)
                pinned += [d.id for d in defs][: scfg.exact_max - len(pinned)]
                trace.note(
                    "exact", f"`{ident.name}` ({ident.why}): pinned {len(defs)} definition(s)"
                )
            else:
                defined.append(ident.name)
                fused += defs
                trace.note("exact", f"`{ident.name}`: {len(defs)} definition(s), fused")
        named = [p for p, _ in paths(text)]
        if named:
            in_files = retrieve.file_spans(self._store, named)
            fused += in_files
            if in_files:
                trace.note("exact", f"query names indexed file(s): {', '.join(named)}")
        return _Exact(tuple(pinned), tuple(fused), tuple(defined))

    def _route(
        self, text: str, route: str | None, defined: Sequence[str], trace: _Trace
    ) -> RouteDecision:
        scfg = self.cfg.search
        chosen = route if route is not None else scfg.route
        source = "flag" if route is not None else "config"
        if chosen != "auto":
            decision = router.fixed_route(chosen, source)
        elif not scfg.routing:
            decision = router.fixed_route("mixed", "off")
        else:
            decision = router.route_query(
                text,
                defined,
                scfg.route_drop_confidence,
                scfg.min_route_weight,
                scfg.test_weight,
            )
            decision = self._tuned.route(text, defined, decision)  # learned intent, if tuned
        trace.note(
            "route",
            f"{decision.intent} (p_code {decision.p_code:.2f}, confidence "
            f"{decision.confidence:.2f}, source {decision.source})",
        )
        return decision

    def _exact_words(
        self, text: str, decision: RouteDecision, exact: _Exact, trace: _Trace
    ) -> _Exact:
        """For a code question, plain words may name symbols too: fuse their definitions."""
        pinned = self._allowed_pins(exact.pinned, decision)
        if not self.cfg.search.exact_symbol or decision.intent != CODE_ROUTE:
            return dataclasses.replace(exact, pinned=pinned)
        idents = identifiers(text)
        covered = {w.lower() for i in idents if i.strong for w in re.findall(r"\w+", i.name)}
        covered |= {w.lower() for p, _ in paths(text) for w in re.findall(r"\w+", p)}
        weak = [i for i in idents if not i.strong and i.name.lower() not in covered]
        fused = list(exact.fused)
        with trace.stage("exact"):
            for ident, defs in retrieve.definitions(self._store, weak):
                if len(defs) <= self.cfg.search.exact_max:
                    fused += defs
                    trace.note("exact", f"word `{ident.name}` names {len(defs)} definition(s)")
        return dataclasses.replace(exact, pinned=pinned, fused=tuple(fused))

    def _allowed_pins(self, pinned: Sequence[int], decision: RouteDecision) -> tuple[int, ...]:
        """Pins only from routes the decision searches (a forced --route docs pins no code)."""
        if not pinned:
            return ()
        cats = {ROUTE_CATEGORY[r] for r in (CODE_ROUTE, DOCS_ROUTE) if decision.weight(r) > 0}
        spans = self._store.spans_by_ids(list(pinned))
        return tuple(i for i in pinned if i in spans and spans[i].span.category in cats)

    def _retrieve(
        self, text: str, decision: RouteDecision, exact: _Exact, k: int, trace: _Trace
    ) -> tuple[list[RankedList], RouteDecision]:
        """BM25 and dense lists for each route the decision searches; if the favoured
        route finds nothing above the floor, the other route is searched at full weight."""
        vectors = trace.query_vectors
        lists: dict[str, list[RankedList]] = {}
        for r in (CODE_ROUTE, DOCS_ROUTE):
            if decision.weight(r) > 0:
                lists[r] = self._route_lists(text, ROUTE_CATEGORY[r], k, vectors, trace)
        favoured, other = (
            (CODE_ROUTE, DOCS_ROUTE) if decision.p_code >= 0.5 else (DOCS_ROUTE, CODE_ROUTE)
        )
        pinned_cats = self._pinned_categories(exact.pinned)
        found_favoured = self._found(
            lists.get(favoured, []), ROUTE_CATEGORY[favoured] in pinned_cats
        )
        if not found_favoured and decision.weight(other) < 1.0:
            if other not in lists:
                lists[other] = self._route_lists(text, ROUTE_CATEGORY[other], k, vectors, trace)
            why = f"fallback: the {favoured} route found nothing above the floor; {other} searched"
            weights = {**decision.weights, other: 1.0}
            decision = dataclasses.replace(
                decision, weights=weights, reasons=(*decision.reasons, why)
            )
            trace.note("retrieve", why)
        out = [ranked for r in (CODE_ROUTE, DOCS_ROUTE) for ranked in lists.get(r, [])]
        if self.cfg.search.hyde:
            out = self._hyde(text, decision, out, k, trace)
        if exact.fused:
            out.append(retrieve.exact_list(exact.fused))
        for ranked in out:
            top = f", top {ranked.top_score:.3f}" if ranked.hits else ""
            trace.note("retrieve", f"{ranked.name}: {len(ranked.hits)} hits{top}")
        return out, decision

    def _route_lists(
        self, text: str, category: str, k: int, vectors: dict[str, Any], trace: _Trace
    ) -> list[RankedList]:
        scfg = self.cfg.search
        out: list[RankedList] = []
        if scfg.bm25 and self._lexical is not None:
            with trace.stage("bm25"):
                try:
                    out.append(
                        retrieve.bm25(self._lexical, text, category, max(scfg.bm25_depth, k))
                    )
                except StoreError as e:
                    trace.warn(f"{e}: BM25 skipped")
        if scfg.dense:
            vector = self._query_vector(text, category, vectors, trace)
            if vector is not None:
                with trace.stage("dense"):
                    out.append(
                        retrieve.dense(self._store, vector, category, max(scfg.dense_depth, k))
                    )
        return out

    def _query_vector(
        self, text: str, category: str, vectors: dict[str, Any], trace: _Trace
    ) -> Any:
        if category not in self._embedders and category not in self._dense_off:
            with trace.stage("load"):  # the first query of a Searcher pays for the model
                self._embedder(category)
                self._threads.rescan()  # torch may have brought its own BLAS
        with trace.stage("embed"):
            embedder = self._embedder(category)
            if embedder is None:
                trace.warn(self._dense_off[category])
                return None
            if embedder.model_id not in vectors:
                with self._threads.torch():
                    vectors[embedder.model_id] = retrieve.embed_query(embedder, text)
        return vectors[embedder.model_id]

    def _hyde(
        self, text: str, decision: RouteDecision, lists: list[RankedList], k: int, trace: _Trace
    ) -> list[RankedList]:
        """Adaptive HyDE (search/hyde.py) for vague queries: ``hyde.*`` dense lists from
        hypothetical answers, BM25 lists re-searched with Rocchio terms. Never raises for
        the LLM: a missing, slow or babbling one leaves the lists as they are, one warning."""
        if self._hyde_stage is None:
            self._hyde_stage = hyde.HydeStage(self.root, self.cfg)
        scfg = self.cfg.search
        with trace.stage("hyde"):
            outcome = self._hyde_stage.run(
                text,
                decision,
                lists,
                store=self._store,
                lexical=self._lexical if scfg.bm25 else None,
                embed=self._hyde_embed,
                depth=max(scfg.dense_depth, scfg.bm25_depth, k),
            )
        for note in outcome.notes:
            trace.note("hyde", note)
        for warning in outcome.warnings:
            trace.warn(warning)
        trace.hyde = outcome.report
        return outcome.lists

    def _hyde_embed(self, category: str, texts: Sequence[str]) -> Any:
        """Hypotheses are passages: the corpus embedder with the corpus's passage prefix."""
        embedder = self._embedder(category) if self.cfg.search.dense else None
        if embedder is None:
            return None
        with self._threads.torch():
            return embedder.embed_passages(list(texts))

    def _pinned_categories(self, pinned: Sequence[int]) -> set[str]:
        if not pinned:
            return set()
        return {s.span.category for s in self._store.spans_by_ids(list(pinned)).values()}

    def _found(self, lists: Sequence[RankedList], pinned: bool) -> bool:
        floor = self.cfg.search.dense_floor
        for ranked in lists:
            if ranked.name.startswith("bm25") and ranked.hits:
                return True
            if ranked.name.startswith("dense") and ranked.top_score >= floor:
                return True
        return pinned

    def _fusion_lists(
        self, decision: RouteDecision, lists: Sequence[RankedList]
    ) -> tuple[list[RankedList], dict[int, float] | None]:
        """The lists to fuse and each span's own weight.

        With ``search.merge_routes``, one list per retriever, its code and docs hits ranked
        together by score, each span weighted by its route; else the lists as they are (one
        per retriever and route, the route weight on the list). Either way a test file's
        span is weighted by the decision's ``tests`` weight."""
        route_of = {cat: route for route, cat in ROUTE_CATEGORY.items()}
        merge = self.cfg.search.merge_routes
        item_weights: dict[int, float] = {}
        for ranked in lists:
            category = ranked.name.partition(".")[2]
            w = decision.weight(route_of[category]) if merge and category else 1.0
            item_weights.update(
                (h.span_id, w) for h in ranked.hits if h.span_id not in item_weights
            )
        tests = decision.weight(TESTS) if TESTS in decision.weights else 1.0
        if tests != 1.0:
            for span_id, path in self._paths(list(item_weights)).items():
                if router.is_test_path(path):
                    item_weights[span_id] *= tests
        if not merge:
            return list(lists), item_weights
        merged: list[RankedList] = []
        for retriever in ("bm25", "dense", "hyde"):
            parts = [r for r in lists if r.name.startswith(retriever + ".")]
            if parts:
                merged.append(fusion.merge_lists(retriever, parts))
        merged += [r for r in lists if r.name == "exact"]
        return merged, item_weights

    def _paths(self, ids: Sequence[int]) -> dict[int, str]:
        """Span id → path, cached (span ids are never reused)."""
        missing = [i for i in ids if i not in self._path_cache]
        if missing:
            self._path_cache.update(retrieve.span_paths(self._store, missing))
        return {i: self._path_cache[i] for i in ids if i in self._path_cache}

    def _weigh(self, decision: RouteDecision, lists: Sequence[RankedList]) -> RouteDecision:
        """Per-list fusion weights: the retriever's weight, times the route's weight when
        lists are per route (merged lists weigh each span by its route instead)."""
        scfg = self.cfg.search
        retriever = {
            "bm25": scfg.bm25_weight,
            "dense": scfg.dense_weight,
            "hyde": self.cfg.hyde.weight,
        }
        route_of = {cat: route for route, cat in ROUTE_CATEGORY.items()}
        weights: dict[str, float] = {}
        for ranked in lists:
            if ranked.name == "exact":
                weights["exact"] = scfg.exact_weight
                continue
            kind, _, category = ranked.name.partition(".")
            route_weight = decision.weight(route_of[category]) if category else 1.0
            weights[ranked.name] = route_weight * retriever[kind]
        return dataclasses.replace(decision, list_weights=weights)

    # -- second stage: graph, cross-encoder, LLM (each off at no cost) -----------------
    def _graph(
        self, text: str, decision: RouteDecision, fused: list[Candidate], trace: _Trace
    ) -> list[Candidate]:
        if not self.cfg.search.graph or not fused:
            return fused
        from llmc.graph import load_graph
        from llmc.search import expand

        with trace.stage("graph"):
            try:
                graph = load_graph(self.root)
            except LlmcError as e:  # GraphMissingError: no graph, or unreadable
                trace.warn(f"{e}: graph expansion is off")
                return fused
            sims = None
            if self.cfg.search.dense:
                sims = expand.SpanVectors(
                    lambda cat: self._query_vector(text, cat, trace.query_vectors, trace),
                    self._store.vectors,
                ).similarities
            route_of = {cat: route for route, cat in ROUTE_CATEGORY.items()}
            tests = decision.weight(TESTS) if TESTS in decision.weights else 1.0

            def weight(s: StoredSpan) -> float:
                w = decision.weight(route_of.get(s.span.category, CODE_ROUTE))
                return w * tests if router.is_test_path(s.span.path) else w

            head = fused[: self.cfg.expand.top_n * 4]  # the top results as shown: capped
            paths = self._paths([c.span_id for c in head])
            sources, _ = fusion.diversify(head, paths, self.cfg.search.max_per_file)
            out = expand.expand(
                fused,
                graph,
                self._store,
                self.cfg.expand,
                sims,
                query_words=frozenset(w.lower() for w in re.findall(r"\w+", text)),
                span_weight=weight,
                sources=sources,
            )
            touched = [a.span_id for a in out.added] + [a.source_id for a in out.added]
            named = self._describe(touched + [b.span_id for b in out.boosts])
        for line in out.notes(lambda i: named.get(i, f"span {i}")):
            trace.note("graph", line)
        return list(out.candidates)

    def _rerank(self, text: str, fused: list[Candidate], trace: _Trace) -> list[Candidate]:
        rcfg = self.cfg.rerank
        if not self.cfg.search.rerank or len(fused) < 2:
            return fused
        from llmc.models.reranker import reranker_from_config, span_passage
        from llmc.search import rerank

        try:
            with trace.stage("load"):  # the first query of a process loads the model
                model = reranker_from_config(rcfg)
            with trace.stage("rerank"), self._threads.torch():
                spans = self._store.spans_by_ids([c.span_id for c in fused[: rcfg.top_k]])
                passages = {i: span_passage(s.span) for i, s in spans.items()}
                out = rerank.rerank(
                    text, fused, passages, model, rcfg.top_k, rcfg.blend, rcfg.blend_weight
                )
        except ModelError as e:
            trace.warn(f"{e}: rerank is off")
            return fused
        named = self._describe([m[0] for m in out.moves[:5]])
        moved = ", ".join(f"{named.get(i, i)} #{a}→#{b}" for i, a, b in out.moves[:5])
        trace.note(
            "rerank",
            f"{model.model_id} ({rcfg.blend}) scored the top {out.scored} in {out.ms:.0f} ms"
            + (f"; moved {moved}" if moved else "; order kept"),
        )
        return list(out.candidates)

    def _llm_rerank(self, text: str, fused: list[Candidate], trace: _Trace) -> list[Candidate]:
        lcfg = self.cfg.llm_rerank
        if not self.cfg.search.llm_rerank or len(fused) < 2:
            return fused
        from llmc.search import llm_rerank

        why = llm_rerank.gate(text, fused, lcfg)
        if why is None:
            trace.note("llm_rerank", "gate closed: short simple query, top scores apart")
            return fused
        from llmc.models.llm import get_llm

        with trace.stage("llm_rerank"):
            ids = [c.span_id for c in fused if not c.pinned][: lcfg.top_n]
            out = llm_rerank.llm_rerank(
                text, fused, self._store.spans_by_ids(ids), get_llm(self.cfg.llm), lcfg, why
            )
        if out.unavailable:
            trace.warn(f"LLM rerank skipped: {out.reason}")
        answer = f"; answer {out.answer!r}" if out.answer else ""
        trace.note("llm_rerank", f"{out.reason} ({out.ms:.0f} ms){answer}")
        return list(out.candidates)

    def _describe(self, ids: Sequence[int]) -> dict[int, str]:
        """Span id → ``path:line symbol``, for the trace."""
        spans = self._store.spans_by_ids(list(dict.fromkeys(ids))) if ids else {}
        return {
            i: f"{s.span.path}:{s.span.start_line}" + (f" {s.span.symbol}" if s.span.symbol else "")
            for i, s in spans.items()
        }

    def _results(
        self, text: str, fused: Sequence[Candidate], k: int, trace: _Trace
    ) -> tuple[list[tuple[Candidate, Any]], tuple[tuple[str, ...], ...]]:
        scfg = self.cfg.search
        sel = results.select(fused, self._store.spans_by_ids, self.root, k, scfg.max_per_file)
        if sel.missing_ids:
            trace.warn(
                f"{len(sel.missing_ids)} hits pointed at spans no longer in the index and were "
                "dropped (run `llmc index` to repair the lexical index)"
            )
        if sel.deleted_paths:
            shown = ", ".join(sel.deleted_paths[:3]) + (
                ", ..." if len(sel.deleted_paths) > 3 else ""
            )
            trace.warn(
                f"skipped results in {len(sel.deleted_paths)} file(s) deleted since indexing: "
                f"{shown} (run `llmc index`)"
            )
        if sel.merged or sel.held_back:
            trace.note(
                "results",
                f"{sel.merged} more parts of split definitions merged; per-file cap "
                f"{scfg.max_per_file} let {sel.held_back} crowded spans back in to fill k",
            )
        stem = self._lexical.query_terms if self._lexical is not None else None
        groups = word_groups(text, stem)
        found = [(c, results.to_result(c, s, groups, scfg.snippet_lines)) for c, s in sel.chosen]
        return found, groups

    def _explain(
        self,
        lists: Sequence[RankedList],
        found: Sequence[tuple[Candidate, Any]],
        groups: Sequence[Sequence[str]],
        trace: _Trace,
    ) -> Explain:
        with trace.stage("explain"):
            ids = list({h.span_id for r in lists for h in r.hits[:EXPLAIN_HITS]})
            spans = self._store.spans_by_ids(ids)
            hydrated: dict[str, tuple[ExplainHit, ...]] = {}
            for ranked in lists:
                hits = []
                for rank, hit in enumerate(ranked.hits[:EXPLAIN_HITS], start=1):
                    s = spans.get(hit.span_id)
                    hits.append(
                        ExplainHit(
                            rank,
                            hit.span_id,
                            hit.score,
                            s.span.path if s else "(no longer indexed)",
                            s.span.start_line if s else 0,
                            s.span.end_line if s else 0,
                            s.span.symbol if s else "",
                        )
                    )
                hydrated[ranked.name] = tuple(hits)
            return Explain(
                query_terms=tuple(g[0] for g in groups),
                lists=hydrated,
                fusion=self.cfg.search.fusion,
                contributions=tuple(dict(c.contributions) for c, _ in found),
                ranks=tuple(dict(c.ranks) for c, _ in found),
                stages=tuple(trace.notes),
            )

    def _why_empty(self, trace: _Trace) -> None:
        generation = self._store.generation
        if self._span_count is None or self._span_count[0] != generation:
            self._span_count = (generation, self._store.counts()["spans"])
        if self._span_count[1] == 0:
            trace.warn("the index is empty: nothing was indexed (see `llmc index -v`)")
        elif not self.cfg.search.dense or len(self._dense_off) == len(ROUTE_CATEGORY):
            trace.warn("no indexed span matches the query's words (dense search is off)")
        else:
            trace.warn("no results")


def _sqlite_error() -> type[Exception]:
    from llmc.store.sqlite import sqlite_module

    return sqlite_module().Error


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise LlmcError(f"k must be a whole number of results, at least 1 (got {k!r})")
    return min(k, MAX_K)


__all__ = ["Searcher"]
