"""The graph file: node-link JSON, written whole or, for a kept graph, re-encoded piece by
piece after a patch; and its header read back.

``to_node_link`` makes the whole document: every node and edge as a new dict, sorted,
then encoded (``write_json``). A process that keeps its resolver (the daemon)
keeps the encoded document in pieces instead, and after a one-file update encodes again
only the pieces whose nodes or edges changed, then joins them: the same bytes as
``orjson.dumps(to_node_link(...))``.

A piece is what sorts together: a file's node (key ``path``), its definitions (key
``path::``, every id in it starts so), an unresolved ``?name`` node (its id), and the
edges leaving a file's node or its definitions (same keys, by the edge's source). Ordering
the pieces by key orders every id as one sort of all ids would, since no other id falls
between ``path::`` and the ids that extend it — unless a path itself holds ``::`` or starts
with ``?``, where the kept pieces are not used (the whole document is made again).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from llmc.graph.atomic import write_atomic
from llmc.graph.model import SCHEMA, SCHEMA_VERSION, GraphStats
from llmc.paths import open_state_file

_HEAD = b'{"directed":true,"multigraph":true,"graph":'


class Tracked(dict):
    """A dict that remembers which keys were set or removed since :meth:`take`."""

    __slots__ = ("touched",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.touched: set = set()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.touched.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.touched.add(key)
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self.touched.add(key)
        return super().pop(key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self.touched.add(key)
        return super().setdefault(key, default)

    def take(self) -> set:
        out, self.touched = self.touched, set()
        return out


def piece_of(nid: str) -> str:
    """The piece a node (or the edges leaving it) is encoded in."""
    if nid.startswith("?"):
        return nid
    path, sep, _ = nid.partition("::")
    return path + sep


def pieces_usable(paths: Iterable[str]) -> bool:
    return not any("::" in p or p.startswith("?") for p in paths)


def _file_under_pieces(
    touched: Iterable[Any],
    present: Mapping[Any, Any],
    by_piece: dict[str, set],
    source: Callable[[Any], str],
) -> set[str]:
    """File each touched node id or edge key under its piece (the piece of its node, or of
    its edge's source) when it is still in ``present``, drop it when it is gone; the pieces
    touched."""
    pieces: set[str] = set()
    for item in touched:
        piece = piece_of(source(item))
        pieces.add(piece)
        members = by_piece.setdefault(piece, set())
        if item in present:
            members.add(item)
        else:
            members.discard(item)
    return pieces


class NodeLink:
    """The encoded pieces of a graph's nodes and edges, and the counts its stats give."""

    def __init__(self, nodes: dict[str, dict[str, Any]], edges: dict[tuple, dict]) -> None:
        self.node_ids: dict[str, set[str]] = {}
        self.edge_keys: dict[str, set[tuple]] = {}
        for nid in nodes:
            self.node_ids.setdefault(piece_of(nid), set()).add(nid)
        for key in edges:
            self.edge_keys.setdefault(piece_of(key[0]), set()).add(key)
        self.node_bytes: dict[str, bytes] = {}
        self.edge_bytes: dict[str, bytes] = {}
        self.kinds: dict[str, Counter] = {}
        self.types: dict[str, Counter] = {}
        for piece in self.node_ids:
            self._nodes(piece, nodes)
        for piece in self.edge_keys:
            self._edges(piece, edges)

    def update(
        self,
        nodes: dict[str, dict[str, Any]],
        edges: dict[tuple, dict],
        touched_nodes: Iterable[str],
        touched_edges: Iterable[tuple],
    ) -> None:
        """Encode again the pieces of these nodes (added, removed or changed) and edges."""
        node_pieces = _file_under_pieces(touched_nodes, nodes, self.node_ids, lambda nid: nid)
        edge_pieces = _file_under_pieces(touched_edges, edges, self.edge_keys, lambda k: k[0])
        for piece in node_pieces:
            self._nodes(piece, nodes)
        for piece in edge_pieces:
            self._edges(piece, edges)

    def _nodes(self, piece: str, nodes: dict[str, dict[str, Any]]) -> None:
        ids = self.node_ids.get(piece)
        if not ids:
            self.node_ids.pop(piece, None)
            self.node_bytes.pop(piece, None)
            self.kinds.pop(piece, None)
            return
        rows = [{"id": nid, **_attrs(nodes[nid])} for nid in sorted(ids)]
        self.node_bytes[piece] = orjson.dumps(rows)[1:-1]
        self.kinds[piece] = Counter(r["kind"] for r in rows)

    def _edges(self, piece: str, edges: dict[tuple, dict]) -> None:
        keys = self.edge_keys.get(piece)
        if not keys:
            self.edge_keys.pop(piece, None)
            self.edge_bytes.pop(piece, None)
            self.types.pop(piece, None)
            return
        rows = [
            {"source": s, "target": d, "key": t, "type": t, **edges[(s, d, t)]}
            for s, d, t in sorted(keys, key=lambda k: (k[0], k[2], k[1]))
        ]
        self.edge_bytes[piece] = orjson.dumps(rows)[1:-1]
        self.types[piece] = Counter(k[2] for k in keys)

    def counts(self) -> tuple[int, int, dict[str, int], dict[str, int]]:
        """Nodes, edges, nodes by kind and edges by type (most common first)."""
        kinds: Counter = Counter()
        for c in self.kinds.values():
            kinds.update(c)
        types: Counter = Counter()
        for c in self.types.values():
            types.update(c)
        return (
            sum(kinds.values()),
            sum(types.values()),
            dict(kinds.most_common()),
            dict(types.most_common()),
        )

    def render(self, graph: dict[str, Any]) -> list[bytes]:
        """The whole document with these graph attributes, as chunks to write in turn
        (joining ~50 MB first would copy it twice more)."""
        out = [_HEAD, orjson.dumps(graph), b',"nodes":[']
        for pieces, tail in ((self.node_bytes, b'],"edges":['), (self.edge_bytes, b"]}")):
            for i, k in enumerate(sorted(pieces)):
                if i:
                    out.append(b",")
                out.append(pieces[k])
            out.append(tail)
        return out


def graph_attrs(generation: int, stats: GraphStats, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "generation": generation,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "stats": stats.to_json(),
        **extra,
    }


EdgeRows = list[tuple[str, str, str, dict[str, Any]]]
EdgeMap = Mapping[tuple[str, str, str], dict[str, Any]]


def to_node_link(
    nodes: dict[str, dict[str, Any]],
    edges: EdgeRows | EdgeMap,
    generation: int,
    stats: GraphStats,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """networkx node-link data (``edges="edges"``); an edge's key is its type. ``edges``:
    (source, target, type, attrs) rows, or {(source, target, type): attrs}."""
    return {
        "directed": True,
        "multigraph": True,
        "graph": graph_attrs(generation, stats, extra or {}),
        "nodes": [{"id": nid, **_attrs(nodes[nid])} for nid in sorted(nodes)],
        "edges": list(_edge_dicts(edges, _edge_order(edges))),
    }


WRITE_SLICE = 4096  # nodes or edges made into dicts and encoded at a time (write_node_link)


class EncodedEdges:
    """Merged edges encoded as the graph file lists them, one batch after another, in a
    temp file (``path``) until the file is written: each batch's edges sorted as
    :func:`node_link_chunks` sorts them, every batch's sources after the last's (the merge
    of a cold build, part by part: :mod:`llmc.graph.parts`); and their counts by type."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self.count = 0
        self.types: Counter = Counter()

    def add(self, edges: EdgeMap) -> None:
        """Encode these edges after the ones added before."""
        if self._fh is None:
            import os

            fd = open_state_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            self._fh = os.fdopen(fd, "wb")
        order = _edge_order(edges)
        for start in range(0, len(order), WRITE_SLICE):
            part = list(_edge_dicts(edges, order[start : start + WRITE_SLICE]))
            self._fh.write((b"," if self.count or start else b"") + orjson.dumps(part)[1:-1])
        self.count += len(order)
        self.types.update(t for _, _, t in order)

    def __len__(self) -> int:
        return self.count

    def by_type(self, first_seen: Iterable[str]) -> dict[str, int]:
        """Counts by type, most common first, ties in ``first_seen`` order (the order the
        types first appear in one merged table: ``Counter.most_common``'s ties)."""
        ordered = Counter({t: self.types[t] for t in first_seen if self.types[t]})
        ordered.update({t: n for t, n in self.types.items() if t not in ordered})
        return dict(ordered.most_common())

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        if self._fh is None:
            return
        self._fh.close()
        with open(self.path, "rb") as fh:
            while chunk := fh.read(size):
                yield chunk

    def remove(self) -> None:
        if self._fh is not None:
            self._fh.close()
        try:
            self.path.unlink()
        except OSError:
            pass


class EncodedMembers:
    """A JSON object's members encoded before the write, in pieces (each a run of
    ``"key":value`` without braces), written where the object goes: a cold build's span
    map (~1M spans on 89k files) held as a dict and then once more inside the header's
    bytes was ~140 MB at its write; as pieces ~45 MB."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.count = 0

    def add(self, members: Mapping[str, Any]) -> None:
        if members:
            self.pieces.append(orjson.dumps(members)[1:-1])
            self.count += len(members)

    def __len__(self) -> int:
        return self.count

    def chunks(self) -> Iterator[bytes]:
        """The object's JSON, in pieces."""
        yield b"{"
        for i, piece in enumerate(self.pieces):
            yield b"," + piece if i else piece
        yield b"}"


def _header_chunks(header: dict[str, Any]) -> Iterator[bytes]:
    """``orjson.dumps(header)``, byte for byte, with its :class:`EncodedMembers` values
    written from their pieces."""
    if not any(isinstance(v, EncodedMembers) for v in header.values()):
        yield orjson.dumps(header)
        return
    sep = b"{"
    for key, value in header.items():
        if isinstance(value, EncodedMembers):
            yield sep + orjson.dumps(key) + b":"
            yield from value.chunks()
        else:
            yield sep + orjson.dumps(key) + b":" + orjson.dumps(value)
        sep = b","
    yield b"}"


def node_link_chunks(
    nodes: dict[str, dict[str, Any]],
    edges: EdgeRows | EdgeMap | EncodedEdges,
    header: dict[str, Any],
) -> Iterator[bytes]:
    """``orjson.dumps(to_node_link(...))``, byte for byte, in chunks: ``WRITE_SLICE``
    nodes or edges are made into dicts and encoded at a time, so writing the graph holds
    one slice's copies, not a second graph (and not the whole document as one bytes)."""
    yield b'{"directed":true,"multigraph":true,"graph":'
    yield from _header_chunks(header)
    yield b',"nodes":['
    ids = sorted(nodes)
    for start in range(0, len(ids), WRITE_SLICE):
        part = [{"id": nid, **_attrs(nodes[nid])} for nid in ids[start : start + WRITE_SLICE]]
        yield (b"," if start else b"") + orjson.dumps(part)[1:-1]
    del ids
    yield b'],"edges":['
    if isinstance(edges, EncodedEdges):
        yield from edges.chunks()
        yield b"]}"
        return
    order = _edge_order(edges)
    for start in range(0, len(order), WRITE_SLICE):
        part = list(_edge_dicts(edges, order[start : start + WRITE_SLICE]))
        yield (b"," if start else b"") + orjson.dumps(part)[1:-1]
    yield b"]}"


def write_node_link(
    path: Path,
    nodes: dict[str, dict[str, Any]],
    edges: EdgeRows | EdgeMap | EncodedEdges,
    generation: int,
    stats: GraphStats,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``to_node_link(...)`` atomically, slice by slice (``node_link_chunks``);
    returns its ``graph`` attributes."""
    header = graph_attrs(generation, stats, extra or {})
    write_atomic(path, node_link_chunks(nodes, edges, header))
    return header


def _edge_order(edges: EdgeRows | EdgeMap) -> list[tuple]:
    """The JSON's edge order, (source, type, target): the rows, or the map's keys, sorted
    by source, then each source's few edges by (type, target). The same order as sorting
    by that tuple (and as stable), without a sort key made for each of ~1M edges (on nine
    large projects a NUL-joined string each held 140 MB while they sorted)."""
    order = list(edges)
    order.sort(key=_SOURCE)
    i, n = 0, len(order)
    while i < n:
        src = order[i][0]
        j = i + 1
        while j < n and order[j][0] == src:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j], key=_TYPE_TARGET)
        i = j
    return order


_SOURCE = itemgetter(0)
_TYPE_TARGET = itemgetter(2, 1)


def _attrs(attrs: Any) -> dict[str, Any]:
    """A node's or edge's attributes as a dict (a ``Node`` or ``Edge`` makes its own)."""
    return attrs if isinstance(attrs, dict) else attrs.as_dict()


def _edge_dicts(edges: EdgeRows | EdgeMap, order: list[tuple]) -> Iterator[dict[str, Any]]:
    if isinstance(edges, Mapping):
        for s, d, t in order:
            yield {"source": s, "target": d, "key": t, "type": t, **_attrs(edges[(s, d, t)])}
    else:
        for s, d, t, attrs in order:
            yield {"source": s, "target": d, "key": t, "type": t, **attrs}


def read_json(path: Path) -> Any:
    try:
        return orjson.loads(Path(path).read_bytes())
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None


def header_of(data: Any) -> dict[str, Any] | None:
    """The ``graph`` attributes of graph data, or None if it is not a readable llmc graph."""
    graph = data.get("graph") if isinstance(data, dict) else None
    if not isinstance(graph, dict) or graph.get("schema") != SCHEMA:
        return None
    if graph.get("version") != SCHEMA_VERSION:
        return None
    if not isinstance(data.get("nodes"), list) or not isinstance(data.get("edges"), list):
        return None
    return graph


def read_header(path: Path) -> dict[str, Any] | None:
    """The ``graph`` attributes of a graph file, or None if missing, corrupt or foreign."""
    return header_of(read_json(path))


_NODES = b',"nodes":['
_HEAD_MAX = 1 << 30  # a header past this (1 GB of span ids) is read with the whole file


def read_head_only(path: Path) -> dict[str, Any] | None:
    """The ``graph`` attributes of a graph file as this module writes it (the attributes
    first), decoded without the nodes and edges after them: on nine large projects the
    whole document decodes to ~760 MB of objects, its attributes to ~30 MB. None when
    missing, corrupt, foreign, or not laid out so (``read_header`` then reads it whole);
    the body is not checked: an update that reuses it reads it whole."""
    import json

    try:
        with open(path, "rb") as fh:
            size = 1 << 20
            buf = fh.read(size)
            if not buf.startswith(_HEAD):
                return None
            cut = buf.find(_SPAN_MAP)
            if cut > 0:  # the span map is the last attribute: the rest, without it
                graph = _attrs_before(buf[len(_HEAD) : cut])
                if graph is not None:
                    return graph
            decoder = json.JSONDecoder()
            while True:
                text = buf[len(_HEAD) :].decode("utf-8", "ignore")  # (a cut character: past
                try:  # the attributes, or they are not whole yet and do not decode)
                    graph, end = decoder.raw_decode(text)
                except ValueError:
                    graph = None
                if graph is not None:
                    rest = text[end : end + len(_NODES)].encode()
                    if rest != _NODES[: len(rest)] or len(rest) < len(_NODES):
                        return None
                    break
                more = fh.read(size)
                if not more or len(buf) > _HEAD_MAX:
                    return None
                buf += more
                size *= 2
    except OSError:
        return None
    if not isinstance(graph, dict) or graph.get("schema") != SCHEMA:
        return None
    if graph.get("version") != SCHEMA_VERSION:
        return None
    return graph


_SPAN_MAP = b',"span_nodes":{'  # the header's last attribute, when it has one


def _attrs_before(head: bytes) -> dict[str, Any] | None:
    """The attributes written before the span map (``head``, without its closing brace),
    when they are this schema's: an update reads these only (the span map is ~1M entries
    at 100k files, ~0.8 GB decoded with the text around it)."""
    try:
        graph = orjson.loads(head + b"}")
    except ValueError:
        return None
    if not isinstance(graph, dict) or graph.get("schema") != SCHEMA:
        return None
    return graph if graph.get("version") == SCHEMA_VERSION else None


def write_json(path: Path, data: Any) -> None:
    # orjson: the same bytes as json.dumps(separators=(",", ":"), ensure_ascii=False),
    # ~12x faster (Django's 50 MB graph: 0.05 s instead of 0.64 s).
    write_atomic(path, orjson.dumps(data))


__all__ = [
    "EncodedEdges",
    "NodeLink",
    "Tracked",
    "graph_attrs",
    "header_of",
    "piece_of",
    "pieces_usable",
    "read_head_only",
    "read_header",
    "read_json",
    "node_link_chunks",
    "to_node_link",
    "write_json",
    "write_node_link",
]
