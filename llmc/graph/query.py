"""Read side of the graph: load ``rag_graph.json`` (cached in-process) and answer questions.

``load_graph(repo_root)`` returns a :class:`RepoGraph`, cached per (path, mtime, size) so
repeated queries in one process (the daemon, an eval run) pay for the JSON once. The search
pipeline uses ``neighbors``, ``degree``, ``pagerank`` and ``node_for_span``; the CLI uses
``resolve``, ``where_used``, ``deps`` and ``summary``.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import logging
import os
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from llmc.errors import (
    AmbiguousSymbolError,
    GraphMissingError,
    LlmcError,
    SymbolNotFoundError,
)
from llmc.graph.guesses import NAME_VIA, RECEIVER_NAMED, named_like, receiver_of
from llmc.graph.model import (
    CALLS,
    CLASS_KINDS,
    DEFINES,
    FILE,
    GRAPH_FILE,
    IMPORTS,
    INHERITS,
    MENTIONS,
    SCHEMA,
    SCHEMA_VERSION,
    SECTION,
    TESTS,
    UNRESOLVED,
    GraphStats,
    unresolved_id,
)
from llmc.graph.rank import DEPENDENCY_TYPES, pagerank
from llmc.graph.records import Dep, Edge, NodeInfo, Ref, Usage

if TYPE_CHECKING:
    import networkx as nx

    from llmc.store.db import Store
    from llmc.types import StoredSpan

log = logging.getLogger(__name__)

DIRECTIONS = ("out", "in", "both")


GUESSES_UP_TO = 0.5  # the default threshold: above it, where_used lists no name-only guess


class RepoGraph:
    """A loaded graph and the questions search and the CLI ask of it."""

    def __init__(self, graph: nx.MultiDiGraph, path: Path | None = None):
        self.g = graph
        self.path = path
        self.meta: dict[str, Any] = dict(graph.graph)
        self._lock = threading.Lock()
        self._span_map: dict[int, str] | None = None
        self._by_path: dict[str, list[tuple[int, int, str]]] | None = None
        self._names: dict[str, dict[str, list[str]]] | None = None

    # -- basics -------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return int(self.meta.get("generation", 0))

    @property
    def stats(self) -> GraphStats:
        return GraphStats.from_json(self.meta.get("stats", {}))

    def __contains__(self, node: str) -> bool:
        return node in self.g

    def node(self, node: str) -> NodeInfo:
        if node not in self.g:
            raise SymbolNotFoundError(f"no node {node!r} in the graph")
        a = self.g.nodes[node]
        return NodeInfo(
            id=node,
            kind=a.get("kind", ""),
            name=a.get("name", node),
            path=a.get("path", ""),
            qualname=a.get("qualname", ""),
            lang=a.get("lang", ""),
            start_line=int(a.get("start_line", 0)),
            end_line=int(a.get("end_line", 0)),
            span_id=a.get("span_id"),
            test=bool(a.get("test", False)),
        )

    def neighbors(
        self,
        node: str,
        edge_types: Iterable[str] | None = None,
        direction: str = "out",
        min_confidence: float = 0.0,
    ) -> list[Edge]:
        """Edges at ``node`` of the given types ("out", "in" or "both"), strongest first."""
        if direction not in DIRECTIONS:
            raise LlmcError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
        if node not in self.g:
            return []
        types = set(edge_types) if edge_types is not None else None
        out: list[Edge] = []
        if direction in ("out", "both"):
            for _, other, d in self.g.out_edges(node, data=True):
                if (types is None or d["type"] in types) and d.get(
                    "confidence", 1
                ) >= min_confidence:
                    out.append(_edge(node, other, "out", d))
        if direction in ("in", "both"):
            for other, _, d in self.g.in_edges(node, data=True):
                if (types is None or d["type"] in types) and d.get(
                    "confidence", 1
                ) >= min_confidence:
                    out.append(_edge(node, other, "in", d))
        out.sort(key=lambda e: (-e.confidence, e.type, e.other))
        return out

    def degree(
        self, node: str, edge_types: Iterable[str] | None = None, direction: str = "both"
    ) -> int:
        """Number of distinct edges of the given types at ``node``."""
        return len(self.neighbors(node, edge_types, direction))

    def pagerank(
        self,
        nodes: Iterable[str] | None = None,
        edge_types: Iterable[str] | None = DEPENDENCY_TYPES,
        personalization: Mapping[str, float] | None = None,
        alpha: float = 0.85,
        max_iter: int = 100,
        tol: float = 1.0e-6,
    ) -> dict[str, float]:
        """PageRank over the subgraph induced by ``nodes`` (default: all), edges weighted by
        confidence; dangling mass and teleports follow ``personalization`` (default uniform).
        Computed by ``networkx.pagerank``."""
        return pagerank(self.g, nodes, edge_types, personalization, alpha, max_iter, tol)

    # -- node <-> span --------------------------------------------------------------------
    def node_for_span(self, span_id: int, store: Store | None = None) -> str | None:
        """The node a span belongs to: the definition or section it is (part of), else the
        innermost node around it. With ``store``, a span newer than the graph is placed by
        its path and first line."""
        with self._lock:
            if self._span_map is None:
                stored = self.meta.get("span_nodes") or {}
                self._span_map = {int(k): v for k, v in stored.items() if v in self.g}
                if not self._span_map:  # a graph written without the map
                    self._span_map = _defining_spans(self.g)
        hit = self._span_map.get(int(span_id))
        if hit is not None or store is None:
            return hit
        spans = store.spans_by_ids([int(span_id)])
        s = spans.get(int(span_id))
        return self.node_at(s.span.path, s.span.start_line) if s is not None else None

    def node_at(self, path: str, line: int) -> str | None:
        """The innermost definition (or section) around ``line``; the file node otherwise."""
        with self._lock:
            if self._by_path is None:
                by: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
                for n, a in self.g.nodes(data=True):
                    if a.get("kind") not in (FILE, UNRESOLVED) and "path" in a:
                        by[a["path"]].append((a["start_line"], a["end_line"], n))
                for rows in by.values():
                    rows.sort()
                self._by_path = dict(by)
        rows = self._by_path.get(path, [])
        best = None
        i = bisect.bisect_right(rows, (line, float("inf"), ""))
        for start, end, n in rows[:i]:
            if start <= line <= end and (best is None or end - start <= best[1] - best[0]):
                best = (start, end, n)
        if best is not None:
            return best[2]
        return path if path in self.g else None

    def spans_for_node(self, node: str, store: Store) -> list[StoredSpan]:
        """The store's spans inside the node's lines (all parts of a split definition)."""
        info = self.node(node)
        if not info.path:
            return []
        spans = store.spans_for_path(info.path)
        if info.kind == FILE:
            return spans
        return [
            s
            for s in spans
            if s.id == info.span_id
            or (s.span.start_line >= info.start_line and s.span.end_line <= info.end_line)
            or (s.span.qualname == info.qualname and s.span.qualname)
        ]

    # -- names ----------------------------------------------------------------------------
    def _name_index(self) -> dict[str, dict[str, list[str]]]:
        with self._lock:
            if self._names is None:
                idx: dict[str, dict[str, list[str]]] = {
                    k: defaultdict(list) for k in ("qual", "name", "fqn", "path", "suffix")
                }
                modules: dict[str, str] = {}
                for n, a in self.g.nodes(data=True):
                    kind = a.get("kind")
                    if kind == UNRESOLVED:
                        continue
                    if kind == FILE:
                        idx["path"][n].append(n)
                        idx["name"][a.get("name", "")].append(n)
                        if a.get("module"):
                            modules[a["path"]] = a["module"]
                            idx["fqn"][a["module"]].append(n)
                        continue
                    idx["qual"][a.get("qualname", "")].append(n)
                    if kind != SECTION:
                        idx["name"][a.get("name", "")].append(n)
                for n, a in self.g.nodes(data=True):
                    if a.get("kind") in (FILE, UNRESOLVED, SECTION):
                        continue
                    mod = modules.get(a.get("path", ""))
                    if mod:
                        idx["fqn"][f"{mod}.{a.get('qualname', '')}"].append(n)
                    parts = a.get("qualname", "").split(".")
                    for i in range(1, len(parts)):
                        idx["suffix"][".".join(parts[i:])].append(n)
                self._names = idx
        return self._names

    def resolve(self, query: str) -> list[str]:
        """Nodes a user's name may mean, best match first; several means ambiguous.

        Tried in order, first hit wins: a node id; a file path (or unique path suffix); a
        qualified name (``Store.files``); a Python dotted name (``pkg.mod.func``); the tail
        of a qualified name; a plain name. ``?name`` asks for an unresolved-name node.
        """
        q = query.strip()
        if not q:
            return []
        if q in self.g and (q.startswith("?") or self.g.nodes[q].get("kind") != UNRESOLVED):
            return [q]
        idx = self._name_index()
        q2 = q.replace("::", ".").replace("#", ".").rstrip("()")
        path_q = q.lstrip("./")
        tails = (
            [p for p in idx["path"] if p.endswith("/" + path_q)]
            if "/" in path_q or "." in path_q
            else []
        )
        for hits in (
            idx["path"].get(path_q),
            tails if "/" in path_q else None,
            idx["qual"].get(q2),
            idx["fqn"].get(q2),
            idx["suffix"].get(q2),
            idx["name"].get(q2),
            tails,
        ):
            if hits:
                return sorted(dict.fromkeys(hits), key=self._rank)
        return []

    def _rank(self, node: str) -> tuple:
        a = self.g.nodes[node]
        kind_rank = 0 if a.get("kind") in CLASS_KINDS | {"function"} else 1
        return (bool(a.get("test")), kind_rank, -self.g.in_degree(node), node)

    def resolve_one(self, query: str) -> str:
        """The single node ``query`` names; raises with candidates or suggestions."""
        hits = self.resolve(query)
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise AmbiguousSymbolError(
                f"{query!r} is ambiguous: {len(hits)} candidates (use one of the ids)", hits
            )
        idx = self._name_index()
        pool = list(dict.fromkeys([*idx["qual"], *idx["name"], *idx["path"]]))  # a name once
        close = difflib.get_close_matches(query, pool, n=5, cutoff=0.6)
        hint = f" (did you mean: {', '.join(close)}?)" if close else ""
        raise SymbolNotFoundError(f"no symbol or file named {query!r} in the graph{hint}", close)

    def members(self, node: str) -> list[str]:
        """Everything ``node`` defines, transitively (methods of a class, defs of a file)."""
        out, queue, seen = [], deque([node]), {node}
        while queue:
            cur = queue.popleft()
            for _, child, d in self.g.out_edges(cur, data=True):
                if d["type"] == DEFINES and child not in seen:
                    seen.add(child)
                    out.append(child)
                    queue.append(child)
        return out

    # -- questions --------------------------------------------------------------------------
    def where_used(self, symbol: str, min_confidence: float = 0.5) -> Usage:
        """Callers, importers, subclasses, tests and docs of a symbol (or file). Uses
        resolved with less than ``min_confidence`` are left out; name-only guesses (0.3)
        are listed apart as possible callers while ``min_confidence`` is at most the
        default, and left out above it: asking for confident uses hides guesses too."""
        node = self.resolve_one(symbol)
        info = self.node(node)
        scope = [node] + (self.members(node) if info.kind in CLASS_KINDS | {FILE} else [])
        groups: dict[str, list[Ref]] = {g: [] for g in Usage.GROUPS}
        seen: set[tuple[str, str]] = set()
        for target in scope:
            for e in self.neighbors(target, direction="in"):
                if e.type == DEFINES or (e.other, e.type) in seen:
                    continue
                if target != node and e.type not in (TESTS, MENTIONS):
                    continue  # members' own callers are their own where-used
                group = {
                    CALLS: "callers",
                    IMPORTS: "importers",
                    INHERITS: "subclasses",
                    TESTS: "tests",
                    MENTIONS: "docs",
                }.get(e.type)
                if group is None or e.confidence < min_confidence:
                    continue
                seen.add((e.other, e.type))
                groups[group].append(self._ref(e))
        if info.kind != FILE and min_confidence <= GUESSES_UP_TO:
            groups["possible_callers"] = self._guesses(node, info.name)
        for refs in groups.values():
            refs.sort(key=lambda r: (-r.confidence, r.path, r.line))
        return Usage(info, **groups)

    def _guesses(self, node: str, name: str) -> list[Ref]:
        """Name-only callers of ``name``; a receiver named like ``node``'s class or one of
        its bases (``adapter.send`` for ``HTTPAdapter.send``) says so and comes first."""
        classes = self._owner_classes(node)
        out = []
        for e in self.neighbors(unresolved_id(name), [CALLS], direction="in"):
            word = receiver_of(e.via)
            cls = named_like(word, classes) if word and classes else ""
            if cls:
                via = f"{NAME_VIA}, receiver `{word}` ~ {cls}"
                out.append(dataclasses.replace(self._ref(e), confidence=RECEIVER_NAMED, via=via))
            else:
                out.append(dataclasses.replace(self._ref(e), via=NAME_VIA))
        return out

    def _owner_classes(self, node: str) -> list[str]:
        """The names of the class defining ``node`` and of its bases, nearest first."""
        owners = [e.other for e in self.neighbors(node, [DEFINES], direction="in")
                  if self.g.nodes[e.other].get("kind") in CLASS_KINDS]  # fmt: skip
        names: list[str] = []
        seen: set[str] = set()
        while owners and len(names) < 16:
            cur = owners.pop(0)
            if cur in seen:
                continue
            seen.add(cur)
            names.append(self.g.nodes[cur].get("name", ""))
            owners += [e.other for e in self.neighbors(cur, [INHERITS], direction="out")]
        return [n for n in names if n]

    def _ref(self, e: Edge) -> Ref:
        a = self.g.nodes[e.other]
        return Ref(
            node=e.other,
            kind=a.get("kind", ""),
            path=a.get("path", ""),
            line=e.line or int(a.get("start_line", 0)),
            confidence=e.confidence,
            via=e.via,
            name=a.get("qualname") or a.get("name", ""),
        )

    def deps(
        self,
        target: str,
        depth: int = 1,
        edge_types: Iterable[str] = DEPENDENCY_TYPES,
        min_confidence: float = 0.5,
    ) -> list[Dep]:
        """What ``target`` uses, breadth first up to ``depth`` hops (a class or file counts
        its members' uses as its own, minus uses of itself)."""
        node = self.resolve_one(target)
        types = set(edge_types)
        start = [node]
        if self.node(node).kind in CLASS_KINDS | {FILE}:
            start += self.members(node)
        inside = set(start)
        seen: dict[str, Dep] = {}
        frontier = list(start)
        for level in range(1, max(1, depth) + 1):
            nxt: list[str] = []
            for cur in frontier:
                sources = [cur]
                if cur not in inside and self.g.nodes[cur].get("kind") in CLASS_KINDS:
                    sources += self.members(cur)  # using a class runs its methods
                for src in sources:
                    for e in self.neighbors(src, types, "out", min_confidence):
                        if e.other in inside or e.other in seen or e.other in sources:
                            continue
                        if self.g.nodes[e.other].get("kind") == UNRESOLVED:
                            continue
                        seen[e.other] = Dep(e.other, level, e.type, e.confidence, src, e.line)
                        nxt.append(e.other)
            frontier = nxt
            if not frontier:
                break
        return sorted(seen.values(), key=lambda d: (d.depth, d.type, d.node))

    def summary(self, top: int = 10) -> dict[str, Any]:
        """Counts by node kind and edge type, resolution rates, top nodes by PageRank."""
        kinds: dict[str, int] = defaultdict(int)
        for _, a in self.g.nodes(data=True):
            kinds[a.get("kind", "")] += 1
        types: dict[str, int] = defaultdict(int)
        for _, _, d in self.g.edges(data=True):
            types[d["type"]] += 1
        code = [n for n, a in self.g.nodes(data=True) if a.get("kind") not in (UNRESOLVED, SECTION)]
        ranks = self.pagerank(code)
        best = sorted(ranks.items(), key=lambda kv: -kv[1])[:top]
        stats = self.stats
        return {
            "generation": self.generation,
            "built_at": self.meta.get("built_at", ""),
            "nodes": self.g.number_of_nodes(),
            "edges": self.g.number_of_edges(),
            "nodes_by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
            "edges_by_type": dict(sorted(types.items(), key=lambda kv: -kv[1])),
            "resolution": stats.resolution,
            "build_seconds": stats.seconds,
            "top": [
                {"node": n, "kind": self.g.nodes[n].get("kind", ""), "pagerank": round(r, 6)}
                for n, r in best
            ],
        }


def _defining_spans(g: nx.MultiDiGraph) -> dict[int, str]:
    """span id → node from the nodes' own ``span_id`` (outermost definition wins)."""
    best: dict[int, tuple[tuple, str]] = {}
    for n, a in g.nodes(data=True):
        sid = a.get("span_id")
        if sid is None:
            continue
        rank = (a.get("kind") != FILE, a.get("end_line", 0) - a.get("start_line", 0), n)
        if int(sid) not in best or rank > best[int(sid)][0]:
            best[int(sid)] = (rank, n)
    return {sid: n for sid, (_, n) in best.items()}


def _edge(node: str, other: str, direction: str, d: dict[str, Any]) -> Edge:
    return Edge(
        node=node,
        other=other,
        type=d["type"],
        direction=direction,
        confidence=float(d.get("confidence", 1.0)),
        line=int(d.get("line", 0)),
        via=d.get("via", ""),
        count=int(d.get("count", 1)),
    )


# -- loading -------------------------------------------------------------------------------

_CACHE: dict[Path, tuple[tuple[int, int, int], RepoGraph]] = {}
_CACHE_LOCK = threading.Lock()


def graph_file(repo_root: Path) -> Path:
    return Path(repo_root) / ".llmc" / GRAPH_FILE


def load_graph(repo_root: Path) -> RepoGraph:
    """The repository's graph, cached per (path, mtime, size, inode) in this process."""
    path = graph_file(repo_root).resolve()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if _index_run_holds(Path(repo_root)):
            raise GraphMissingError(
                "graph skipped: still being built by the index run under way"
            ) from None
        raise GraphMissingError(
            f"no graph at {path} (run `llmc index` to build it; it needs [graph] enabled)"
        ) from None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _CACHE_LOCK:
        hit = _CACHE.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
    graph = read_graph(path)
    with _CACHE_LOCK:
        _CACHE[path] = (key, graph)
    return graph


def _index_run_holds(repo_root: Path) -> bool:
    """Whether an index run holds the writer lock now (a first run writes the graph last,
    after the lexical index is searchable). Asked without waiting: a shared ``flock``
    tried and let go at once, which no writer waits on (it retries)."""
    import fcntl

    from llmc.paths import lock_path

    try:
        fd = os.open(lock_path(repo_root), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (drops the shared lock, if taken)
    return False


def read_graph(path: Path) -> RepoGraph:
    """Parse a graph file (no caching)."""
    import networkx as nx

    try:
        data = orjson.loads(Path(path).read_bytes())  # ~2x json's speed on a 50 MB graph
    except OSError as e:
        raise GraphMissingError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise GraphMissingError(
            f"{path} is corrupt ({e}); run `llmc index` to rebuild it"
        ) from None
    meta = data.get("graph") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise GraphMissingError(f"{path} is not an llmc graph; run `llmc index` to rebuild it")
    if meta.get("version") != SCHEMA_VERSION:
        raise GraphMissingError(
            f"{path} has graph schema version {meta.get('version')}, this llmc reads "
            f"{SCHEMA_VERSION}; run `llmc index` to rebuild it"
        )
    g = nx.MultiDiGraph()
    g.graph.update(meta)
    try:
        g.add_nodes_from((n.pop("id"), n) for n in data["nodes"])
        g.add_edges_from((e.pop("source"), e.pop("target"), e.pop("key"), e) for e in data["edges"])
    except (KeyError, TypeError, AttributeError) as e:
        raise GraphMissingError(
            f"{path} is corrupt ({e}); run `llmc index` to rebuild it"
        ) from None
    return RepoGraph(g, Path(path))


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


__all__ = [
    "Dep",
    "Edge",
    "NodeInfo",
    "Ref",
    "RepoGraph",
    "Usage",
    "load_graph",
    "pagerank",
    "read_graph",
]
