"""Records of the repository graph: per-file facts, node ids, edge types, build stats.

Extraction turns one file into a :class:`FileFacts` (definitions, calls, imports, bindings,
inheritance, doc mentions) that does not depend on any other file, so it can be cached by
content. Resolution (``resolve.py``) joins all files' facts into nodes and edges.
Facts serialise to compact JSON rows (lists), not dicts, to keep the cache small.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, NamedTuple

_intern = sys.intern

SCHEMA = "llmc.rag_graph"
SCHEMA_VERSION = 1
FACTS_VERSION = 8  # 8: doc sections by llmc/headings.py (7: JSON Lines; 6: a pickle)
GRAPH_FILE = "rag_graph.json"
FACTS_FILE = "graph_facts.jsonl"

# Edge types.
DEFINES = "defines"  # file -> top-level def, class -> method, doc file -> section
CALLS = "calls"  # caller def (or file for module-level code) -> callee def / class
IMPORTS = "imports"  # file -> imported file, file -> imported def
INHERITS = "inherits"  # class -> base class / interface / trait
TESTS = "tests"  # test function (or test file) -> code it calls or imports
MENTIONS = "mentions"  # doc section -> def or file it names
EDGE_TYPES = (DEFINES, CALLS, IMPORTS, INHERITS, TESTS, MENTIONS)
# Edge types whose targets are resolved by name and so have a resolution rate.
RESOLVED_TYPES = (CALLS, IMPORTS, INHERITS, MENTIONS)

# Node kinds.
FILE = "file"
UNRESOLVED = "unresolved"  # name-only placeholder target of an unresolved reference
SECTION = "section"
CLASS_KINDS = frozenset({"class", "interface", "struct", "trait", "enum", "impl"})
FUNC_KINDS = frozenset({"function", "method"})
TYPE_KINDS = CLASS_KINDS | {"type"}  # what a type name can denote
CALLABLE = FUNC_KINDS | TYPE_KINDS  # what a call can reach

# Confidences of resolved edges.
EXACT = 1.0  # by scope, import or path rule
INFERRED = 0.9  # through an inferred variable type or inheritance
BY_NAME = 0.6  # the only definition with that name in the repository
NAME_ONLY = 0.3  # unresolved: edge to the ``?name`` placeholder


def node_id(path: str, qualname: str = "") -> str:
    """``path`` for a file, ``path::Qualified.name`` for a definition or section (one
    shared string per id, ``sys.intern``: the nodes, the name tables, the language tables
    and the merged edges all hold the same id, ~0.5M times on nine large projects)."""
    return _intern(f"{path}::{qualname}") if qualname else path


def unresolved_id(name: str) -> str:
    return f"?{name}"


@lru_cache(maxsize=1 << 16)
def scope_chain(scope: str) -> tuple[str, ...]:
    """``a.b.c`` → ``("a.b.c", "a.b", "a", "")``: a scope and the scopes around it
    (memoised: resolution asks for the same few scopes hundreds of thousands of times)."""
    out = []
    while scope:
        out.append(scope)
        scope = scope.rpartition(".")[0]
    out.append("")
    return tuple(out)


def split_node_id(nid: str) -> tuple[str, str]:
    path, _, qual = nid.partition("::")
    return path, qual


_NODE_FIELDS = (
    "kind",
    "name",
    "qualname",
    "path",
    "lang",
    "category",
    "start_line",
    "end_line",
    "test",
    "module",
)
_NODE_FIELD_SET = frozenset(_NODE_FIELDS)
_EMPTY = ("", None, False)  # a field of one of these values is left out (and 0 == False)


class Node(Mapping):
    """A file's or definition's node attributes, read as the dict the graph file writes:
    the fields in ``_NODE_FIELDS`` order but those empty, then ``span_id`` once set (the
    one field set later, by :mod:`llmc.graph.spanmap`). Three slots: the definition's own
    record (a :class:`Def`, shared with the facts: :meth:`of_def`) and its file's fields
    (one tuple per file), not ten fields of its own: ~1M of them on 89k files, at 64
    bytes each instead of ~150."""

    __slots__ = ("_def", "_file", "span_id")

    def __init__(
        self,
        kind: str,
        name: str,
        path: str,
        lang: str = "",
        start_line: int = 0,
        end_line: int = 0,
        test: bool = False,
        qualname: str = "",
        category: str = "",
        module: str = "",
    ) -> None:
        self._def = Def(name, qualname, kind, start_line, end_line, "", test)
        self._file = (path, lang, category, module)
        self.span_id: int | None = None

    @classmethod
    def of_def(cls, d: Def, file: tuple[str, str, str, str]) -> Node:
        """The node of definition ``d`` of the file whose (path, lang, "", "") is ``file``
        (a tuple its definitions share)."""
        n = cls.__new__(cls)
        n._def, n._file, n.span_id = d, file, None
        return n

    # a definition's fields in its Def's order, its file's in (path, lang, category, module)
    name = property(lambda self: self._def[0])
    qualname = property(lambda self: self._def[1])
    kind = property(lambda self: self._def[2])
    start_line = property(lambda self: self._def[3])
    end_line = property(lambda self: self._def[4])
    test = property(lambda self: self._def[6])
    path = property(lambda self: self._file[0])
    lang = property(lambda self: self._file[1])
    category = property(lambda self: self._file[2])
    module = property(lambda self: self._file[3])

    def keys(self) -> list[str]:  # type: ignore[override]
        out = [k for k in _NODE_FIELDS if getattr(self, k) not in _EMPTY]
        if self.span_id is not None:
            out.append("span_id")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.keys()}

    def __getitem__(self, key: str) -> Any:
        if key in _NODE_FIELD_SET:
            v = getattr(self, key)
            if v not in _EMPTY:
                return v
        elif key == "span_id" and self.span_id is not None:
            return self.span_id
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: str, value: Any) -> None:
        if key != "span_id":
            raise TypeError(f"a node's {key!r} is set when it is made")
        self.span_id = value

    def pop(self, key: str, *default: Any) -> Any:
        if key != "span_id":
            raise TypeError(f"a node's {key!r} is set when it is made")
        v, self.span_id = self.span_id, None
        if v is None:
            if default:
                return default[0]
            raise KeyError(key)
        return v

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Node):
            other = other.as_dict()
        return isinstance(other, Mapping) and self.as_dict() == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Node({self.as_dict()!r})"


class Def(NamedTuple):
    """A definition; ``qualname`` is relative to its file (``Class.method``)."""

    name: str
    qualname: str
    kind: str  # class, interface, function, method, module, impl (pseudo), section
    start_line: int
    end_line: int
    returns: str = ""  # declared return type text, for type inference
    test: bool = False


class Call(NamedTuple):
    """A call (or ``new``) in ``scope`` (qualname of the enclosing def, "" = module)."""

    scope: str
    name: str
    receiver: str  # text left of the name ("self", "os.path", "crate::a"), "" if none
    line: int
    new: bool = False


class Import(NamedTuple):
    """One imported module and the names bound from it.

    ``names`` is a list of ``[name, alias]``; ``["*", ""]`` is a wildcard. ``alias`` binds the
    module itself (``import a.b as c``, ``import * as ns``, Go package alias). ``level`` counts
    the dots of a Python relative import. ``kind`` is ``import``, ``reexport`` or ``mod``.
    """

    module: str
    names: list[list[str]]
    alias: str
    line: int
    level: int = 0
    kind: str = "import"
    scope: str = ""


class Binding(NamedTuple):
    """``name`` in ``scope`` holds a value of type ``type``, the result of calling ``call``,
    or whatever the expression ``value`` denotes.

    A binding whose scope is a class is an attribute (``self.x = Foo()``, a field).
    """

    scope: str
    name: str
    type: str
    call: str
    line: int
    value: str = ""  # an alias: ``name = other.thing`` (not called)


class Inherit(NamedTuple):
    scope: str  # qualname of the class (or impl pseudo-def) that inherits
    base: str
    line: int


class Mention(NamedTuple):
    """A doc section's reference to code: inline code, autodoc directive, link or path."""

    scope: str  # section qualname
    text: str
    kind: str  # inline, role, autodoc, link, path
    line: int


