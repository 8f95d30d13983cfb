"""The graph's records as data: JSON (orjson) out, checked field by field on the way in.

``.llmc/`` is repository content like any other (a clone can carry one), so what the graph
caches there, and what the chunk workers hand the indexer, is plain JSON, never a format
that runs code when it is read (DESIGN.md). Every decoder here checks the shape and the
type of every value and answers None for anything else: a forged, truncated or foreign
record is a cache miss, never an exception.

Records are rows (lists), as :meth:`FileFacts.to_json` writes them; a file's
:class:`~llmc.graph.incremental.FileResult` is ``[phases, counts, reads]``.
"""

from __future__ import annotations

from typing import Any

import orjson

from llmc.graph.incremental import PHASES, FileResult
from llmc.graph.model import (
    EDGE_TYPES,
    RESOLVED_TYPES,
    Binding,
    Call,
    Def,
    FileFacts,
    Import,
    Inherit,
    Mention,
)

# Each row kind of FileFacts: its class and the type of each of its fields, in order.
_ROWS: dict[str, tuple[type, tuple[type, ...]]] = {
    "defs": (Def, (str, str, str, int, int, str, bool)),
    "calls": (Call, (str, str, str, int, bool)),
    "imports": (Import, (str, list, str, int, int, str, str)),  # names: checked apart
    "bindings": (Binding, (str, str, str, str, int, str)),
    "inherits": (Inherit, (str, str, int)),
    "mentions": (Mention, (str, str, str, int)),
}
_SCALARS: tuple[tuple[str, type], ...] = (
    ("path", str),
    ("lang", str),
    ("category", str),
    ("module", str),
    ("test", bool),
    ("default_export", str),
    ("error", str),
    ("end_line", int),
)
_PAIR = (str, str)
_EDGE_TYPES = frozenset(EDGE_TYPES)
_EDGE = (str, str, str, (int, float), int, str)  # (src, dst, type, confidence, line, via)
_PLACEHOLDER = (str, str, int)  # (?name id, name, candidates)
_COUNT_KEYS = frozenset(
    (t, s) for t in RESOLVED_TYPES for s in ("resolved", "unresolved", "external")
)


_new = tuple.__new__  # a row record (a NamedTuple) from a list already checked: no __init__


class _Bad(Exception):
    """A record that is not what this module writes."""


def _fits(row: Any, types: tuple) -> bool:
    """A list of ``len(types)`` values of these types (a ``true`` passes for an int: it
    behaves as 1 wherever a number is used)."""
    return type(row) is list and len(row) == len(types) and all(map(isinstance, row, types))


# == FileFacts =========================================================================
def encode_facts(f: FileFacts) -> bytes:
    return orjson.dumps(f.to_json())


def decode_facts(raw: bytes | str, path: str | None = None) -> FileFacts | None:
    """The facts JSON ``raw`` decodes to (of ``path``, when given), or None."""
    try:
        data = orjson.loads(raw)
    except (TypeError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return None
    return facts_from_data(data, path)


def facts_from_data(data: Any, path: str | None = None) -> FileFacts | None:
    """:meth:`FileFacts.from_json` of decoded JSON, or None unless every field has the type
    the dataclass declares (and the path is ``path``, when given)."""
    if type(data) is not dict:
        return None
    try:
        scalars = {}
        for key, tp in _SCALARS:
            v = data[key]
            if not isinstance(v, tp):
                raise _Bad(key)
            scalars[key] = v
        if path is not None and scalars["path"] != path:
            raise _Bad("path")
        rows = {}
        for key, (kind, types) in _ROWS.items():
            got = data[key]
            if type(got) is not list:
                raise _Bad(key)
            n = len(types)
            # one pass: a row that is not a list of n values of these types is left out
            # (and then the counts differ); ``true`` passes for an int, as 1 would
            out = [
                _new(kind, row)
                for row in got
                if type(row) is list and len(row) == n and all(map(isinstance, row, types))
            ]
            if len(out) != len(got):
                raise _Bad(key)
            rows[key] = out
        for imp in rows["imports"]:
            for pair in imp.names:
                if not _fits(pair, _PAIR):
                    raise _Bad("imports.names")
    except (KeyError, _Bad):
        return None
    return FileFacts(**scalars, **rows)


# == FileResult ========================================================================
def result_to_data(res: FileResult) -> list[Any]:
    return [
        res.phases,
        [[etype, status, n] for (etype, status), n in res.counts],
        list(res.reads),
    ]


def encode_result(res: FileResult) -> bytes:
    return orjson.dumps(result_to_data(res))


def result_from_data(data: Any) -> FileResult | None:
    """The :class:`FileResult` of decoded JSON, or None unless it has its exact shape."""
    if type(data) is not list or len(data) != 3:
        return None
    phases_in, counts_in, reads_in = data
    if type(phases_in) is not list or len(phases_in) != len(PHASES):
        return None
    if type(counts_in) is not list or type(reads_in) is not list:
        return None
    phases = []
    for events in phases_in:
        if type(events) is not list:
            return None
        out = tuple(
            [
                tuple(ev)
                for ev in events
                if type(ev) is list
                and (
                    (len(ev) == 6 and all(map(isinstance, ev, _EDGE)) and ev[2] in _EDGE_TYPES)
                    or (len(ev) == 3 and all(map(isinstance, ev, _PLACEHOLDER)))
                )
            ]
        )
        if len(out) != len(events):
            return None
        phases.append(out)
    counts = []
    for c in counts_in:
        if not _fits(c, (str, str, int)) or (c[0], c[1]) not in _COUNT_KEYS:
            return None
        counts.append(((c[0], c[1]), c[2]))
    reads = frozenset(  # every key the resolver reads is a (kind, name) pair
        [
            tuple(k)
            for k in reads_in
            if type(k) is list and len(k) == 2 and all(map(isinstance, k, _PAIR))
        ]
    )
    if len(reads) != len(reads_in):  # (a duplicate key: not what we write either)
        return None
    return FileResult(tuple(phases), tuple(counts), reads)


def signature_from_data(data: Any) -> tuple | None:
    """A module signature (``llmc.graph.tables.module_signature``) from decoded JSON:
    ``[[[path, lang, category, module], ...], [package dir, ...], [[module, dir], ...]]``,
    as the nested tuples it was written from; None for any other shape."""
    if type(data) is not list or len(data) != 3 or not all(type(x) is list for x in data):
        return None
    files, pkg_dirs, go_modules = data
    rows = [tuple(r) for r in files if _fits(r, (str, str, str, str))]
    mods = [tuple(m) for m in go_modules if _fits(m, _PAIR)]
    if len(rows) != len(files) or len(mods) != len(go_modules):
        return None
    if not all(type(d) is str for d in pkg_dirs):
        return None
    return tuple(rows), tuple(pkg_dirs), tuple(mods)


__all__ = [
    "decode_facts",
    "encode_facts",
    "encode_result",
    "facts_from_data",
    "result_from_data",
    "result_to_data",
    "signature_from_data",
]
