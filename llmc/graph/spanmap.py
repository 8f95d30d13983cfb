"""Nodes ↔ spans: which span defines each node, and which node each span belongs to.

The graph's nodes come from extraction, the spans from the chunker; both are keyed by path
and line. ``read_span_rows`` reads the span rows (no text) from the store,
``attach_spans`` gives each node the span that defines it, ``span_nodes`` maps every span
to its node (the ``span_nodes`` of the graph header, what search uses to go from a hit to
the graph), and ``map_spans`` redoes both for a few files after a patch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from llmc.graph.model import FILE, UNRESOLVED, node_id
from llmc.graph.output import EncodedMembers
from llmc.store.sqlite import database_error

if TYPE_CHECKING:
    from llmc.graph.resolve import Resolver
    from llmc.store.db import Store

log = logging.getLogger(__name__)

SQL_PATHS = 500  # more paths than this: read every span row (SQLite's variable limit)


def read_span_rows(store: Store, paths: set[str] | None = None) -> dict[str, list[tuple]]:
    """path → [(span id, kind, qualname, symbol, start, end, part)], without span text;
    of every file, or of ``paths`` only."""
    out: dict[str, list[tuple]] = {}
    sql = "SELECT id, path, kind, qualname, symbol, start_line, end_line, part FROM spans"
    try:
        if paths is not None and len(paths) <= SQL_PATHS:
            marks = ",".join("?" * len(paths))
            rows = store.conn.execute(f"{sql} WHERE path IN ({marks})", sorted(paths)).fetchall()
        else:
            rows = store.conn.execute(sql).fetchall()
        for sid, path, kind, qual, sym, start, end, part in rows:
            if paths is None or path in paths:
                out.setdefault(path, []).append((sid, kind, qual, sym, start, end, part))
    except Exception as e:  # noqa: BLE001 - fall back to the public iterator
        log.debug("span metadata query failed (%s); iterating spans", e)
        for s in store.iter_spans():
            sp = s.span
            if paths is not None and sp.path not in paths:
                continue
            out.setdefault(sp.path, []).append(
                (s.id, sp.kind, sp.qualname, sp.symbol, sp.start_line, sp.end_line, sp.part)
            )
    return out


def attach_spans(nodes: dict[str, dict[str, Any]], spans: dict[str, list[tuple]]) -> None:
    """Give each node the id of the span that defines it (same qualname, else the
    smallest span around its first line; a file gets its module span or first span)."""
    by_qual: dict[str, dict[str, list[tuple]]] = {}  # path -> qualname -> its part-0 rows
    for n in nodes.values():
        if n["kind"] == UNRESOLVED:
            continue
        rows = spans.get(n["path"])
        if not rows:
            continue
        if n["kind"] == FILE:
            mod = [r for r in rows if r[1] == "module" and r[6] == 0]
            n["span_id"] = (mod or sorted(rows, key=lambda r: (r[4], r[6])))[0][0]
            continue
        start, end, qual = n["start_line"], n["end_line"], n.get("qualname", "")
        quals = by_qual.get(n["path"])
        if quals is None:
            quals = by_qual[n["path"]] = {}
            for r in rows:
                if r[6] == 0:
                    quals.setdefault(r[2], []).append(r)
        same = quals.get(qual)
        if same:
            n["span_id"] = min(same, key=lambda r: abs(r[4] - start))[0]
            continue
        around = [r for r in rows if r[4] <= start <= r[5]]
        if not around:
            continue
        covering = [r for r in around if r[5] >= end] or around
        n["span_id"] = min(covering, key=lambda r: (r[5] - r[4], r[6]))[0]


def span_nodes(nodes: dict[str, dict[str, Any]], spans: dict[str, list[tuple]]) -> dict[str, str]:
    """Every span id → the node it belongs to: the node it defines, else (parts of a split
    definition, module-level blocks, paragraphs) the innermost node around its first line."""
    out: dict[str, str] = {}
    best: dict[int, tuple[tuple, str]] = {}
    by_path: dict[str, list[tuple[int, int, str, str]]] = {}
    for nid, n in nodes.items():
        if n["kind"] == UNRESOLVED:
            continue
        sid = n.get("span_id")
        if sid is not None:
            rank = (n["kind"] != FILE, n["end_line"] - n["start_line"], nid)
            if sid not in best or rank > best[sid][0]:
                best[sid] = (rank, nid)
        if n["kind"] != FILE:
            by_path.setdefault(n["path"], []).append(
                (n["start_line"], n["end_line"], n.get("qualname", ""), nid)
            )
    for path, rows in spans.items():
        defs = by_path.get(path, [])
        for sid, _, qual, _, start, _, _ in rows:
            if sid in best:
                out[str(sid)] = best[sid][1]
                continue
            same = [d for d in defs if d[2] == qual and qual]
            around = same or [d for d in defs if d[0] <= start <= d[1]]
            if around:
                out[str(sid)] = min(around, key=lambda d: d[1] - d[0])[3]
            elif path in nodes:
                out[str(sid)] = path
    return out


def map_spans(
    nodes: dict[str, dict[str, Any]],
    resolver: Resolver,
    spans: dict[str, list[tuple]],
    paths: set[str],
    span_nodes_of: dict[str, dict[str, str]],
) -> set[str]:
    """``attach_spans`` and ``span_nodes`` for the nodes and spans of ``paths`` only (a
    node's span is in its own file); returns the ids of the nodes that were mapped."""
    touched: set[str] = set()
    for path in paths:
        ids = [path, *(node_id(path, q) for q in resolver.defs.get(path, ()))]
        sub = {nid: nodes[nid] for nid in ids if nid in nodes}
        for n in sub.values():
            n.pop("span_id", None)
        rows = {path: spans.get(path, [])}
        attach_spans(sub, rows)
        span_nodes_of[path] = span_nodes(sub, rows)
        touched.update(sub)
    return touched


def map_all_spans(
    store: Store, nodes: dict[str, dict[str, Any]], defs: Mapping[str, Iterable[str]]
) -> EncodedMembers | None:
    """``attach_spans`` and then ``span_nodes`` over every file (``defs``: each file's
    definitions' qualnames), reading the span rows of ``SQL_PATHS`` files at a time
    instead of all of them (213k rows, 120 MB, on nine large projects). The same spans
    in the same order as ``read_span_rows(store)`` gives: the files in the order of their
    first span id, each file's rows by id. None when the store cannot be queried so (the
    caller reads every row). The map comes encoded, as the graph's header writes it
    (:class:`~llmc.graph.output.EncodedMembers`): a cold build writes it and is done."""
    conn = store.conn  # (what a pending store raises here is the caller's)
    sql = (
        "SELECT id, path, kind, qualname, symbol, start_line, end_line, part FROM spans"
        " WHERE path IN ({}) ORDER BY id"
    )
    out = EncodedMembers()
    try:
        paths = [
            p for (p,) in conn.execute("SELECT path FROM spans GROUP BY path ORDER BY MIN(id)")
        ]
        for start in range(0, len(paths), SQL_PATHS):
            chunk = paths[start : start + SQL_PATHS]
            rows: dict[str, list[tuple]] = {}
            mapped: dict[str, str] = {}
            for sid, path, kind, qual, sym, first, last, part in conn.execute(
                sql.format(",".join("?" * len(chunk))), chunk
            ):
                rows.setdefault(path, []).append((sid, kind, qual, sym, first, last, part))
            for path in chunk:
                ids = [path, *(node_id(path, q) for q in defs.get(path, ()))]
                sub = {nid: nodes[nid] for nid in ids if nid in nodes}
                one = {path: rows.pop(path, [])}
                attach_spans(sub, one)
                mapped.update(span_nodes(sub, one))
            out.add(mapped)
    except Exception as e:  # (the store's sqlite module: sqlite3's or pysqlite3's errors)
        if not database_error(e):
            raise
        log.debug("span rows unreadable by file (%s); reading them all", e)
        return None
    return out


def span_nodes_by_path(
    span_nodes: dict[str, str], spans: dict[str, list[tuple]]
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for path, rows in spans.items():
        per = out[path] = {}
        for row in rows:
            nid = span_nodes.get(str(row[0]))
            if nid is not None:
                per[str(row[0])] = nid
    return out


__all__ = [
    "attach_spans",
    "map_all_spans",
    "map_spans",
    "read_span_rows",
    "span_nodes",
    "span_nodes_by_path",
]