@dataclass
class FileFacts:
    """Everything extraction learned from one file, independent of every other file."""

    path: str
    lang: str
    category: str  # code or doc
    module: str = ""  # Go / Java package clause
    test: bool = False
    default_export: str = ""  # JS/TS: name behind ``export default``
    error: str = ""  # why extraction was partial or skipped
    defs: list[Def] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    inherits: list[Inherit] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    end_line: int = 0

    _ROWS = {
        "defs": Def,
        "calls": Call,
        "imports": Import,
        "bindings": Binding,
        "inherits": Inherit,
        "mentions": Mention,
    }

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "lang": self.lang,
            "category": self.category,
            "module": self.module,
            "test": self.test,
            "default_export": self.default_export,
            "error": self.error,
            "end_line": self.end_line,
        }
        for key in self._ROWS:
            out[key] = [list(r) for r in getattr(self, key)]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileFacts:
        rows = {key: [kind(*r) for r in data.get(key, ())] for key, kind in cls._ROWS.items()}
        return cls(
            path=data["path"],
            lang=data["lang"],
            category=data["category"],
            module=data.get("module", ""),
            test=bool(data.get("test", False)),
            default_export=data.get("default_export", ""),
            error=data.get("error", ""),
            end_line=int(data.get("end_line", 0)),
            **rows,
        )


@dataclass(frozen=True)
class GraphStats:
    """What one graph build did and what the graph holds."""

    generation: int = 0
    nodes: int = 0
    edges: int = 0
    nodes_by_kind: dict[str, int] = field(default_factory=dict)
    edges_by_type: dict[str, int] = field(default_factory=dict)
    # Per edge type: {"resolved": n, "unresolved": n, "external": n, "rate": 0..1}.
    resolution: dict[str, dict[str, float]] = field(default_factory=dict)
    files: int = 0
    files_extracted: int = 0
    files_cached: int = 0
    files_failed: int = 0
    files_resolved: int = 0  # files whose references were resolved again (the rest reused)
    rebuilt: bool = False
    seconds: float = 0.0

    @property
    def resolution_rate(self) -> float:
        """Share of call references resolved to a definition (1.0 when there are none)."""
        return float(self.resolution.get(CALLS, {}).get("rate", 1.0))

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GraphStats:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


__all__ = [
    "Binding",
    "CALLS",
    "Call",
    "DEFINES",
    "Def",
    "EDGE_TYPES",
    "FileFacts",
    "GraphStats",
    "IMPORTS",
    "INHERITS",
    "Import",
    "Inherit",
    "MENTIONS",
    "Mention",
    "TESTS",
    "node_id",
]
