"""The search pipeline: wires the stages and fills the trace, nothing more.

    query ─▶ read: a short query as it is; a report split into parts      report.py
             (BM25: its terms; dense: title + first paragraph; exact: all)
          ─▶ exact symbols (definitions the query names); a report's       exact.py
             frames and files, resolved against the index                 evidence.py
          ─▶ route (intent; weights for code, docs, tests; reasons)       router.py
          ─▶ retrieve: BM25 + dense per route (the other route too when   candidates.py
             the favoured one finds nothing above the floor); adaptive
             HyDE when the query is vague and its LLM fits the budget     hyde.py
          ─▶ rank: search.ranker = learned: both routes searched, every     features.py
             list's top ranker_depth pooled, features per candidate,      learned.py
             the shipped trees score them (router output is features),
             blended with the plain RRF order (more for a question);
             = fusion (or no model): one list per retriever, each span    weights.py
             weighted by its route (rrf, weighted, max); pins first       fusion.py
          ─▶ graph: neighbors of the top results (search.graph)          second_stage.py
          ─▶ rerank: cross-encoder over the top k (search.rerank; both
             profiles offer it), when it fits the budget                  budget.py
          ─▶ LLM listwise rerank of the top few, gated (search.llm_rerank)
             and within the budget
          ─▶ a report's exact evidence on top: frames, files, definitions  evidence.py
             (a short query: a lookup's definitions, the code holding a   literal.py
             pasted error message, on top)
          ─▶ results: hydrate from SQLite, drop what vanished, per-file    results.py
             cap, a code result in the top 3 when there is one
             (search.code_in_top), snippets; the explain trace when asked explain.py

``Searcher`` opens the store, the lexical index and the embedders lazily, once
(``sources.py``), and then answers any number of queries (batch mode, eval, daemon). Every
stage reads its switch from the config; an ablation is a modified copy of the config.
`llmc tune`'s learned values apply through ``tuned.py``, the machine's profile (``cpu`` or
``gpu``: llmc.models.device) through ``budget.apply_profile``. Each query has a latency
budget (``search.budget_ms``, ``budget.py``) that the costly stages ask before they run;
the stage timings of every answer teach the cost model (``.llmc/costs.json``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from llmc.config import Config
from llmc.errors import ConfigError, LlmcError, ModelError, StoreError
from llmc.paths import gate_state
from llmc.search import (
    budget,
    candidates,
    exact,
    fusion,
    learned,
    literal,
    match,
    results,
    router,
    second_stage,
    weights,
)
from llmc.search.explain import build_explain, why_empty
from llmc.search.features import Pool
from llmc.search.files import FILE_SPANS
from llmc.search.report import QueryParts, read_query
from llmc.search.sources import Sources
from llmc.search.threads import ThreadLimiter
from llmc.search.trace import Trace
from llmc.search.tuned import TunedOverlay
from llmc.search.types import (
    DOCS_ROUTE,
    ROUTE_CATEGORY,
    Candidate,
    Explain,
    RankedList,
    RouteDecision,
    SearchResponse,
    SearchResult,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from llmc.models.device import Profile
    from llmc.search.answer import Answer
    from llmc.search.hyde import HydeStage

MAX_K = 1000
RANKERS = ("fusion", "learned", "auto")
PLAIN_DEPTH = 100  # spans of the plain RRF order kept for a file-level answer
PLAIN_KEPT = 64  # queries whose plain order a searcher keeps (a daemon's concurrent asks)

Found = list[tuple[Candidate, SearchResult]]
# what a Searcher reads from, given its root, config and thread limits: the local index
# (``Sources``) or another reader behind the same methods (the team store's, llmc/team/)
OpenSources = Callable[[Path, Config, ThreadLimiter], Sources]


class Searcher:
    """Search one indexed repository. Reusable across queries and thread-safe (queries
    run one at a time); ``close()`` releases the store."""

    def __init__(self, root: Path, cfg: Config, sources: OpenSources | None = None):
        self.root = Path(root).resolve()
        gate_state(self.root)  # before anything of .llmc/ is read: state that came with a clone
        self._tuned = TunedOverlay(self.root, cfg)  # `llmc tune`'s .llmc/tuned/
        self.profile = _profile(cfg)  # cpu or gpu: which stages are candidates
        self._profiled: tuple[Config, Config] | None = None  # (tuned config, with profile)
        self.cfg = self._with_profile(self._tuned.cfg)
        self.costs = budget.CostModel(budget.costs_path(self.root))  # learned stage costs
        self._lock = threading.RLock()
        self._threads = ThreadLimiter(cfg.search.blas_threads, cfg.search.torch_threads)
        self.sources = (sources or Sources)(self.root, self.cfg, self._threads)
        self._hyde_stage: HydeStage | None = None
        self._ranker: learned.LearnedStage | None = None
        self._plain: OrderedDict[str, tuple[RankedList, ...]] = OrderedDict()  # plain_files

    # -- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self.costs.maybe_save(force=True)
            self.sources.close()

    def warm(self) -> None:
        """Open everything and load the models now, not on the first query."""
        from llmc.search import retrieve

        with self._lock:
            self.sources.open()
            if self.cfg.search.dense:
                for category in ROUTE_CATEGORY.values():
                    embedder = self.sources.embedder(category)
                    if embedder is not None:
                        with self._threads.torch():
                            retrieve.embed_query(embedder, "warm up")
                        self.sources.warm_vectors(category)  # the vectors, in memory
                self._threads.rescan()
            hyde = self._hyde()
            if hyde is not None:  # HyDE's LLM provider resolved (not loaded) and its corpus
                hyde.warm(self.sources.store)
            if self._rerank_fits():  # the cross-encoder too (a missing one warns per query)
                from llmc.models.reranker import reranker_from_config

                try:
                    with self._threads.torch():
                        reranker_from_config(self.cfg.rerank).score("warm up", ["warm up"])
                except ModelError:
                    pass

    def whole_files(self, query: str, limit: int = 20) -> list[str]:
        """Paths best first by whole-file BM25 (``llmc.store.file_lexical``), which the
        file-level answer fuses in; empty when ``search.file_bm25_weight`` is 0 or the
        index has no whole-file index yet (built by the next ``llmc index``). Files
        deleted since the last index run are left out."""
        if self.cfg.search.file_bm25_weight <= 0:
            return []
        with self._lock:
            return self.sources.whole_files(query, limit)

    def plain_files(self, query: str) -> list[str]:
        """The paths of the plain BM25 + dense RRF order (top ``PLAIN_DEPTH`` spans) of
        this searcher's last search of ``query`` (the retrievers' own lists, no further
        search; empty when it was not searched lately or ``search.file_ranker`` is not
        ``learned``): the learned file ranker reads where each file stands in it."""
        with self._lock:
            lists = self._plain.get(query)
            if not lists:
                return []
            order = learned.rrf_order(lists, PLAIN_DEPTH)
            ids = sorted(order, key=order.__getitem__)[:PLAIN_DEPTH]
            paths = self.sources.paths(ids)
        return [paths[i] for i in ids if i in paths]

    def _keep_plain(self, query: str, lists: Sequence[RankedList]) -> None:
        """Keep a query's retrieved lists for ``plain_files`` (the file-level answer that
        follows asks for them; a span answer never does, so nothing is computed here)."""
        if self.cfg.search.file_ranker != "learned" or not lists:
            return
        self._plain[query] = tuple(lists)
        self._plain.move_to_end(query)
        while len(self._plain) > PLAIN_KEPT:
            self._plain.popitem(last=False)

    # -- the pipeline -------------------------------------------------------------------
    def search(
        self, query: str, k: int | None = None, route: str | None = None, explain: bool = False
    ) -> SearchResponse:
        """Answer one query; see the module docstring for the stages."""
        started = time.perf_counter()
        parts = read_query(query, self.cfg.search.max_query_chars)  # a report: split
        text = parts.text
        k = _check_k(self.cfg.search.k if k is None else k)
        trace = Trace(parts.warnings)
        with self._lock:
            self.cfg = self._with_profile(self._tuned.refresh())  # a new `llmc tune` applies
            self.sources.begin_query(self.cfg)
            spend = budget.Budget(
                self.cfg.search.budget_ms, started, self.costs, self.profile.device,
                once=lambda: _once_ms(trace),
            )  # fmt: skip
            try:
                try:
                    decision, found, groups, explained = self._run(
                        parts, k, route, explain, trace, spend
                    )
                except ModelError as e:  # the query's embedding failed (a server down)
                    decision, found, groups, explained = self._without_vectors(
                        e, parts, k, route, explain, trace, spend
                    )
            except LlmcError:
                raise
            except _sqlite_error() as e:
                raise StoreError(f"reading the index failed: {e} (run `llmc index`)") from e
            self._learn_costs(trace, started)
            self._keep_plain(query, trace.retrieved)
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
            match=trace.match,
        )

    def answer(
        self, query: str, k: int | None = None, route: str | None = None,
        explain: bool = False, group: str = "span", spans: int = FILE_SPANS,
    ) -> Answer:  # fmt: skip
        """The answer the CLI, the daemon, MCP and the lab give: ``search`` without the
        results of deleted files, or with ``group="file"`` its files (search/answer.py)."""
        from llmc.search.answer import answer

        return answer(self, query, k=k, route=route, explain=explain, group=group, spans=spans)

    def _run(
        self, parts: QueryParts, k: int, route: str | None, explain: bool, trace: Trace,
        spend: budget.Budget,
    ) -> tuple[RouteDecision, Found, tuple[tuple[str, ...], ...], Explain | None]:  # fmt: skip
        """The stages, in the order of the diagram in the module docstring."""
        cfg, sources = self.cfg, self.sources
        text, focus, dense = parts.text, parts.focus, parts.dense  # all `text` when short
        if explain:
            trace.note("budget", self._budget_line())
        if parts.long:
            trace.note("query", parts.describe())
        with trace.stage("open"):
            sources.open()
        with self._threads.blas():
            sources.freshness(trace)
            with trace.stage("exact"):
                found_exact = exact.exact_symbols(sources, text, cfg.search, trace)
            with trace.stage("route"):
                decision = self._route(focus, route, found_exact.defined, trace)
            use = self._learned(decision, focus)
            decision, found_exact, lists = self._retrieve(
                parts, k, decision, found_exact, trace, use, spend
            )
            trace.retrieved = lists
            with trace.stage("match"):
                trace.match = match.judge(sources, focus, lists)
            if trace.match is not None and trace.match.weak:
                trace.warn(trace.match.line())
            fused = self._learned_rank(
                focus, decision, lists, found_exact, trace, explain, k, parts
            )
            # the learned ranker's results take its own per-file cap (0: none; see config)
            cap = cfg.search.ranker_max_per_file if fused is not None else None
            if fused is None:
                with trace.stage("fusion"):
                    lists, item_weights = weights.fusion_lists(cfg, decision, lists, sources.paths)
                    decision = weights.list_weights(cfg, decision, lists)
                    fused = fusion.fuse(
                        cfg.search.fusion, lists, decision.list_weights, cfg.search.rrf_k,
                        item_weights,
                    )  # fmt: skip
                    fused = fusion.pin_first(fused, found_exact.pinned)
                trace.note(
                    "fusion", f"{cfg.search.fusion} over {len(lists)} lists: {len(fused)} spans"
                )
            fused = second_stage.graph_stage(sources, dense, decision, fused, trace)
            fused = second_stage.rerank_stage(sources, dense, fused, trace, spend)
            fused = second_stage.llm_rerank_stage(sources, dense, fused, trace, spend)
            if parts.long:  # a report's frames, files and definitions are not ranked away
                fused = exact.keep_evidence(sources, fused, found_exact, decision, trace)
            else:  # a lookup's definitions, the code that says a pasted message
                with trace.stage("lead"):
                    fused = literal.lead(sources, text, fused, found_exact.pinned, trace)
            with trace.stage("results"):
                found, groups = results.present(
                    sources, focus, fused, k, trace, cap, self._code_top(decision)
                )
            explained = build_explain(sources, lists, found, groups, trace) if explain else None
            if not found:
                why_empty(sources, trace)
        return decision, found, groups, explained

    def _without_vectors(
        self, error: ModelError, parts: QueryParts, k: int, route: str | None, explain: bool,
        trace: Trace, spend: budget.Budget,
    ) -> tuple[RouteDecision, Found, tuple[tuple[str, ...], ...], Explain | None]:  # fmt: skip
        """The query again without dense retrieval, after one warning: an embedder that
        failed mid-query (an embeddings server down, too slow, answering garbage) costs
        this query its vectors, not its answer. The next query tries the server again."""
        if not self.cfg.search.dense:
            raise error
        trace.warn(f"{error}: this query is ranked without vectors")
        kept = self.cfg
        self.cfg = kept.with_values({"search.dense": False}, "fallback")
        self.sources.begin_query(self.cfg)
        try:
            return self._run(parts, k, route, explain, trace, spend)
        finally:
            self.cfg = kept
            self.sources.begin_query(kept)

    def _retrieve(
        self, parts: QueryParts, k: int, decision: RouteDecision, found: exact.ExactMatch,
        trace: Trace, use: bool, spend: budget.Budget | None = None,
    ) -> tuple[RouteDecision, exact.ExactMatch, list[RankedList]]:  # fmt: skip
        """Every retriever's list. With the learned ranker, both routes are searched: the
        router's probabilities are the ranker's features, not a gate (a route fixed by
        ``--route`` or ``search.route`` is still the only one searched). A report's parts
        go where they suit (``report.py``): BM25 its terms, dense its title and first
        paragraph, the exact stage its frames and paths."""
        sources = self.sources
        fixed = decision.source in ("flag", "config")
        searched = learned.open_routes(decision) if use and not fixed else decision
        found = exact.exact_words(sources, parts.focus, searched, found, self.cfg.search, trace)
        if parts.long:
            with trace.stage("exact"):
                found = exact.report_evidence(sources, parts.text, found, trace)
        lists, searched = candidates.retrieve_lists(
            sources, parts.lexical, searched, found, k, trace, self._hyde(spend), parts.dense
        )
        return (decision if use and not fixed else searched), found, lists

    def _learned(self, decision: RouteDecision, text: str) -> bool:
        """Whether the learned ranker ranks this query: not when the query asks about tests
        (no training query did, so the trees bury test files: fusion ranks those), and with
        ``auto`` not when the router says docs (see docs/evaluation.md)."""
        ranker = self.cfg.search.ranker
        if ranker not in RANKERS:
            raise ConfigError(f"search.ranker must be one of {', '.join(RANKERS)}, got {ranker!r}")
        if ranker == "fusion" or router.asks_about_tests(text):
            return False
        return ranker == "learned" or decision.intent != DOCS_ROUTE

    def _learned_rank(
        self, text: str, decision: RouteDecision, lists: list[RankedList],
        found: exact.ExactMatch, trace: Trace, explain: bool, k: int,
        parts: QueryParts | None = None,
    ) -> list[Candidate] | None:  # fmt: skip
        """The learned ranker's order of the pool; None when it is off or has no model
        (then fusion ranks, after one warning). ``text`` is what the router read (a
        report's focus), ``parts`` the whole query (the ranker's query-shape features)."""
        if not self._learned(decision, text):
            if self.cfg.search.ranker != "fusion":
                trace.note("ranker", "the query asks about tests or docs: fusion ranks it")
            return None
        scfg = self.cfg.search
        settings = (
            scfg.ranker_model,
            scfg.ranker_rrf_weight,
            scfg.ranker_blend_k,
            scfg.ranker_depth,
        )
        if self._ranker is None or self._ranker.settings != settings:
            self._ranker = learned.LearnedStage(*settings)
        weight = scfg.ranker_rrf_weight
        if not (parts is not None and parts.long) and router.is_question(text):
            weight = scfg.ranker_question_rrf_weight
            trace.note("ranker", f"a question: RRF weighs {weight:g} in the blend")
        try:
            return self._ranker.rank(
                self.sources, text, decision, lists, found.pinned, trace,
                k if explain else 0, parts=parts, rrf_weight=weight,
            )  # fmt: skip
        except ModelError as e:
            trace.warn(f"{e}: ranking by fusion")
            return None

    def _code_top(self, decision: RouteDecision) -> int:
        """How many of the first results must hold a code span: ``search.code_in_top``
        when the router's p_code is at least ``code_in_top_p``, else 0; never on a docs
        route the user chose (``--route docs``, ``search.route``)."""
        scfg = self.cfg.search
        if decision.source in ("flag", "config") and decision.intent == DOCS_ROUTE:
            return 0
        return scfg.code_in_top if decision.p_code >= scfg.code_in_top_p else 0

    def candidate_pool(self, query: str, route: str | None = None) -> Pool:
        """The learned ranker's input for ``query``: every candidate with its features
        (`python -m lab train ranker` mines these)."""
        parts = read_query(query, self.cfg.search.max_query_chars)
        text = parts.text
        trace = Trace()
        with self._lock, self._threads.blas():
            self.sources.begin_query(self.cfg)
            self.sources.open()
            found = exact.exact_symbols(self.sources, text, self.cfg.search, trace)
            decision = self._route(parts.focus, route, found.defined, trace)
            decision, found, lists = self._retrieve(
                parts, self.cfg.search.k, decision, found, trace, True
            )
            stage = self._ranker or learned.LearnedStage(self.cfg.search.ranker_model)
            self._ranker = stage
            return stage.pool(self.sources, parts.focus, decision, lists, found.pinned, parts=parts)

    def _route(
        self, text: str, flag: str | None, defined: tuple[str, ...], trace: Trace
    ) -> RouteDecision:
        decision = router.choose_route(text, flag, defined, self.cfg.search, self._tuned.route)
        trace.note(
            "route",
            f"{decision.intent} (p_code {decision.p_code:.2f}, confidence "
            f"{decision.confidence:.2f}, source {decision.source})",
        )
        return decision

    def _hyde(self, spend: budget.Budget | None = None) -> HydeStage | None:
        """The HyDE stage when ``search.hyde`` is on (made once; it keeps a cache), with
        this query's budget (None: no budget, as when mining the ranker's pools)."""
        if not self.cfg.search.hyde:
            return None
        if self._hyde_stage is None:
            from llmc.search.hyde import HydeStage

            self._hyde_stage = HydeStage(self.root, self.cfg)
        self._hyde_stage.begin(spend)
        return self._hyde_stage

    # -- the budget ---------------------------------------------------------------------
    def _with_profile(self, cfg: Config) -> Config:
        """``cfg`` with the profile's stages (computed once per config object)."""
        if self._profiled is None or self._profiled[0] is not cfg:
            self._profiled = (cfg, budget.apply_profile(cfg, self.profile.name))
        return self._profiled[1]

    def _rerank_fits(self) -> bool:
        """Whether a query would run the cross-encoder (asked for, or it fits the budget)."""
        cfg = self.cfg
        if not cfg.search.rerank:
            return False
        spend = budget.Budget(
            cfg.search.budget_ms, time.perf_counter(), self.costs, self.profile.device
        )
        pairs = spend.expect(budget.RERANK_PAIR, cfg.rerank.top_k)
        return spend.allow("rerank", pairs, budget.explicit(cfg, "search.rerank")).run

    def _budget_line(self) -> str:
        limit = self.cfg.search.budget_ms
        shown = f"{limit:,.0f} ms" if limit > 0 else "none (search.budget_ms = 0)"
        return f"{shown} per query; profile {self.profile.reason}"

    def _learn_costs(self, trace: Trace, started: float) -> None:
        """Every stage's time and the total go into the cost model (the gated stages' own
        units were recorded as they ran); the file is written now and then."""
        device = self.profile.device
        for name, ms in trace.timings.items():
            self.costs.observe(device, name, ms)
        self.costs.observe(device, "total", (time.perf_counter() - started) * 1000)
        self.costs.maybe_save()


def _once_ms(trace: Trace) -> float:
    """What this query paid once for the process: opening the index, loading models and,
    in the query that loaded one, its first embedding (a runtime warms up on its first
    call). Not spent from the budget, so a cold `llmc search` decides as a warm daemon."""
    once = trace.timings.get("open", 0.0) + trace.timings.get("load", 0.0)
    return once + (trace.timings.get("embed", 0.0) if "load" in trace.timings else 0.0)


def _profile(cfg: Config) -> Profile:
    from llmc.models.device import machine_profile

    try:
        return machine_profile(cfg.search.profile)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _sqlite_error() -> type[Exception]:
    from llmc.store.sqlite import sqlite_module

    return sqlite_module().Error


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise LlmcError(f"k must be a whole number of results, at least 1 (got {k!r})")
    return min(k, MAX_K)


__all__ = ["Searcher"]
