"""The repository tables the resolver looks names up in, built from every file's facts.

File and definition nodes with their ``defines`` edges, definitions by file, name and
qualified name, class members (methods of Go receivers and Rust impls attach to their
type here, wherever it is defined), bindings by scope, the names each file's imports bind,
declared bases, and each language's own tables. Rebuilding them is cheap; the incremental
build compares their :func:`snapshot` with the previous one to see what a change touched.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from llmc.graph.model import DEFINES, FILE, SECTION, FileFacts, Node, node_id

if TYPE_CHECKING:
    from llmc.graph.lookup import Lookup
    from llmc.graph.modules import ModuleIndex


def build_tables(r: Lookup) -> None:
    r.nodes = {}
    r.defs, r.impls = {}, {}
    r.by_name, r.by_qual = defaultdict(list), defaultdict(list)
    r.members = defaultdict(dict)
    r.bindings = {}  # made per file when read (Lookup.bindings_of)
    r.names, r.wild, r.reexports = {}, defaultdict(list), defaultdict(list)
    r.raw_bases = defaultdict(list)
    r.inherit_entries = defaultdict(list)  # path -> [(owner, index in raw_bases, base, line)]
    # What each file put in the tables across files, so that a kept resolver can take it
    # out again (:mod:`llmc.graph.patch`): its methods attached to a type elsewhere, its
    # declared bases with their owners, and what those owner lookups read.
    r.orphans = {}  # path -> [(owner id or None, Def)]
    r.inherit_owners = {}  # path -> [(owner id, scope, base, line)]
    r.owner_reads = {}  # path -> keys read to find the owners above
    for path, f in r.facts.items():
        _index_file(r, path, f)
    for path in r.facts:
        attach_orphans(r, path)
    for path in r.facts:
        attach_bases(r, path)
    r.memo.clear()  # lookups above ran before every member was attached


def orphan_defs(r: Lookup, path: str) -> Iterator[tuple[str | None, Any]]:
    """(owner type's node or None, definition) for each definition of ``path`` whose
    parent is not defined in that file: a method of an impl block or of a Go receiver type
    declared elsewhere."""
    for d in r.facts[path].defs:
        if d.kind == "impl" or d.kind == SECTION:
            continue
        parent = d.qualname.rpartition(".")[0]
        if not parent or parent in r.defs[path]:
            continue
        yield r.owner_class(path, parent), d


def attach_orphans(r: Lookup, path: str) -> None:
    """Methods of an impl block or a Go receiver type, attached to their type's members."""
    r.memo.reads = set()
    out = []
    for owner, d in orphan_defs(r, path):
        out.append((owner, d))
        if owner is not None:
            r.members[owner].setdefault(d.name, node_id(path, d.qualname))
            r.table.add(owner, node_id(path, d.qualname), DEFINES)
    if out:
        r.orphans[path] = out
    if r.memo.reads:
        r.owner_reads[path] = set(r.memo.reads)


def attach_bases(r: Lookup, path: str) -> None:
    """Each declared base of the file's classes (and impl blocks), on its owner."""
    r.memo.reads = set()
    out = []
    for inh in r.facts[path].inherits:
        scope = inh.scope
        if r.def_kind(path, scope) == "impl":
            owner = r.owner_class(path, scope)
        else:
            owner = node_id(path, scope) if scope in r.defs[path] else None
        if owner is not None:
            r.inherit_entries[path].append((owner, len(r.raw_bases[owner]), inh.base, inh.line))
            r.raw_bases[owner].append((path, scope, inh.base, inh.line))
            out.append((owner, scope, inh.base, inh.line))
    if out:
        r.inherit_owners[path] = out
    if r.memo.reads:
        r.owner_reads.setdefault(path, set()).update(r.memo.reads)


def _index_file(r: Lookup, path: str, f: FileFacts) -> None:
    rules = r.rules_of(path)
    r.nodes[path] = Node(
        FILE,
        posixpath.basename(path),
        path,
        f.lang,
        1,
        max(1, f.end_line),
        f.test,
        category=f.category,
        module=rules.module_name(path, f),
    )
    defs = r.defs[path] = {}
    impls = r.impls[path] = {}
    where = (path, f.lang, "", "")  # its definitions' nodes share it
    for d in f.defs:
        if d.kind == "impl":
            impls.setdefault(d.qualname, d)
            continue
        defs[d.qualname] = d
        nid = node_id(path, d.qualname)
        r.nodes[nid] = Node.of_def(d, where)
        if d.kind != SECTION:
            r.by_name[d.name].append(nid)
            r.by_qual[d.qualname].append(nid)
    for d in f.defs:
        if d.kind == "impl":
            continue
        nid = node_id(path, d.qualname)
        parent = d.qualname.rpartition(".")[0]
        if d.kind == SECTION:
            parent = d.qualname.rpartition(" > ")[0]
            r.table.add(node_id(path, parent) if parent in defs else path, nid, DEFINES)
        elif not parent:
            r.table.add(path, nid, DEFINES)
        elif parent in defs:
            r.table.add(node_id(path, parent), nid, DEFINES)
            r.members[node_id(path, parent)][d.name] = nid
        else:  # owner found once every file is indexed (attach_orphans)
            r.table.add(path, nid, DEFINES)
    _index_imports(r, path, f)
    rules.index_file(path, f)


def _index_imports(r: Lookup, path: str, f: FileFacts) -> None:
    """The file's re-exports and wildcard imports. The names its imports bind are made
    when a lookup first asks for them (``Lookup.names_of``)."""
    wild: list = []
    r.rules_of(path).import_names(path, f, wild)
    if wild:
        r.wild[path].extend(wild)
    for imp in f.imports:
        if imp.kind == "reexport":
            r.reexports[path].append(imp)


def value(r: Lookup, key: tuple) -> Any:
    """The table entry a lookup that recorded ``key`` read (see
    :class:`~llmc.graph.lookup.Lookup`): equal values mean equal answers. Line numbers
    are apart (``lines``): few lookups read them."""
    kind, arg = key[0], key[1]
    if kind == "iface":
        f = r.facts.get(arg)
        if f is None:
            return None
        return (
            f.lang,
            f.category,
            f.module,
            f.test,
            f.default_export,
            r.nodes[arg].get("module", ""),
            tuple((d.name, d.qualname, d.kind, d.returns, d.test) for d in f.defs),
            tuple(tuple(map(_frozen, i)) for i in f.imports),
        )
    if kind == "bind":
        f = r.facts.get(arg)
        return tuple((b.scope, b.name, b.type, b.call, b.value) for b in f.bindings) if f else None
    if kind == "lines":
        f = r.facts.get(arg)
        if f is None:
            return None
        return (
            tuple((d.qualname, d.start_line, d.end_line) for d in f.defs),
            tuple(b.line for b in f.bindings),
        )
    if kind == "members":
        return dict(r.members.get(arg) or {})
    if kind == "inherits":
        return tuple(r.inherit_entries.get(arg) or ())
    if kind == "bases":
        return tuple(entry[:3] for entry in r.raw_bases.get(arg) or ())
    if kind == "name":
        return tuple((n, r.nodes[n]["kind"]) for n in r.by_name.get(arg) or ())
    if kind == "qual":
        return tuple((n, r.nodes[n]["kind"]) for n in r.by_qual.get(arg) or ())
    for rules in r.family_rules.values():
        if rules.table_key == kind:
            return rules.value(key)
    return None


def file_keys(r: Lookup, path: str, f: FileFacts) -> set[tuple]:
    """The keys of every table entry that ``path``'s facts ``f`` add to, but for the types
    its impl methods and bases attach to elsewhere (their owners are looked up)."""
    keys: set[tuple] = {("iface", path), ("bind", path), ("lines", path), ("inherits", path)}
    quals = {d.qualname for d in f.defs if d.kind != "impl"}
    for d in f.defs:
        if d.kind == "impl" or d.kind == SECTION:
            continue
        keys.add(("name", d.name))
        keys.add(("qual", d.qualname))
        parent = d.qualname.rpartition(".")[0]
        if parent in quals:
            keys.add(("members", node_id(path, parent)))
    rules = r.rules.get(path)
    if rules is not None:
        keys.update(rules.keys(path, f))
    return keys


def module_signature(facts: dict[str, FileFacts], m: ModuleIndex) -> tuple:
    """What import resolution depends on besides the tables: the file list, each file's
    language and package clause, and what was read from disk (``__init__.py``, ``go.mod``).
    When it changes, every file is resolved again."""
    return (
        tuple((p, f.lang, f.category, f.module) for p, f in sorted(facts.items())),
        tuple(sorted(m.py_pkg_dirs)),
        tuple(m.go_modules),
    )


def _frozen(v: Any) -> Any:
    return tuple(map(_frozen, v)) if isinstance(v, list) else v


__all__ = [
    "attach_bases",
    "attach_orphans",
    "build_tables",
    "file_keys",
    "module_signature",
    "value",
]
