"""Cross-file resolution: every file's facts → nodes and typed, weighted edges.

The resolver builds the repository tables (:mod:`llmc.graph.tables`), then resolves each
file on its own: its imports, the bases of its classes, its calls and, for docs, its
mentions (:mod:`llmc.graph.mentions`), each name looked up by :class:`Lookup` with the
file's language rules. What cannot be pinned down is, in order: dropped as external (no
definition with that name exists in the repository), resolved by name when exactly one
definition carries it (lower confidence), or kept as a name-only edge to a ``?name`` node.

Lookups are memoised so that answers do not depend on the order files are resolved in
(:mod:`llmc.graph.memo`); each file's edges are recorded apart and merged in file order
(:mod:`llmc.graph.edges`). So an incremental run can resolve only the files a change can
affect and keep the recorded edges of the rest (:mod:`llmc.graph.incremental`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson

from llmc.graph.codec import encode_result, result_from_data
from llmc.graph.edges import EdgeSink, EdgeTable
from llmc.graph.guesses import name_via
from llmc.graph.incremental import PHASES, STATE_VERSION, FileResult, ResolutionState
from llmc.graph.langs import COMMON_METHODS, SPECS, LangSpec, spec_for
from llmc.graph.lookup import Lookup, split_path
from llmc.graph.mentions import record_mentions
from llmc.graph.model import (
    BY_NAME,
    CALLABLE,
    CALLS,
    CLASS_KINDS,
    EXACT,
    IMPORTS,
    INFERRED,
    INHERITS,
    NAME_ONLY,
    RESOLVED_TYPES,
    TYPE_KINDS,
    UNRESOLVED,
    FileFacts,
    node_id,
    scope_chain,
    unresolved_id,
)
from llmc.graph.modules import ModuleIndex
from llmc.graph.output import EncodedEdges, Tracked
from llmc.graph.patch import EdgePatch, patch_tables
from llmc.graph.rules.base import LangRules
from llmc.graph.tables import build_tables, module_signature
from llmc.graph.target import EXT, NODE, PKG, Target, inside

log = logging.getLogger(__name__)

Edges = list[tuple[str, str, str, dict[str, Any]]]
EdgeMap = dict[tuple[str, str, str], dict[str, Any]]


class Resolver(Lookup):
    """Builds nodes and edges for a whole repository from its files' facts."""

    def __init__(
        self,
        facts: dict[str, FileFacts],
        repo_root: Path | None = None,
        name_fallback: bool = True,
        mods: ModuleIndex | None = None,
    ):
        super().__init__()
        self.facts = facts
        self.order = {p: i for i, p in enumerate(facts)}  # files are merged in this order
        self.name_fallback = name_fallback
        self.mods = mods if mods is not None else ModuleIndex(facts, repo_root)
        self.signature = module_signature(facts, self.mods)
        self.generic = LangRules(self)
        self.family_rules: dict[str, LangRules] = {}
        for spec in SPECS.values():
            if spec.family not in self.family_rules:
                self.family_rules[spec.family] = spec.rules(self)
        self.specs: dict[str, LangSpec] = {}
        self.rules: dict[str, LangRules] = {}
        for path, f in facts.items():
            spec = spec_for(path, f.lang) if f.category == "code" else None
            if spec is not None:
                self.specs[path] = spec
                self.rules[path] = self.family_rules[spec.family]
        self.table = EdgeTable({})
        self._candidates: dict[tuple[str, frozenset[str]], list[str]] = {}
        build_tables(self)
        self.table.nodes = self.nodes
        self.results: dict[str, FileResult] = {}
        self.encoded: dict[str, bytes] = {}  # path -> its results as JSON (the facts cache)
        self.files_resolved = 0
        self.edge_patch: EdgePatch | None = None  # kept resolvers: see ``update``
        self.facts_changed: set[str] = set()  # files whose facts the last update replaced
        self.last_resolved: set[str] = set()  # files the last update resolved
        # a one-shot update's previous results, as JSON by path (build._previous_resolver)
        self.cached_results: Mapping[str, bytes] | None = None

    # == run ===============================================================================
    def run(
        self,
        keep_memo: bool = True,
        as_list: bool = True,
        keep_tables: bool = True,
        spill: Callable[[str, FileResult], None] | None = None,
        events: EventStore | None = None,
        reuse: Callable[[str], tuple[FileResult, bytes] | None] | None = None,
        spill_raw: Callable[[str, bytes], None] | None = None,
    ) -> tuple[dict[str, dict[str, Any]], Edges | EdgeMap, dict]:
        """Resolve every file: (nodes, edges as (src, dst, type, attrs), counts by type);
        without ``as_list``, the edges as the table holds them, {(src, dst, type): attrs}.
        Without ``keep_memo`` (nothing resolves again), the memoised lookups are dropped
        before the edges are merged, which then reuse their memory; without
        ``keep_tables``, the facts and lookup tables too (:meth:`drop_tables`). With
        ``spill``, each file's result is handed to it as it is resolved, and only its
        edge events are kept, by phase, each let go of once merged (``self.results`` is
        then left empty: the spill has them); with ``events`` too, they are kept there
        (on disk) instead of in memory. With ``reuse`` (and ``spill``, ``spill_raw``), a
        file whose previous result still holds takes it (:meth:`reuse_from`) instead of
        being resolved again."""
        by_phase: list | None = None
        resolved = list(self.facts)
        if spill is None:
            self.results = {path: self.resolve_file(path, f) for path, f in self.facts.items()}
        else:
            self.results = {}
            by_phase = [[] for _ in PHASES]
            totals: list = []
            if reuse is not None:
                resolved = []
            for path, f in self.facts.items():
                got = reuse(path) if reuse is not None else None
                if got is not None and spill_raw is not None:
                    res = got[0]
                    spill_raw(path, got[1])
                else:
                    res = self.resolve_file(path, f)
                    spill(path, res)
                    if reuse is not None:
                        resolved.append(path)
                if events is not None:
                    events.add(res.phases)
                else:
                    for file_events, into in zip(res.phases, by_phase, strict=True):
                        if file_events:
                            into.append(file_events)
                totals.append(res.counts)
        self.files_resolved = len(resolved)
        self.last_resolved = set(resolved)
        log.debug("graph: %d files resolved; merging their edges", len(resolved))
        tests = self._test_paths()
        if not keep_memo:
            self.drop_memo()
        if not keep_tables:
            self.drop_tables()
        if by_phase is None:
            nodes, counts = self._merge(self.results, tests)
        elif events is not None:
            self._merge_parts(events, tests)
            return self.nodes, events.merged, self._total(totals)
        else:
            nodes, counts = self._merge_phases(by_phase, tests), self._total(totals)
        return nodes, self.edge_list() if as_list else self.table.edges, counts

    def _merge_phases(self, by_phase: list[list], tests: set[str]) -> dict:
        """``_merge`` of every file's events, by phase (as ``_merge`` replays them), each
        file's let go of once replayed: the merged edges grow as the events go."""
        table = self.table
        for phase, files in enumerate(by_phase):
            if PHASES[phase] == "mentions":
                table.add_tests(self._test_source, tests)
            for events in _drain(files):
                table.replay(events)
        return self.nodes

    def _merge_parts(self, events: EventStore, tests: set[str]) -> None:
        """``_merge_phases`` of spilled events, one part of the sources at a time
        (:mod:`llmc.graph.parts`): the placeholders first, then each part's edges merged,
        encoded into ``events.merged`` and let go of."""
        table = self.table
        events.keep_seeds(table.edges)  # the tables' defines edges (kept already, or now)
        for placeholders in events.placeholders():
            table.replay(placeholders)
        for part in range(events.parts):
            table.edges = events.seeds(part)
            for phase in range(len(PHASES)):
                if PHASES[phase] == "mentions":
                    table.add_tests(self._test_source, tests)
                for got in events.part(phase, part):
                    table.replay(got)
            events.merged.add(table.edges)
            table.edges = {}

    def drop_tables(self) -> None:
        """Let go of the facts and every lookup table once each file is resolved, in a
        resolver that resolves nothing again: the merge, the span map and the facts cache
        read the nodes, each file's definitions and the per-file results only (on nine
        large projects the rest is ~0.5 GB)."""
        self.release()
        self.drop_memo()
        self.facts = {}
        self.mods = None  # type: ignore[assignment]
        self.generic = LangRules(None)  # type: ignore[arg-type]
        self.family_rules, self.rules, self.specs = {}, {}, {}
        for name in (
            "impls", "by_name", "by_qual", "members", "bindings", "names", "wild",
            "reexports", "raw_bases", "inherit_entries", "orphans", "inherit_owners",
            "owner_reads",
        ):  # fmt: skip
            setattr(self, name, {})
        _trim()

    def drop_memo(self) -> None:
        """Forget every memoised lookup (answers are the same without: only slower)."""
        self.memo.clear()
        self._candidates.clear()

    def drop_graph(self) -> None:
        """Let go of the merged nodes and edges once written (a resolver that is not
        kept: only its per-file results are still read, for the facts cache), and hand
        the C heap's free pages back: while the cache is written, the indexer goes on
        beside this process (the graph's worker) with its next steps."""
        self.nodes = self.table.nodes = {}
        self.table.edges = {}
        _trim()

    @property
    def state(self) -> ResolutionState:
        """What the next run needs to reuse this one's per-file results."""
        return ResolutionState(STATE_VERSION, self.name_fallback, self.signature, self.results)

    def encoded_results(self, paths, prune: bool = False) -> dict[str, bytes]:
        """These files' results as JSON (encoded once per resolution of the file, then
        kept); with ``prune``, the encodings of files no longer resolved are dropped."""
        blobs = self.encoded
        results = self.results
        for path in paths:
            if path not in blobs:
                blobs[path] = encode_result(results[path])
        if prune and len(blobs) != len(results):
            for path in set(blobs) - set(results):
                del blobs[path]
        return {p: blobs[p] for p in paths}

    def iter_encoded(self, paths) -> Iterator[tuple[str, bytes]]:
        """``encoded_results(paths)`` as (path, JSON) pairs made one at a time, keeping
        nothing it encodes: for a cold run, whose resolver is released once the facts
        cache is written, so the cache's results are never all in memory at once."""
        blobs, results = self.encoded, self.results
        for path in paths:
            blob = blobs.get(path)
            yield path, blob if blob is not None else encode_result(results[path])

    def state_header(self) -> dict[str, Any]:
        """What this resolver's results were resolved under, as the facts cache writes it
        (the data of :attr:`state` but its per-file results)."""
        return {
            "version": STATE_VERSION,
            "name_fallback": self.name_fallback,
            "signature": self.signature,
        }

    def reusable(self, state: ResolutionState | None, name_fallback: bool) -> bool:
        """Whether ``state`` (this resolver's own, or one read back) was resolved under the
        same settings and module layout as this resolver's files."""
        return (
            isinstance(state, ResolutionState)
            and state.version == STATE_VERSION
            and state.name_fallback == name_fallback == self.name_fallback
            and state.signature == self.signature
            and set(state.files) == set(self.facts)
        )

    def update(
        self, facts: dict[str, FileFacts], keep_edges: bool, keep_memo: bool = True
    ) -> tuple[dict[str, dict[str, Any]], dict]:
        """Bring this resolver (its tables, results and, with ``keep_edges``, merged
        edges, all of the previous run) to ``facts``: the same files, some of them with
        new facts. Patches the tables (:mod:`llmc.graph.patch`), resolves again the
        files that changed or read a changed entry, and merges their edges again.
        Returns (nodes, counts by type); the edges are in ``self.table.edges``, and a
        kept resolver's nodes and edges remember which ids and keys changed
        (:class:`~llmc.graph.output.Tracked`)."""
        if keep_edges and not isinstance(self.nodes, Tracked):
            self.nodes = self.table.nodes = Tracked(self.nodes)
            self.table.edges = Tracked(self.table.edges)
        delta = {p: f for p, f in facts.items() if f is not self.facts[p]}
        self.facts_changed = set(delta)
        tests_flag = any(f.test != self.facts[p].test for p, f in delta.items())
        keys = patch_tables(self, delta) if delta else set()  # and invalidates the memo
        names = {k[1] for k in keys if k[0] == "name"}
        for ck in [ck for ck in self._candidates if ck[0] in names]:
            del self._candidates[ck]
        todo = set(delta)
        todo.update(p for p, res in self.results.items() if not res.reads.isdisjoint(keys))
        log.debug("graph: %d table entries changed; resolving %d files", len(keys), len(todo))
        new = {p: self.resolve_file(p, self.facts[p]) for p in sorted(todo, key=self.order.get)}
        self.files_resolved = len(new)
        self.last_resolved = set(new)
        for p in new:
            self.encoded.pop(p, None)
        if not keep_memo:
            self.drop_memo()
        if not keep_edges:
            self.results.update(new)
            return self._merge(self.results)
        if self.edge_patch is None:
            self.edge_patch = EdgePatch(self, self.results)
        old = {p: self.results[p] for p in new}
        self.results.update(new)
        self.edge_patch.apply(self, old, new, tests_flag)
        return self.nodes, self._counts(self.results)

    def reuse_from(
        self, facts: dict[str, FileFacts], cached: Mapping[str, bytes]
    ) -> Callable[[str], tuple[FileResult, bytes] | None]:
        """Patch this resolver's tables to ``facts`` (the same files, some with new facts)
        for a :meth:`run` that reuses the previous results (``cached``: each file's as
        JSON, decoded when the run reaches it): what :meth:`update` resolves again is
        resolved again; every other file takes its result as it was, and no file's result
        is held past its own turn (a one-shot run's update, merged part by part as a cold
        build's: ~6 GB at 100k files held whole)."""
        delta = {p: f for p, f in facts.items() if f is not self.facts[p]}
        self.facts_changed = set(delta)
        keys = patch_tables(self, delta) if delta else set()
        self._candidates.clear()

        def reuse(path: str) -> tuple[FileResult, bytes] | None:
            raw = cached.get(path) if path not in delta else None
            if raw is None:
                return None
            try:
                res = result_from_data(orjson.loads(raw))
            except ValueError:
                return None
            if res is None or not res.reads.isdisjoint(keys):
                return None
            return res, raw

        return reuse

    def release(self) -> None:
        """Drop the language rules' references back to this resolver. Without that cycle,
        its tables (millions of small records) are freed by reference counting as soon as
        it goes, not by a cyclic GC pass over all of them (~1 s for 1,000 files)."""
        for rules in (self.generic, *self.family_rules.values()):
            rules.r = None  # type: ignore[assignment]

    def _test_paths(self) -> set[str]:
        """The files with tests: test files, and files that define a test."""
        return {p for p, f in self.facts.items() if f.test or any(d.test for d in f.defs)}

    def _merge(
        self, results: dict[str, FileResult], tests: set[str] | None = None
    ) -> tuple[dict, dict]:
        table = self.table
        for phase in range(len(PHASES)):
            if PHASES[phase] == "mentions":
                table.add_tests(self._test_source, self._test_paths() if tests is None else tests)
            for res in results.values():
                table.replay(res.phases[phase])
        return self.nodes, self._counts(results)

    def edge_list(self) -> Edges:
        return [(s, d, t, attrs) for (s, d, t), attrs in self.table.edges.items()]

    def _counts(self, results: dict[str, FileResult]) -> dict:
        return self._total(res.counts for res in results.values())

    def _total(self, per_file) -> dict:
        """The resolution counts by edge type of these files' counts."""
        totals = {t: {"resolved": 0, "unresolved": 0, "external": 0} for t in RESOLVED_TYPES}
        for file_counts in per_file:
            for (etype, status), n in file_counts:
                totals[etype][status] += n
        counts = {}
        for etype, c in totals.items():
            done = c["resolved"] + c["unresolved"]
            counts[etype] = dict(c, rate=round(c["resolved"] / done, 4) if done else 1.0)
        return counts

    def resolve_file(self, path: str, f: FileFacts) -> FileResult:
        """One file's edges and counts, with the table entries they were read from."""
        self.memo.reads = set()
        counts: Counter = Counter()
        sinks = [EdgeSink(counts) for _ in PHASES]
        rules = self.rules.get(path)
        if rules is not None:
            for imp in f.imports:
                try:
                    rules.record_import(path, imp, sinks[0])
                except RecursionError:
                    sinks[0].count(IMPORTS, "unresolved")
            self._inheritance(path, sinks[1])
            self._calls(path, f, rules, sinks[2])
        record_mentions(self, path, f, sinks[3])
        return FileResult(
            tuple(tuple(s.events) for s in sinks),
            tuple(sorted(counts.items())),
            frozenset(self.memo.reads),
        )

    # == edges of one file =================================================================
    def count_import(self, path: str, mod: Target | None, line: int, out: EdgeSink) -> None:
        if mod is None:
            out.count(IMPORTS, "unresolved")
        elif mod is EXT:
            out.count(IMPORTS, "external")
        else:
            out.count(IMPORTS, "resolved")
            if mod.kind == NODE:
                n = self.node_attrs(mod.id)
                target = n["path"] if n is not None else mod.id
                out.edge(path, target, IMPORTS, EXACT, line)
                if target != mod.id:
                    out.edge(path, mod.id, IMPORTS, EXACT, line, "symbol")
            elif mod.kind == PKG:
                for p in self.rules_for_family(mod.lang).package_files(mod.id):
                    out.edge(path, p, IMPORTS, EXACT, line, "package")

    def _inheritance(self, path: str, out: EdgeSink) -> None:
        self.read(("inherits", path))  # owners were looked up when the tables were built
        for owner, i, base, line in self.inherit_entries.get(path, ()):
            targets = self.base_targets(owner)
            if i >= len(targets):
                continue
            t = targets[i][0]
            if inside(t) and t.id != owner:
                out.edge(owner, t.id, INHERITS, EXACT, line)
                out.count(INHERITS, "resolved")
                continue
            if t is EXT:
                out.count(INHERITS, "external")
                continue
            status, target = self._fallback(base.rsplit(".", 1)[-1], TYPE_KINDS, True, out)
            out.count(INHERITS, status)
            if target and target != owner:
                conf = BY_NAME if status == "resolved" else NAME_ONLY
                out.edge(owner, target, INHERITS, conf, line, "name")

    def _calls(self, path: str, f: FileFacts, rules: LangRules, out: EdgeSink) -> None:
        self_names = self.specs[path].self_names
        # A third of the calls repeat one in the same scope (self.f(), log.debug()): a
        # lookup answers the same in any order (memo.py), and its reads are this file's
        # already, so each (scope, name, receiver) and each scope is looked up once.
        targets: dict[tuple[str, str, str], tuple[Target | None, bool]] = {}
        sources: dict[str, str] = {}
        for c in f.calls:
            key = (c.scope, c.name, c.receiver)
            hit = targets.get(key)
            if hit is None:
                self.memo.inferred = False
                try:
                    t = self.call_target(path, c.scope, c.name, c.receiver)
                except RecursionError:
                    t = None
                hit = targets[key] = (t, self.memo.inferred)
            t, inferred = hit
            src = sources.get(c.scope)
            if src is None:
                src = sources[c.scope] = self.scope_node(path, c.scope)
            via = "new" if c.new else ("self" if c.receiver in self_names else "")
            if inside(t) and t.kind == NODE:
                if self.kind(t.id) in CLASS_KINDS and not c.new:
                    via = "new"
                conf = INFERRED if inferred else EXACT
                out.edge(src, t.id, CALLS, conf, c.line, via)
                out.count(CALLS, "resolved")
                continue
            if t is EXT or (c.name.startswith("__") and c.name.endswith("__")):
                out.count(CALLS, "external")  # dunder protocol calls: object's
                continue
            kinds = TYPE_KINDS if c.new else CALLABLE
            guessable = c.name not in COMMON_METHODS
            status, target = self._fallback(c.name, kinds, guessable, out)
            out.count(CALLS, status)
            if status == "resolved":
                out.edge(src, target, CALLS, BY_NAME, c.line, "name")
            elif status == "unresolved":
                out.edge(src, target, CALLS, NAME_ONLY, c.line, name_via(c.receiver))

    def _fallback(
        self, name: str, kinds: frozenset[str], guessable: bool, out: EdgeSink
    ) -> tuple[str, str]:
        """("external" | "resolved" | "unresolved", node id) for a name we could not place."""
        named = self.named(name)  # records the read even when the answer is known
        cands = self._candidates.get((name, kinds))
        if cands is None:  # common names (get, run, __init__) have hundreds of definitions
            cands = [c for c in named if self.nodes[c]["kind"] in kinds]
            self._candidates[(name, kinds)] = cands
        if not cands:
            return "external", ""
        if self.name_fallback and guessable and len(cands) == 1:
            return "resolved", cands[0]
        uid = unresolved_id(name)
        out.unresolved(uid, name, len(cands))
        return "unresolved", uid

    def _test_source(self, nid: str) -> str | None:
        """The test that a reference from ``nid`` belongs to: the nearest enclosing test
        definition, else the file when it is a test file, else None."""
        n = self.nodes.get(nid)
        if n is None or n["kind"] == UNRESOLVED:
            return None
        path = n["path"]
        for s in scope_chain(n.get("qualname", "")):
            d = self.defs[path].get(s) if s else None
            if d is not None and d.test:
                return node_id(path, s)
        return path if self.nodes[path].get("test") else None


class EventStore(Protocol):
    """Where a cold run keeps each file's edge events until they are merged, part by part
    of the sources, and the merged edges until they are written
    (:class:`llmc.graph.parts.PartSpill`)."""

    merged: EncodedEdges

    def add(self, phases: tuple) -> None: ...

    parts: int

    def keep_seeds(self, edges: dict) -> None: ...
    def seeds(self, part: int) -> dict: ...
    def placeholders(self) -> Iterator[list[tuple]]: ...
    def part(self, phase: int, part: int) -> Iterator[list[tuple]]: ...


def _drain(files: Iterable) -> Iterator:
    """The items of ``files`` in order; a list is emptied as they go."""
    if isinstance(files, list):
        files.reverse()
        while files:
            yield files.pop()
    else:
        yield from files


def _trim() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``): what
    Python frees is otherwise kept for reuse, and the records just let go of are made
    again in other sizes."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


__all__ = ["Resolver", "split_path"]
