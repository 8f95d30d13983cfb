"""Build and incrementally update ``.llmc/rag_graph.json`` after an index run.

Steps: per-file facts (re-extracted only for changed files, by the indexer's chunk workers
from the parse they chunked, see :mod:`llmc.graph.facts`, or here from disk when no worker
saw the file; the rest come from ``.llmc/graph_facts.jsonl``, a cache of each file's
facts keyed by its content hash in the store, see :mod:`llmc.graph.cache`) →
cross-file resolution (only of the files a change can affect, see
:mod:`llmc.graph.incremental`; the other files' edges come from the same cache) →
node ↔ span mapping (:mod:`llmc.graph.spanmap`) → node-link JSON written atomically
(:mod:`llmc.graph.output`). This module only orders the steps: which files to extract,
which resolver to reuse (the daemon's kept one, one rebuilt from the cache, or none), what
to write.

The store is the source of truth: a missing, corrupt or stale graph or cache is rebuilt
from ``store.files()``, and every cached entry is checked against the store's content hash,
so a crash between any two writes is repaired by the next run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.graph import cache as facts_cache
from llmc.graph import finish, spanmap, warm
from llmc.graph.atomic import write_atomic
from llmc.graph.gather import facts_as_json, gather_facts
from llmc.graph.incremental import PHASES
from llmc.graph.model import (
    CALLS,
    DEFINES,
    FACTS_FILE,
    FACTS_VERSION,
    GRAPH_FILE,
    IMPORTS,
    INHERITS,
    MENTIONS,
    TESTS,
    FileFacts,
    GraphStats,
)
from llmc.graph.modules import ModuleIndex
from llmc.graph.output import (
    EncodedEdges,
    NodeLink,
    graph_attrs,
    header_of,
    read_head_only,
    read_header,
    read_json,
    to_node_link,
    write_node_link,
)
from llmc.graph.parts import PartSpill, part_bounds, spill_paths
from llmc.graph.resolve import Resolver
from llmc.graph.tables import module_signature

if TYPE_CHECKING:
    from llmc.config import GraphConfig
    from llmc.store.db import Store

log = logging.getLogger(__name__)

# Bump when resolution changes what it produces from the same facts: a no-op update then
# resolves again instead of reusing the previous graph.
RESOLVER_VERSION = 3  # 3: a name-only call keeps its receiver's word (graph/guesses.py)
# The order edge types first appear in one merged table (the tables' defines, then the
# phases' types, tests before mentions): ``Counter.most_common``'s order among ties.
TYPES_FIRST_SEEN = (DEFINES, IMPORTS, INHERITS, CALLS, TESTS, MENTIONS)


def graph_path(repo_root: Path) -> Path:
    return Path(repo_root) / ".llmc" / GRAPH_FILE


def update_graph(
    repo_root: Path,
    store: Store,
    changed: list[str],
    removed: list[str],
    generation: int,
    cfg: GraphConfig | None = None,
    facts: Mapping[str, bytes] | None = None,
    on_written: Callable[[GraphStats], None] | None = None,
) -> GraphStats:
    """Bring the graph up to date with the store after an index run (writer lock held).

    ``changed`` files take their facts (JSON, :mod:`llmc.graph.codec`) from ``facts`` (what
    the chunk workers extracted from the text the store now holds), else are re-extracted
    from disk; other files reuse cached facts when the store's content hash still matches; ``removed``
    files drop out. Returns what was done; ``on_written`` is called with the same as soon
    as ``rag_graph.json`` is written (the facts cache follows).
    """
    args = (repo_root, store, changed, removed, generation, cfg, facts or {}, on_written)
    with _gc_paused():
        try:
            stats = _update(*args)
        except _DATA_ERRORS as e:
            # The cache checks every record's shape and types (llmc.graph.codec), not what
            # a forged one means: one that still trips resolution is dropped, not obeyed.
            if not _drop_cache(Path(repo_root) / ".llmc"):
                raise
            log.warning("graph: rebuilding without the facts cache, which failed (%r)", e)
            stats = _update(*args)
        finally:
            warm.suspend_here(False)
            for p in spill_paths(Path(repo_root) / ".llmc", os.getpid()):
                with contextlib.suppress(OSError):  # a failed build's spilled results
                    p.unlink()
        warm.settle()  # a kept state: out of the collector's way
        return stats


# What data the cache's checks let through could raise while it is resolved.
_DATA_ERRORS = (LookupError, TypeError, ValueError, AttributeError, RecursionError)


def _drop_cache(llmc_dir: Path) -> bool:
    """Delete the facts cache and its journal; False when there was none to blame."""
    warm.forget(llmc_dir)
    dropped = False
    facts_file = llmc_dir / FACTS_FILE
    for p in (facts_file, facts_cache.journal(facts_file)):
        try:
            p.unlink()
            dropped = True
        except OSError:
            pass
    return dropped


def update_graph_in(
    repo_root: Path,
    changed: list[str],
    removed: list[str],
    generation: int,
    cfg: GraphConfig | None = None,
    facts: Mapping[str, bytes] | None = None,
    on_written: Callable[[GraphStats], None] | None = None,
) -> GraphStats:
    """``update_graph`` on the committed store at ``repo_root``, opened read-only here (a
    chunk worker's side: ``llmc.graph.early``)."""
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(repo_root), readonly=True)
    try:
        return update_graph(repo_root, store, changed, removed, generation, cfg, facts, on_written)
    finally:
        store.close()


