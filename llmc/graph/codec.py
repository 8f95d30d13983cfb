"""The graph's records as data: JSON (orjson) out, checked field by field on the way in.

``.llmc/`` is repository content like any other (a clone can carry one), so what the graph
caches there, and what the chunk workers hand the indexer, is plain JSON, never a format
that runs code when it is read (DESIGN.md). Every decoder here checks the shape and the
type of every value and answers None for anything else: a forged, truncated or foreign
record is a cache miss, never an exception.

Records are rows (lists), as :meth:`FileFacts.to_json` writes them; a file's
:class:`~llmc.graph.incremental.FileResult` is ``[phases, counts, reads]``.

A whole repository's facts are decoded for its resolution, but a file's calls and doc
mentions (more than half of them: 310 of 525 MB on nine large Python projects) are read
only while that file itself is resolved, and its bindings when a lookup first asks for them
(they are then indexed, for a few hundred files at a time: ``Lookup.bindings_of``; 336k
on those projects, read for 9k files). :func:`decode_facts_lazy` checks them as
:func:`decode_facts` does, and leaves them in the file's JSON (:class:`LazyFacts`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import fields
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


log = logging.getLogger(__name__)

_intern = sys.intern
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


def decode_facts_lazy(
    raw: bytes, path: str, source: bytes | Mapping[str, bytes]
) -> FileFacts | None:
    """:func:`decode_facts`, as a :class:`LazyFacts` whose calls and mentions are read
    again from ``source`` (these same bytes, or a mapping that gives them by path)."""
    try:
        data = orjson.loads(raw)
    except (TypeError, ValueError):
        return None
    return facts_from_data(data, path, source)


# Read only while their own file is resolved: left in the JSON by LazyFacts.
_LAZY = ("calls", "mentions", "bindings")


# The text fields of the records a whole repository's facts hold, as each is decoded:
# shared strings (sys.intern) instead of one per occurrence (a scope, a kind, a type name
# repeats across a file's records and across files); and their line numbers, shared ints
# (``_LINES``: each decoded int over 256 is an object of its own, 32 bytes, two per
# definition: ~60 MB of a cold build's 1.4 GB on 89k files).
_SHARED: dict[type, tuple[tuple[int, ...], tuple[int, ...]]] = {
    Def: ((0, 1, 2, 5), (3, 4)),
    Call: ((), (3,)),
    Binding: ((0, 1, 2, 3, 5), (4,)),
    Import: ((0, 2, 5, 6), (3, 4)),
    Inherit: ((0, 1), (2,)),
    Mention: ((), (3,)),
}
_LINES = tuple(range(1 << 16))


def _share(got: list, texts: tuple[int, ...], ints: tuple[int, ...], names: bool) -> None:
    last = max(texts + ints)
    lines, top = _LINES, len(_LINES)
    for row in got:
        if type(row) is list and len(row) > last:
            for i in texts:
                v = row[i]
                if type(v) is str:
                    row[i] = _intern(v)
            for i in ints:
                v = row[i]
                if type(v) is int and 0 <= v < top:
                    row[i] = lines[v]
            if names and type(row[1]) is list:  # an import's [name, alias] pairs
                for pair in row[1]:
                    if type(pair) is list:
                        pair[:] = [_intern(x) if type(x) is str else x for x in pair]


def _rows(got: Any, kind: type, types: tuple, build: bool = True) -> list | int:
    """The checked rows of one kind (``build``: as records; else their number)."""
    if type(got) is not list:
        raise _Bad(kind.__name__)
    shared = _SHARED.get(kind) if build else None
    if shared:
        _share(got, *shared, kind is Import)
    n = len(types)
    # one pass: a row that is not a list of n values of these types is left out (and then
    # the counts differ); ``true`` passes for an int, as 1 would
    if not build:
        good = sum(
            1
            for row in got
            if type(row) is list and len(row) == n and all(map(isinstance, row, types))
        )
        if good != len(got):
            raise _Bad(kind.__name__)
        return good
    out = [
        _new(kind, row)
        for row in got
        if type(row) is list and len(row) == n and all(map(isinstance, row, types))
    ]
    if len(out) != len(got):
        raise _Bad(kind.__name__)
    return out


def facts_from_data(
    data: Any, path: str | None = None, source: bytes | Mapping[str, bytes] | None = None
) -> FileFacts | None:
    """:meth:`FileFacts.from_json` of decoded JSON, or None unless every field has the type
    the dataclass declares (and the path is ``path``, when given). With ``source`` (the
    facts JSON of ``data``, or a mapping that gives it by path): a :class:`LazyFacts`."""
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
        rows: dict[str, Any] = {}
        counts: dict[str, int] = {}
        for key, (kind, types) in _ROWS.items():
            if source is not None and key in _LAZY:
                counts[key] = _rows(data[key], kind, types, build=False)  # type: ignore[assignment]
            else:
                rows[key] = _rows(data[key], kind, types)
        for imp in rows["imports"]:
            for pair in imp.names:
                if not _fits(pair, _PAIR):
                    raise _Bad("imports.names")
    except (KeyError, _Bad):
        return None
    if source is not None:
        return LazyFacts(source, counts, **scalars, **rows)
    return FileFacts(**scalars, **rows)


class LazyFacts(FileFacts):
    """:class:`FileFacts` whose calls, mentions and bindings stay in the file's facts JSON (checked
    when it was decoded) until read: each read decodes and checks them again from
    ``source`` (the JSON, or a mapping that gives it by path, such as the indexer's
    spool) and keeps nothing, unless they are set. Equal to the FileFacts of the same
    facts."""

    def __init__(
        self, source: bytes | Mapping[str, bytes], counts: dict[str, int], **fields: Any
    ) -> None:
        self._source = source
        self._counts = counts
        FileFacts.__init__(self, **fields)  # sets the lazy ones to [] (kept: dropped)
        for key in _LAZY:
            self.__dict__.pop("_" + key, None)

    def _read(self, key: str) -> list:
        got = self.__dict__.get("_" + key)
        if got is not None:
            return got
        if not self._counts.get(key):
            return []
        src = self._source
        try:
            data = orjson.loads(src if isinstance(src, bytes) else src[self.path])
            kind, types = _ROWS[key]
            if type(data) is not dict or data.get("path") != self.path:
                raise _Bad("path")
            rows = _rows(data[key], kind, types)
            if len(rows) != self._counts[key]:  # type: ignore[arg-type]
                raise _Bad(key)
            return rows  # type: ignore[return-value]
        except (KeyError, TypeError, ValueError, OSError, _Bad) as e:
            log.warning(
                "%s: graph facts changed since they were read (%r); its %s are left out",
                self.path,
                e,
                key,
            )
            return []

    @property  # type: ignore[override]
    def calls(self) -> list:
        return self._read("calls")

    @calls.setter
    def calls(self, value: list) -> None:
        self.__dict__["_calls"] = value

    @property  # type: ignore[override]
    def bindings(self) -> list:
        return self._read("bindings")

    @bindings.setter
    def bindings(self, value: list) -> None:
        self.__dict__["_bindings"] = value

    @property  # type: ignore[override]
    def mentions(self) -> list:
        return self._read("mentions")

    @mentions.setter
    def mentions(self, value: list) -> None:
        self.__dict__["_mentions"] = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileFacts):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(FileFacts))

    __hash__ = None  # type: ignore[assignment]


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


def decode_events(raw: bytes) -> list[tuple] | None:
    """One file's edge events of one phase, as :func:`encode_result` writes them (a JSON
    list of events), checked as :func:`result_from_data` checks them, with their text
    shared (``sys.intern``: ids repeat across files, and the merged edges keep them) and
    their confidences one float object each; None for anything else."""
    try:
        data = orjson.loads(raw)
    except ValueError:
        return None
    if type(data) is not list:
        return None
    out = []
    floats = _FLOATS
    for ev in data:
        if type(ev) is not list:
            return None
        if len(ev) == 6 and all(map(isinstance, ev, _EDGE)) and ev[2] in _EDGE_TYPES:
            s, d, t, conf, line, via = ev
            conf = floats.setdefault(conf, conf)
            out.append((_intern(s), _intern(d), _intern(t), conf, line, _intern(via)))
        elif len(ev) == 3 and all(map(isinstance, ev, _PLACEHOLDER)):
            out.append((_intern(ev[0]), _intern(ev[1]), ev[2]))
        else:
            return None
    return out


_FLOATS: dict[float, float] = {}


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
    "LazyFacts",
    "decode_facts",
    "decode_events",
    "decode_facts_lazy",
    "encode_facts",
    "encode_result",
    "facts_from_data",
    "result_from_data",
    "result_to_data",
    "signature_from_data",
]
