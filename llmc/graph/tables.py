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
from typing import TYPE_CHECKING, Any

from llmc.graph.model import DEFINES, FILE, SECTION, FileFacts, node_id
from llmc.graph.rules.base import ImportRef

if TYPE_CHECKING:
    from llmc.graph.lookup import Lookup


def build_tables(r: Lookup) -> None:
    r.nodes = {}
    r.defs, r.impls = {}, {}
    r.by_name, r.by_qual = defaultdict(list), defaultdict(list)
    r.members = defaultdict(dict)
    r.bindings = defaultdict(lambda: defaultdict(list))
    r.names, r.wild, r.reexports = {}, defaultdict(list), defaultdict(list)
    r.raw_bases = defaultdict(list)
    r.inherit_entries = defaultdict(list)  # path -> [(owner, index in raw_bases, base, line)]
    orphans: list[tuple[str, Any]] = []
    inherits: list[tuple[str, str, str, int]] = []
    for path, f in r.facts.items():
        _index_file(r, path, f, orphans)
        inherits.extend((path, inh.scope, inh.base, inh.line) for inh in f.inherits)
    for path, d in orphans:  # methods of an impl block or a Go receiver type
        owner = r.owner_class(path, d.qualname.rpartition(".")[0])
        if owner is not None:
            r.members[owner].setdefault(d.name, node_id(path, d.qualname))
            r.table.add(owner, node_id(path, d.qualname), DEFINES)
    for path, scope, base, line in inherits:
        if r.def_kind(path, scope) == "impl":
            owner = r.owner_class(path, scope)
        else:
            owner = node_id(path, scope) if scope in r.defs[path] else None
        if owner is not None:
            r.inherit_entries[path].append((owner, len(r.raw_bases[owner]), base, line))
            r.raw_bases[owner].append((path, scope, base, line))
    r.memo.clear()  # lookups above ran before every member was attached


def _index_file(r: Lookup, path: str, f: FileFacts, orphans: list) -> None:
    rules = r.rules_of(path)
    r.nodes[path] = _clean(
        {
            "kind": FILE,
            "name": posixpath.basename(path),
            "path": path,
            "lang": f.lang,
            "category": f.category,
            "start_line": 1,
            "end_line": max(1, f.end_line),
            "test": f.test,
            "module": rules.module_name(path, f),
        }
    )
    defs = r.defs[path] = {}
    impls = r.impls[path] = {}
    for d in f.defs:
        if d.kind == "impl":
            impls.setdefault(d.qualname, d)
            continue
        defs[d.qualname] = d
        nid = node_id(path, d.qualname)
        r.nodes[nid] = _clean(
            {
                "kind": d.kind,
                "name": d.name,
                "qualname": d.qualname,
                "path": path,
                "lang": f.lang,
                "start_line": d.start_line,
                "end_line": d.end_line,
                "test": d.test,
            }
        )
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
        else:  # owner found once every file is indexed
            r.table.add(path, nid, DEFINES)
            orphans.append((path, d))
    for b in f.bindings:
        r.bindings[(path, b.scope)][b.name].append(b)
    _index_imports(r, path, f)
    rules.index_file(path, f)


def _index_imports(r: Lookup, path: str, f: FileFacts) -> None:
    names: dict[str, list[ImportRef]] = defaultdict(list)
    rules = r.rules_of(path)
    for imp in f.imports:
        if imp.kind == "reexport":
            r.reexports[path].append(imp)
        elif rules.bind_import(path, imp, names):
            pass
        elif imp.kind == "mod":
            names[imp.module].append(ImportRef("module", imp))
        elif not imp.names:
            if imp.alias:
                names[imp.alias].append(ImportRef("module", imp))
            elif top := rules.bare_import(imp):
                names[top].append(ImportRef("top", imp))
        else:
            if imp.alias:  # JS `import * as ns` together with other names
                names[imp.alias].append(ImportRef("module", imp))
            for name, alias in imp.names:
                if name == "*":
                    r.wild[path].append(imp)
                else:
                    names[alias or name].append(ImportRef("name", imp, name))
    r.names[path] = names


def snapshot(r: Lookup) -> dict[tuple, Any]:
    """Every table entry another file's resolution can read, by the key it records when
    it reads it (see :class:`~llmc.graph.lookup.Lookup`): equal snapshot values mean
    equal answers. Line numbers are apart (``lines``): few lookups read them."""
    out: dict[tuple, Any] = {}
    for path, f in r.facts.items():
        out[("iface", path)] = (
            f.lang,
            f.category,
            f.module,
            f.test,
            f.default_export,
            r.nodes[path].get("module", ""),
            tuple((d.name, d.qualname, d.kind, d.returns, d.test) for d in f.defs),
            tuple(tuple(map(_frozen, i.to_row())) for i in f.imports),
        )
        out[("bind", path)] = tuple((b.scope, b.name, b.type, b.call, b.value) for b in f.bindings)
        out[("lines", path)] = (
            tuple((d.qualname, d.start_line, d.end_line) for d in f.defs),
            tuple(b.line for b in f.bindings),
        )
    for cid, members in r.members.items():
        out[("members", cid)] = dict(members)
    for path, entries in r.inherit_entries.items():
        out[("inherits", path)] = tuple(entries)
    for cid, raw in r.raw_bases.items():
        out[("bases", cid)] = tuple(entry[:3] for entry in raw)
    for name, nids in r.by_name.items():
        out[("name", name)] = tuple((n, r.nodes[n]["kind"]) for n in nids)
    for qual, nids in r.by_qual.items():
        out[("qual", qual)] = tuple((n, r.nodes[n]["kind"]) for n in nids)
    for rules in r.family_rules.values():
        rules.snapshot(out)
    return out


def module_signature(r: Lookup) -> tuple:
    """What import resolution depends on besides the snapshot: the file list, each file's
    language and package clause, and what was read from disk (``__init__.py``, ``go.mod``).
    When it changes, every file is resolved again."""
    m = r.mods
    return (
        tuple((p, f.lang, f.category, f.module) for p, f in sorted(r.facts.items())),
        tuple(sorted(m.py_pkg_dirs)),
        tuple(m.go_modules),
    )


def _frozen(v: Any) -> Any:
    return tuple(map(_frozen, v)) if isinstance(v, list) else v


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in ("", None, False)}


__all__ = ["build_tables", "module_signature", "snapshot"]