def _update(
    repo_root: Path,
    store: Store,
    changed: list[str],
    removed: list[str],
    generation: int,
    cfg: GraphConfig | None,
    given: Mapping[str, bytes],
    on_written: Callable[[GraphStats], None] | None = None,
) -> GraphStats:
    started = time.perf_counter()
    repo_root = Path(repo_root)
    cfg = cfg if cfg is not None else _config_of(repo_root)
    if not cfg.enabled:
        log.debug("graph disabled in config; not updated")
        return GraphStats(generation=generation)
    llmc_dir = repo_root / ".llmc"
    llmc_dir.mkdir(parents=True, exist_ok=True)
    graph_file, facts_file = llmc_dir / GRAPH_FILE, llmc_dir / FACTS_FILE
    files = (graph_file, facts_file, facts_cache.journal(facts_file))
    kept, previous, header, cache, rebuilt = _load_state(llmc_dir, files, store, cfg, generation)
    records = store.files()
    changed_set = set(changed) - set(removed)
    settings = {"resolver": RESOLVER_VERSION, "name_fallback": cfg.name_fallback}
    unchanged = not rebuilt and not changed_set and header.get("settings") == settings
    unchanged = unchanged and _same_files(records, cache.get("files", {}))
    stats = _written_for(header, graph_file, generation) if unchanged else None
    if stats is not None:
        return _not_rewritten(stats, len(records), started, kept, llmc_dir, files, on_written)
    if not unchanged:
        previous = None
    elif previous is None:
        previous = read_json(graph_file)
        unchanged = header_of(previous) is not None
    output: NodeLink | None = None  # a kept resolver's encoded pieces, patched
    resolver: Resolver | None = None
    span_nodes_of: dict[str, dict[str, str]] | None = None  # a kept state's span map
    if unchanged:  # nothing to extract or resolve: refresh span ids and the generation
        nodes, edges, counts = _as_written(previous, header)
        previous = None
        token = cache["token"]
        extracted = failed = resolved = 0
        reused = len(records)
        spans_by_path = spanmap.read_span_rows(store)
    else:
        got, records, spans_by_path = _gather(
            repo_root, store, records, changed_set, cache, given, cfg
        )
        extracted, reused, failed = got.extracted, got.reused, got.failed
        resolver, keep_edges, nodes, edges, counts, output, spill = _resolve(
            repo_root, cfg, got, None if rebuilt else kept, None if rebuilt else cache, llmc_dir
        )
        if kept is not None and kept.resolver not in (None, resolver):
            kept.resolver.release()  # not patched: let reference counting free it
        resolved, token, prev_token = resolver.files_resolved, uuid.uuid4().hex, cache.get("token")
        cache = {"version": FACTS_VERSION, "token": token, "files": got.entries}
    if output is not None:  # a patched resolver: only the changed files' spans and pieces
        span_nodes_of = kept.span_nodes  # type: ignore[union-attr]
        span_nodes, (n_nodes, n_edges, by_kind, by_type) = finish.map_patched(
            store, nodes, resolver, output, changed_set, span_nodes_of,  # type: ignore[arg-type]
        )  # fmt: skip
    else:
        span_nodes, (n_nodes, n_edges, by_kind, by_type), spans_by_path = finish.map_whole(
            store, nodes, edges, resolver, spans_by_path, TYPES_FIRST_SEEN
        )

    seconds = time.perf_counter() - started
    stats = GraphStats(
        generation=generation, nodes=n_nodes, edges=n_edges, nodes_by_kind=by_kind,
        edges_by_type=by_type, resolution=counts, files=len(records), rebuilt=rebuilt,
        files_extracted=extracted, files_cached=reused, files_failed=failed,
        files_resolved=resolved, seconds=round(seconds, 4),
    )  # fmt: skip
    meta = {"facts_token": token, "settings": settings, "span_nodes": span_nodes}
    header = _write_graph(graph_file, output, nodes, edges, stats, meta)
    if output is None and not warm.enabled():  # written: the cache needs the resolution only
        del nodes, edges, span_nodes, meta
        nodes = span_nodes = None  # type: ignore[assignment]
        header = {}  # (its span map: not kept either)
        if resolver is not None:
            resolver.drop_graph()
    log.debug("graph: %s written; the facts cache next", graph_file.name)
    if on_written is not None:
        on_written(stats)
    if not unchanged:
        # The facts cache after the graph, so that the graph answers before the cache is
        # written (``on_written``)
        finish.keep_state(
            llmc_dir, files, header=header, cache=cache, prev_token=prev_token,
            keep_edges=keep_edges, got=got, resolver=resolver, spill=spill, records=records,
            graph=(nodes, output, span_nodes, span_nodes_of, spans_by_path),
        )  # fmt: skip
    elif kept is not None:  # the facts file is as it was; the cache and resolution too
        warm.keep(llmc_dir, files, header, kept.cache, kept.resolver)
    log.info(
        "graph: %d nodes, %d edges (%d files re-extracted, %d cached) in %.2fs",
        stats.nodes, stats.edges, extracted, reused, seconds,
    )  # fmt: skip
    return stats


def _config_of(repo_root: Path) -> GraphConfig:
    from llmc.config import load_config

    return load_config(repo_root).graph


def _as_written(previous: Any, header: dict[str, Any]) -> tuple[dict, dict, dict]:
    """A graph file read back as the nodes, edges and resolution counts it was written
    with (an update that changes nothing but span ids and the generation)."""
    nodes = {n.pop("id"): n for n in previous["nodes"]}
    edges = {(e.pop("source"), e.pop("target"), e.pop("key")): e for e in previous["edges"]}
    for e in edges.values():
        e.pop("type", None)
    return nodes, edges, header.get("stats", {}).get("resolution", {})


def _write_graph(
    graph_file: Path, output: NodeLink | None, nodes: Any, edges: Any, stats: GraphStats,
    meta: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """Write the graph file (a kept state's patched pieces, or the whole node-link
    document); its header."""
    if output is not None:
        header = graph_attrs(stats.generation, stats, meta)
        write_atomic(graph_file, output.render(header))
        return header
    header = write_node_link(graph_file, nodes, edges, stats.generation, stats, meta)
    if isinstance(edges, EncodedEdges):
        edges.remove()
    return header


def _load_state(
    llmc_dir: Path, files: tuple[Path, Path, Path], store: Store, cfg: GraphConfig,
    generation: int,
) -> tuple[warm.WarmGraph | None, Any, dict[str, Any] | None, dict[str, Any], bool]:  # fmt: skip
    """What the previous update left: the state this process kept (when it wrote both
    files last), else the graph file's header (read whole when not laid out as written
    here) and the facts cache; and whether the graph must be rebuilt from all files
    (missing, corrupt, or another generation's). ``(kept, previous, header, cache,
    rebuilt)``."""
    graph_file, facts_file, journal = files
    facts_cache.remove_legacy(llmc_dir)  # old pickles go unread, kept state or not
    if warm.enabled() and _over_warm_limit(store, cfg.warm_max_files):
        warm.forget(llmc_dir)
        warm.suspend_here()  # a one-shot update, in bounded memory (until update_graph returns)
    kept = warm.take(llmc_dir, graph_file, facts_file, journal)
    previous = None
    if kept is not None:  # this process wrote both files last: its state is theirs
        header, cache = kept.header, kept.cache
    else:
        # the attributes only: the nodes and edges are read when a no-op update reuses them
        header = read_head_only(graph_file)
        if header is None:  # not laid out as written here: read whole
            previous = read_json(graph_file)
            header = header_of(previous)
        cache = facts_cache.load(facts_file)
    rebuilt = (
        header is None
        or not cache.get("token")
        or header.get("facts_token") != cache.get("token")
        or int(header.get("generation") or 0) > generation
    )
    if rebuilt:
        log.info("graph: missing, corrupt or stale; rebuilding from all indexed files")
    return kept, previous, header, cache, rebuilt


def _same_files(records: Mapping[str, Any], cached_files: Mapping[str, Any]) -> bool:
    """The facts cache holds every indexed file, each at its content hash."""
    return set(records) == set(cached_files) and all(
        r.content_hash and cached_files[p].get("hash") == r.content_hash for p, r in records.items()
    )


def _not_rewritten(
    stats: GraphStats, n_files: int, started: float, kept: warm.WarmGraph | None,
    llmc_dir: Path, files: tuple[Path, Path, Path],
    on_written: Callable[[GraphStats], None] | None,
) -> GraphStats:  # fmt: skip
    """The graph was written for this very store (a no-op run): nothing to read or
    write. Reading the graph back to write it again held it whole (~8 GB at 100k files)."""
    stats = dataclasses.replace(
        stats,
        files=n_files,
        files_extracted=0,
        files_cached=n_files,
        files_failed=0,
        files_resolved=0,
        rebuilt=False,
        seconds=round(time.perf_counter() - started, 4),
    )
    if kept is not None:  # as it was taken
        warm.keep(
            llmc_dir, files, kept.header, kept.cache, kept.resolver, kept.output,
            kept.span_nodes,
        )  # fmt: skip
    if on_written is not None:
        on_written(stats)
    log.debug("graph: up to date with generation %d; not rewritten", stats.generation)
    return stats


def _gather(
    repo_root: Path, store: Store, records: dict[str, Any], changed: set[str],
    cache: dict[str, Any], given: Mapping[str, bytes], cfg: GraphConfig,
) -> tuple[Any, dict[str, Any], Any]:  # fmt: skip
    """Every indexed file's facts (``gather_facts``), the records as the rest of the
    update needs them (their paths only when no state is kept) and the span rows the
    gather read (None when it read none)."""
    facts_cache.load_facts(cache, keep_raw=warm.enabled())
    got = gather_facts(repo_root, store, records, changed, cache.get("files", {}), given, cfg)
    if not warm.enabled():  # (their paths are the facts'; a kept state's pieces ask)
        records = dict.fromkeys(records, None)  # type: ignore[assignment]
    spans_by_path, got.spans_by_path = got.spans_by_path, None
    return got, records, spans_by_path


def _resolve(
    repo_root: Path, cfg: GraphConfig, got: Any, kept: warm.WarmGraph | None,
    cache: dict[str, Any] | None, llmc_dir: Path,
) -> tuple[Resolver, bool, Any, Any, Any, NodeLink | None, Any]:  # fmt: skip
    """Resolve ``got``'s facts: by patching the previous resolver (kept, or rebuilt from
    the cache) or from scratch; a one-shot build spills its results and edge events to
    disk as it goes. ``(resolver, keep_edges, nodes, edges, counts, output, spill)``:
    ``output`` the kept pieces to patch (``edges`` None then), ``spill`` the results a
    cold build left on disk for the facts cache."""
    facts = got.facts
    got.facts = {}
    resolver, keep_edges, mods = _previous_resolver(repo_root, cfg, facts, kept, cache)
    n_facts = len(facts)
    reuse = None  # a one-shot update's previous results: reused as its run reaches them
    whole = resolver is None or resolver.cached_results is not None  # cold or one-shot
    if resolver is None:
        resolver = Resolver(facts, repo_root, cfg.name_fallback, mods=mods)
    elif resolver.cached_results is not None:
        reuse = resolver.reuse_from(facts, resolver.cached_results)
        resolver.cached_results = None
    output = spill = edges = None
    if whole:
        keep = warm.enabled()
        events: PartSpill | None = None  # a cold build's edge events, until merged
        if not keep:  # the resolver holds the facts alone, and lets go of them once used
            del facts, mods
            facts_as_json(got.entries)
            facts_cache.remove_stale_spills(llmc_dir)
            spill = facts_cache.ResultSpill(llmc_dir / FACTS_FILE)  # the results, for the cache
            bounds = part_bounds(resolver.facts)  # theirs, to merge part by part
            events = PartSpill(llmc_dir, len(PHASES), bounds)
            events.keep_seeds(resolver.table.edges)  # on disk while files resolve
        try:
            nodes, edges, counts = resolver.run(
                keep_memo=keep,
                as_list=False,
                keep_tables=keep,
                spill=None if spill is None else spill.add,
                events=events,
                reuse=reuse,
                spill_raw=None if spill is None else spill.add_raw,
            )
        finally:
            if events is not None:
                events.remove()
    else:
        nodes, counts = resolver.update(facts, keep_edges, keep_memo=warm.enabled())
        if keep_edges and kept is not None and kept.output is not None:
            output = kept.output
        else:
            edges = resolver.table.edges
    log.debug("graph: resolved %d of %d files", resolver.files_resolved, n_facts)
    return resolver, keep_edges, nodes, edges, counts, output, spill


def _over_warm_limit(store: Store, limit: int) -> bool:
    """Whether the store indexes more files than a kept state is allowed for."""
    from llmc.store.db import Store

    if not isinstance(store, Store):  # (a pending store: in a worker, which keeps nothing)
        return False
    from llmc.store.sqlite import database_error

    try:
        return int(store.conn.execute("SELECT count(*) FROM files").fetchone()[0]) > limit
    except Exception as e:  # the update itself reads the store next, and says what failed
        if not database_error(e):
            raise
        return False


def _written_for(header: dict[str, Any], graph_file: Path, generation: int) -> GraphStats | None:
    """The stats ``graph_file`` (its header read) was written with, when it was written
    for ``generation`` and ends as written; else None. The store's generation moves
    before any write and the graph is written after its store's commit: the same
    generation is the same spans."""
    try:
        if int(header.get("generation") or 0) != generation or generation <= 0:
            return None
        stats = GraphStats.from_json(header["stats"])
        if not all(type(v) is int for v in (stats.nodes, stats.edges, stats.generation)):
            return None
        with open(graph_file, "rb") as fh:
            fh.seek(-2, os.SEEK_END)
            return stats if fh.read(2) == b"]}" else None
    except (OSError, LookupError, TypeError, ValueError):
        return None


def _previous_resolver(
    repo_root: Path,
    cfg: GraphConfig,
    facts: dict[str, FileFacts],
    kept: warm.WarmGraph | None,
    cache: dict[str, Any] | None,
) -> tuple[Resolver | None, bool, ModuleIndex]:
    """The previous run's resolver, to be brought up to ``facts`` by patching it, and
    whether its merged edges can be patched too: the one kept in memory (the daemon), else
    one rebuilt from the cached facts and per-file results (its tables only); None when
    there is none, or the file list, package layout or settings changed (resolve all).
    The module index of ``facts`` comes with it."""

    mods = ModuleIndex(facts, repo_root)
    signature = module_signature(facts, mods)
    if kept is not None and kept.resolver is not None:
        r = kept.resolver
        if r.reusable(r.state, cfg.name_fallback) and r.signature == signature:
            r.mods.facts = r.facts  # the same layout: its memoised imports hold
            return r, True, r.mods
        return None, False, mods
    # A one-shot run reads each file's previous result when its run reaches the file
    # (Resolver.reuse_from), rather than hold them all (~6 GB of records at 100k files);
    # a kept state decodes them all now, to keep, with their JSON for its next write.
    if cache is None:
        return None, False, mods
    loaded = facts_cache.load_state(cache) if warm.enabled() else facts_cache.state_lines(cache)
    if loaded is None:
        return None, False, mods
    state, encoded = loaded
    if state.signature != signature or set(state.files) != set(facts):
        return None, False, mods
    files = cache.get("files", {}) if cache is not None else {}
    old = {p: (files.get(p) or {}).get("facts") for p in facts}
    if not all(isinstance(f, FileFacts) for f in old.values()):
        return None, False, mods
    r = Resolver(old, repo_root, cfg.name_fallback, mods=mods)
    if not r.reusable(state, cfg.name_fallback):
        r.release()
        return None, False, mods
    if warm.enabled():
        r.results = dict(state.files)
        r.encoded.update(encoded)  # written again as read, unless resolved again
    else:
        r.cached_results = encoded  # each file's result as JSON, read when reached
    return r, False, mods


@contextlib.contextmanager
def _gc_paused():
    """A build makes and decodes ~100k small, acyclic records; cyclic GC passes over
    them cost ~40% of its time and free nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["graph_path", "read_header", "to_node_link", "update_graph", "update_graph_in"]
