"""Cross-file resolution: every file's facts → nodes and typed, weighted edges.

Names are looked up the way the language does it, as far as a static tool can: enclosing
function scopes, then the module (or Go package, or Java class with its implicit ``this``),
then imported names, wildcard imports, builtins. A receiver (``a.b`` in ``a.b.f()``) is
resolved segment by segment to a module, a package, a class, or an *instance* of a class
(``self``, a variable bound to ``Foo()``, an annotated parameter, a field); methods are found
through base classes. What cannot be pinned down is, in order: dropped as external (no
definition with that name exists in the repository), resolved by name when exactly one
definition carries it (lower confidence), or kept as a name-only edge to a ``?name`` node.

Every lookup that can chain (re-exports, inherited members, variable types) is memoised and
depth-limited, so import cycles, inheritance cycles and self-referencing bindings terminate.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmc.graph.extract import LITERAL
from llmc.graph.langs import COMMON_METHODS, LangSpec, spec_for
from llmc.graph.model import (
    BY_NAME,
    CALLS,
    CLASS_KINDS,
    DEFINES,
    EXACT,
    FILE,
    FUNC_KINDS,
    IMPORTS,
    INFERRED,
    INHERITS,
    MENTIONS,
    NAME_ONLY,
    RESOLVED_TYPES,
    SECTION,
    TESTS,
    UNRESOLVED,
    Binding,
    FileFacts,
    Import,
    node_id,
    unresolved_id,
)
from llmc.graph.modules import ModuleIndex

log = logging.getLogger(__name__)

Target = tuple  # ("node", id) | ("pkg", key) | ("inst", class id) | ("super", class id) | EXT
EXT: Target = ("ext",)
MAX_DEPTH = 16
_IDENT = re.compile(r"[A-Za-z_$][\w$]*\Z")
_LITERAL = re.compile(r"""^(?:[rbfuRBFU]{0,2}["'`]|[\[{]|-?\d)""")
_TYPE_KINDS = CLASS_KINDS | {"type"}
_CALLABLE = FUNC_KINDS | CLASS_KINDS | {"type"}
_MENTION_EXTS = re.compile(
    r"\.(py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|md|rst|toml|json|ya?ml|cfg|txt)$"
)


def split_path(text: str) -> list[str] | None:
    """``a.b.c`` / ``a::b`` / ``Foo::<T>::new`` → segments; None for any other expression."""
    segs = _split_path(text)
    return list(segs) if segs is not None else None


@lru_cache(maxsize=65536)
def _split_path(text: str) -> tuple[str, ...] | None:
    text = re.sub(r"::<[^<>]*>|<[^<>]*>", "", text.strip())
    if text in ("super()",):
        return (text,)
    segs = tuple(s.strip() for s in re.split(r"::|\.", text))
    if not segs or not all(_IDENT.match(s) for s in segs):
        return None
    return segs


class Resolver:
    """Builds nodes and edges for a whole repository from its files' facts."""

    def __init__(
        self,
        facts: dict[str, FileFacts],
        repo_root: Path | None = None,
        name_fallback: bool = True,
    ):
        self.facts = facts
        self.name_fallback = name_fallback
        self.mods = ModuleIndex(facts, repo_root)
        self.specs: dict[str, LangSpec] = {}
        for path, f in facts.items():
            spec = spec_for(path, f.lang) if f.category == "code" else None
            if spec is not None:
                self.specs[path] = spec
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.counts = {t: {"resolved": 0, "unresolved": 0, "external": 0} for t in RESOLVED_TYPES}
        self._memo: dict[tuple, Any] = {}
        self._busy: set[tuple] = set()
        self._depth = 0
        self._inferred = False
        self._index()

    # == indexes =========================================================================
    def _index(self) -> None:
        self.defs: dict[str, dict[str, Any]] = {}  # path -> qual -> Def (real definitions)
        self.impls: dict[str, dict[str, Any]] = {}  # path -> qual -> impl pseudo-def
        self.by_name: dict[str, list[str]] = defaultdict(list)
        self.by_qual: dict[str, list[str]] = defaultdict(list)
        self.members: dict[str, dict[str, str]] = defaultdict(dict)
        self.bindings: dict[tuple[str, str], dict[str, list[Binding]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.names: dict[str, dict[str, list[tuple]]] = {}  # path -> name -> import refs
        self.wild: dict[str, list[Import]] = defaultdict(list)
        self.reexports: dict[str, list[Import]] = defaultdict(list)
        self.go_members: dict[str, dict[str, str]] = defaultdict(dict)
        self.go_members_all: dict[str, dict[str, str]] = defaultdict(dict)
        self.java_fqn: dict[str, str] = {}
        self.py_fqn: dict[str, str] = {}
        self.raw_bases: dict[str, list[tuple[str, str, str, int]]] = defaultdict(list)
        inherits: list[tuple[str, str, str, int]] = []
        orphans: list[tuple[str, Any]] = []

        for path, f in self.facts.items():
            self.nodes[path] = _clean(
                {
                    "kind": FILE,
                    "name": posixpath.basename(path),
                    "path": path,
                    "lang": f.lang,
                    "category": f.category,
                    "start_line": 1,
                    "end_line": max(1, f.end_line),
                    "test": f.test,
                    "module": self._module_name(path, f),
                }
            )
            defs = self.defs[path] = {}
            impls = self.impls[path] = {}
            for d in f.defs:
                if d.kind == "impl":
                    impls.setdefault(d.qualname, d)
                    continue
                defs[d.qualname] = d
                nid = node_id(path, d.qualname)
                self.nodes[nid] = _clean(
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
                    self.by_name[d.name].append(nid)
                    self.by_qual[d.qualname].append(nid)
            for d in f.defs:
                if d.kind == "impl":
                    continue
                nid = node_id(path, d.qualname)
                parent, _, _ = d.qualname.rpartition(".")
                if d.kind == SECTION:
                    parent = d.qualname.rpartition(" > ")[0]
                    self._edge(node_id(path, parent) if parent in defs else path, nid, DEFINES)
                elif not parent:
                    self._edge(path, nid, DEFINES)
                elif parent in defs:
                    self._edge(node_id(path, parent), nid, DEFINES)
                    self.members[node_id(path, parent)][d.name] = nid
                else:  # method of an impl block or a Go receiver type: owner found later
                    self._edge(path, nid, DEFINES)
                    orphans.append((path, d))
            for b in f.bindings:
                self.bindings[(path, b.scope)][b.name].append(b)
            self._index_imports(path, f)
            for inh in f.inherits:
                inherits.append((path, inh.scope, inh.base, inh.line))
            self._index_lang(path, f)
        for path, d in orphans:
            owner_qual, _, _ = d.qualname.rpartition(".")
            owner = self._owner_class(path, owner_qual)
            if owner is not None:
                self.members[owner].setdefault(d.name, node_id(path, d.qualname))
                self._edge(owner, node_id(path, d.qualname), DEFINES)
        for path, scope, base, line in inherits:
            if self._def_kind(path, scope) == "impl":
                owner = self._owner_class(path, scope)
            else:
                owner = node_id(path, scope) if scope in self.defs[path] else None
            if owner is not None:
                self.raw_bases[owner].append((path, scope, base, line))
        self._memo.clear()  # lookups above ran before every member was attached

    def _module_name(self, path: str, f: FileFacts) -> str:
        if f.lang == "python":
            return self.mods.py_module.get(path, "")
        return f.module

    def _index_imports(self, path: str, f: FileFacts) -> None:
        names: dict[str, list[tuple]] = defaultdict(list)
        spec = self.specs.get(path)
        for imp in f.imports:
            if imp.kind == "reexport":
                self.reexports[path].append(imp)
                continue
            if spec is not None and spec.family == "go":
                if imp.alias == ".":
                    self.wild[path].append(imp)
                elif imp.alias != "_":
                    d = self.mods.resolve_go(imp.module)
                    local = imp.alias or (
                        self.mods.go_package_name(d) if d else _go_default_name(imp.module)
                    )
                    names[local].append(("module", imp))
                continue
            if imp.kind == "mod":
                names[imp.module].append(("module", imp))
                continue
            if not imp.names:
                if imp.alias:
                    names[imp.alias].append(("module", imp))
                elif spec is not None and spec.family == "python":
                    names[imp.module.split(".")[0]].append(("pytop", imp))
                continue
            if imp.alias:  # JS `import * as ns` together with other names
                names[imp.alias].append(("module", imp))
            for name, alias in imp.names:
                if name == "*":
                    self.wild[path].append(imp)
                else:
                    names[alias or name].append(("name", imp, name))
        self.names[path] = names

    def _index_lang(self, path: str, f: FileFacts) -> None:
        if f.lang == "go":
            d = posixpath.dirname(path)
            for q, _ in self.defs[path].items():
                if "." not in q:
                    self.go_members_all[d].setdefault(q, node_id(path, q))
                    if not path.endswith("_test.go"):
                        self.go_members[d].setdefault(q, node_id(path, q))
        elif f.lang == "java":
            for q, d in self.defs[path].items():
                if d.kind in _TYPE_KINDS:
                    self.java_fqn[f"{f.module}.{q}" if f.module else q] = node_id(path, q)
        elif f.lang == "python":
            mod = self.mods.py_module.get(path, "")
            for q in self.defs[path]:
                self.py_fqn[f"{mod}.{q}" if mod else q] = node_id(path, q)

    # == generic helpers ===================================================================
    def _edge(
        self,
        src: str,
        dst: str,
        etype: str,
        confidence: float = EXACT,
        line: int = 0,
        via: str = "",
    ) -> None:
        if src == dst and etype != CALLS:
            return
        key = (src, dst, etype)
        e = self.edges.get(key)
        if e is None:
            e = {"confidence": confidence, "count": 0}
            if line:
                e["line"] = line
            if via:
                e["via"] = via
            self.edges[key] = e
        else:
            if confidence > e["confidence"]:
                e["confidence"] = confidence
                if via:
                    e["via"] = via
            if line and (not e.get("line") or line < e["line"]):
                e["line"] = line
        e["count"] += 1

    def _kind(self, nid: str) -> str:
        n = self.nodes.get(nid)
        return n["kind"] if n else ""

    def _def_kind(self, path: str, qual: str) -> str:
        d = self.defs[path].get(qual)
        if d is not None:
            return d.kind
        return "impl" if qual in self.impls[path] else ""

    @staticmethod
    def _chain(scope: str) -> list[str]:
        out = []
        while scope:
            out.append(scope)
            scope = scope.rpartition(".")[0]
        out.append("")
        return out

    def _guard(self, key: tuple, fn, *args):
        """Memoised, cycle- and depth-safe call; remembers whether the answer was inferred."""
        if key in self._memo:
            result, inferred = self._memo[key]
            self._inferred = self._inferred or inferred
            return result
        if key in self._busy or self._depth > MAX_DEPTH:
            return None
        outer = self._inferred
        self._inferred = False
        self._busy.add(key)
        self._depth += 1
        try:
            result = fn(*args)
        finally:
            self._depth -= 1
            self._busy.discard(key)
        inferred = self._inferred
        self._memo[key] = (result, inferred)
        self._inferred = outer or inferred
        return result

    # == classes ===========================================================================
    def _owner_class(self, path: str, qual: str) -> str | None:
        """The class node a scope qualname denotes (a def, an impl block, a Go receiver)."""
        if not qual:
            return None
        kind = self._def_kind(path, qual)
        if kind in CLASS_KINDS and kind != "impl":
            return node_id(path, qual)
        parent, _, name = qual.rpartition(".")
        t = self.lookup(path, parent if kind == "impl" else "", name)
        if t and t[0] == "node" and self._kind(t[1]) in _TYPE_KINDS:
            return t[1]
        return None

    def enclosing_class(self, path: str, scope: str) -> str | None:
        for s in self._chain(scope):
            if not s:
                return None
            kind = self._def_kind(path, s)
            if kind in CLASS_KINDS:
                return self._owner_class(path, s)
            if not kind:  # Go receiver qualifier: "Type" in "Type.Method"
                owner = self._owner_class(path, s)
                if owner:
                    return owner
        return None

    def bases(self, cid: str) -> list[str]:
        return self._guard(("bases", cid), self._bases, cid) or []

    def _bases(self, cid: str) -> list[str]:
        return [t[1] for t, _ in self.base_targets(cid) if t and t != EXT and t[1] != cid]

    def base_targets(self, cid: str) -> list[tuple[Target | None, int]]:
        """Each declared base of class ``cid`` resolved: ("inst", base id), EXT or None."""
        return self._guard(("btargets", cid), self._base_targets, cid) or []

    def _base_targets(self, cid: str) -> list[tuple[Target | None, int]]:
        out = []
        for path, scope, base, line in self.raw_bases.get(cid, ()):
            out.append((self.resolve_type_name(path, scope.rpartition(".")[0], base), line))
        return out

    def class_member(self, cid: str, name: str) -> str | None:
        return self._guard(("member", cid, name), self._class_member, cid, name)

    def _class_member(self, cid: str, name: str) -> str | None:
        hit = self.members.get(cid, {}).get(name)
        if hit:
            return hit
        for base in self.bases(cid):
            hit = self.class_member(base, name)
            if hit:
                self._inferred = True
                return hit
        return None

    def has_external_base(self, cid: str) -> bool:
        """Whether some ancestor of ``cid`` is outside the repository (or unknown)."""
        return bool(self._guard(("extbase", cid), self._has_external_base, cid))

    def _has_external_base(self, cid: str) -> bool:
        for t, _ in self.base_targets(cid):
            if t is None or t == EXT or self.has_external_base(t[1]):
                return True
        return False

    def class_attr(self, cid: str, name: str) -> Target | None:
        """The type of attribute ``name`` of class ``cid`` (fields, ``self.x = ...``)."""
        n = self.nodes[cid]
        path, qual = n["path"], n.get("qualname", "")
        for b in self.bindings.get((path, qual), {}).get(name, ()):
            t = self.binding_type(path, qual, b)
            if t is not None:
                return t
        for base in self.bases(cid):
            t = self._guard(("attr", base, name), self.class_attr, base, name)
            if t is not None:
                return t
        return None

    # == name lookup =======================================================================
    def lookup(self, path: str, scope: str, name: str) -> Target | None:
        return self._guard(("lookup", path, scope, name), self._lookup, path, scope, name)

    def _lookup(self, path: str, scope: str, name: str) -> Target | None:
        spec = self.specs.get(path)
        if spec is None:
            return None
        if name in spec.self_names:
            cls = self.enclosing_class(path, scope)
            if cls is None:
                return None
            return ("node", cls) if name in ("cls", "Self") else ("inst", cls)
        if name in spec.super_names:
            cls = self.enclosing_class(path, scope)
            return ("super", cls) if cls else None
        defs = self.defs[path]
        for s in self._chain(scope):
            kind = self._def_kind(path, s) if s else "module"
            if not kind or (kind in CLASS_KINDS and s != scope):
                continue
            q = f"{s}.{name}" if s else name
            if q in defs:
                return ("node", node_id(path, q))
            if name in self.bindings.get((path, s), {}) and kind not in CLASS_KINDS:
                return self.var(path, s, name)
        refs = self.names.get(path, {}).get(name)
        if refs:
            return self._first(self.import_ref(path, ref) for ref in refs)
        if spec.implicit_this:
            for s in self._chain(scope):
                if s and self._def_kind(path, s) in CLASS_KINDS:
                    cls = self._owner_class(path, s)
                    if cls is None:
                        continue
                    hit = self.class_member(cls, name)
                    if hit:
                        return ("node", hit)
                    t = self.class_attr(cls, name)
                    if t is not None:
                        return t
        f = self.facts[path]
        if spec.family == "go":
            d = posixpath.dirname(path)
            members = self.go_members_all if path.endswith("_test.go") else self.go_members
            hit = members.get(d, {}).get(name)
            if hit:
                return ("node", hit)
        elif spec.family == "java":
            hit = self.java_fqn.get(f"{f.module}.{name}" if f.module else name)
            if hit:
                return ("node", hit)
        elif spec.family == "rust":
            child = self.mods.rust_child(path, name)
            if child:
                return ("node", child)
        for imp in self.wild.get(path, ()):
            mod = self.import_module(path, imp)
            if mod is not None and mod != EXT:
                t = self.member(mod, name)
                if t is not None:
                    return t
        if name in spec.builtins:
            return EXT
        return None

    def var(self, path: str, scope: str, name: str) -> Target | None:
        for b in self.bindings[(path, scope)][name]:
            t = self.binding_type(path, scope, b)
            if t is not None:
                self._inferred = True
                return t
        return None

    def binding_type(self, path: str, scope: str, b: Binding) -> Target | None:
        return self._guard(
            ("bind", path, scope, b.name, b.line), self._binding_type, path, scope, b
        )

    def _binding_type(self, path: str, scope: str, b: Binding) -> Target | None:
        if b.type == LITERAL:
            return EXT
        if b.type:
            t = self.resolve_type_name(path, scope, b.type)
            if t is not None:
                return t
        if b.call:
            segs = split_path(b.call)
            callee = self.resolve_segments(path, scope, segs) if segs else None
            return self.call_result(callee)
        if b.value:
            # An alias is read in the scope of the assignment, one level out for an
            # attribute (`self.x = x` in a method binds the class attribute x).
            where = self._value_scope(path, scope, b)
            return self.expr_target(path, where, b.value)
        return None

    def _value_scope(self, path: str, scope: str, b: Binding) -> str:
        if self._def_kind(path, scope) not in CLASS_KINDS:
            return scope
        # The binding was lifted to its class; find the method it was written in.
        best = scope
        for q, d in self.defs[path].items():
            if q.startswith(scope + ".") and d.start_line <= b.line <= d.end_line:
                if best == scope or len(q) > len(best):
                    best = q
        return best

    def call_result(self, callee: Target | None) -> Target | None:
        """The type of the value a call to ``callee`` returns, when it can be known."""
        if callee is None or callee == EXT:
            return callee
        if callee[0] != "node":
            return None
        n = self.nodes.get(callee[1])
        if n is None:
            return None
        if n["kind"] in _TYPE_KINDS:
            return ("inst", callee[1])
        if n["kind"] == FILE:
            d = self.member(callee, "default")
            return self.call_result(d) if d and d[1] != callee[1] else None
        if n["kind"] in FUNC_KINDS:
            d = self.defs[n["path"]].get(n["qualname"])
            if d is not None and d.returns:
                parent = d.qualname.rpartition(".")[0]
                return self.resolve_type_name(
                    n["path"], parent, d.returns, scope_for_self=d.qualname
                )
        return None

    def resolve_type_name(
        self, path: str, scope: str, text: str, scope_for_self: str | None = None
    ) -> Target | None:
        from llmc.graph.extract import type_head

        head = type_head(text)
        if not head:
            return None
        segs = head.split(".")
        if segs[0] in ("Self", "self"):
            cls = self.enclosing_class(path, scope_for_self or scope)
            if cls is None:
                return None
            t: Target | None = ("node", cls)
            for s in segs[1:]:
                t = self.member(t, s) if t else None
        else:
            t = self.resolve_segments(path, scope, segs)
        if t is None or t == EXT:
            return t
        if t[0] == "node" and self._kind(t[1]) in _TYPE_KINDS:
            return ("inst", t[1])
        return None

    def resolve_segments(self, path: str, scope: str, segs: list[str]) -> Target | None:
        spec = self.specs.get(path)
        rust = spec is not None and spec.family == "rust"
        if rust and (
            segs[0] in ("crate", "super")
            or (segs[0] == "self" and len(segs) > 1 and self.enclosing_class(path, scope) is None)
        ):
            modfile, rest, internal = self.mods.rust_module(path, segs)
            if not internal:
                return EXT
            t: Target | None = ("node", modfile) if modfile else None
            for s in rest:
                t = self.member(t, s) if t and t != EXT else t
            return t
        t = self.lookup(path, scope, segs[0])
        for s in segs[1:]:
            if t is None or t == EXT:
                return t
            t = self.member(t, s)
        return t

    @staticmethod
    def _first(targets) -> Target | None:
        """The first repository target; else EXT when one was external; else None."""
        ext = False
        for t in targets:
            if t == EXT:
                ext = True
            elif t is not None:
                return t
        return EXT if ext else None

    # == members ===========================================================================
    def member(self, target: Target | None, name: str) -> Target | None:
        if target is None or target == EXT:
            return target
        return self._guard(("m", target, name), self._member, target, name)

    def _member(self, target: Target, name: str) -> Target | None:
        kind = target[0]
        if kind == "pkg":
            return self._pkg_member(target[1], name)
        if kind in ("inst", "super"):
            cid = target[1]
            if kind == "super":
                for base in self.bases(cid):
                    hit = self.class_member(base, name)
                    if hit:
                        return ("node", hit)
                return EXT  # not in any repository base: object, or a library class
            hit = self.class_member(cid, name)
            if hit:
                return ("node", hit)
            return self.class_attr(cid, name)
        nid = target[1]
        n = self.nodes.get(nid)
        if n is None:
            return None
        if n["kind"] == FILE:
            return self._module_member(nid, name)
        if n["kind"] in _TYPE_KINDS:
            hit = self.class_member(nid, name)
            if hit:
                return ("node", hit)
            return self.class_attr(nid, name)
        if n["kind"] == "module":  # Rust inline module, TS namespace
            q = f"{n['qualname']}.{name}"
            if q in self.defs[n["path"]]:
                return ("node", node_id(n["path"], q))
        return None

    def _module_member(self, path: str, name: str) -> Target | None:
        f = self.facts.get(path)
        if f is None:
            return None
        defs = self.defs.get(path, {})
        if name in defs:
            return ("node", node_id(path, name))
        spec = self.specs.get(path)
        family = spec.family if spec else ""
        if family == "javascript" and name == "default":
            if not f.default_export:  # CommonJS `module.exports = {...}`: the module itself
                return ("node", path)
            if f.default_export in defs:
                return ("node", node_id(path, f.default_export))
            return self.lookup(path, "", f.default_export)
        if family == "python":
            sub = self.mods.py_submodule(path, name)
            if sub:
                return ("pkg", sub) if sub.endswith("/") else ("node", sub)
        if family == "rust":
            child = self.mods.rust_child(path, name)
            if child:
                return ("node", child)
        for imp in self.reexports.get(path, ()):
            for orig, alias in imp.names:
                if orig == "*" and not alias:
                    t = self.member(self.import_module(path, imp), name)
                    if t is not None and t != EXT:
                        return t
                elif (alias or orig) == name:
                    mod = self.import_module(path, imp)
                    return mod if orig == "*" else self.member(mod, orig)
        refs = self.names.get(path, {}).get(name)
        if refs:
            t = self._first(self.import_ref(path, ref) for ref in refs)
            if t is not None:
                return t
        for imp in self.wild.get(path, ()):
            t = self.member(self.import_module(path, imp), name)
            if t is not None and t != EXT:
                return t
        return None

    def _pkg_member(self, key: str, name: str) -> Target | None:
        if key.startswith("go:"):
            hit = self.go_members.get(key[3:], {}).get(name)
            return ("node", hit) if hit else None
        if key.startswith("java:"):
            pkg = key[5:]
            hit = self.java_fqn.get(f"{pkg}.{name}")
            if hit:
                return ("node", hit)
            sub = f"{pkg}.{name}"
            return ("pkg", "java:" + sub) if sub in self.mods.java_pkg_files else None
        sub = self.mods.py_submodule(key, name)  # Python namespace package "dir/"
        if sub:
            return ("pkg", sub) if sub.endswith("/") else ("node", sub)
        return None

    # == imports ===========================================================================
    def import_module(self, path: str, imp: Import) -> Target | None:
        return self._guard(
            ("imod", path, imp.line, imp.module, imp.level, imp.kind),
            self._import_module,
            path,
            imp,
        )

    def _import_module(self, path: str, imp: Import) -> Target | None:
        """The module an import names: ("node", file), ("pkg", ...), EXT or None."""
        family = self.specs[path].family if path in self.specs else ""
        if family == "python":
            hit = self.mods.resolve_python(imp.module, imp.level, path)
            if hit:
                return ("pkg", hit) if hit.endswith("/") else ("node", hit)
            return None if self.mods.python_internal(imp.module, imp.level) else EXT
        if family == "javascript":
            hit = self.mods.resolve_js(imp.module, path)
            if hit:
                return ("node", hit)
            return None if self.mods.js_internal(imp.module) else EXT
        if family == "go":
            d = self.mods.resolve_go(imp.module)
            if d:
                return ("pkg", "go:" + d)
            return None if self.mods.go_internal(imp.module) else EXT
        if family == "rust":
            if imp.kind == "mod":
                hit = self.mods.rust_child(path, imp.module)
                return ("node", hit) if hit else None
            segs = self._rust_inline(path, imp.scope, [s for s in imp.module.split("::") if s])
            if not segs:
                return None
            modfile, rest, internal = self.mods.rust_module(path, segs)
            if not internal:
                return EXT
            t: Target | None = ("node", modfile) if modfile else None
            for s in rest:
                t = self.member(t, s) if t and t != EXT else t
            return t
        if family == "java":
            return self._java_path(imp.module)
        return None

    def _java_path(self, dotted: str) -> Target | None:
        if dotted in self.java_fqn:
            return ("node", self.java_fqn[dotted])
        if dotted in self.mods.java_pkg_files:
            return ("pkg", "java:" + dotted)
        head, _, last = dotted.rpartition(".")
        if head:
            parent = self._java_path(head)
            if parent is not None and parent != EXT:
                return self.member(parent, last)
        return None if self.mods.java_internal(dotted) else EXT

    def import_ref(self, path: str, ref: tuple) -> Target | None:
        """What a name bound by an import denotes."""
        kind, imp = ref[0], ref[1]
        if kind == "module":
            return self.import_module(path, imp)
        if kind == "pytop":
            first = imp.module.split(".")[0]
            top = Import(first, [], "", imp.line, imp.level, imp.kind)
            return self.import_module(path, top)
        mod = self.import_module(path, imp)
        if mod is None or mod == EXT:
            return mod
        return self.member(mod, ref[2])

    def expr_target(self, path: str, scope: str, text: str, depth: int = 0) -> Target | None:
        """What an expression denotes: a dotted path, or a call of one (``Foo(x).bar``)."""
        segs = split_path(text)
        if segs:
            return self.resolve_segments(path, scope, segs)
        text = text.strip()
        if _LITERAL.match(text):
            return EXT  # "".join(...), [1, 2].count(...), f"{x}".format(...)
        if depth > 4 or not text.endswith(")"):
            return None
        level = 0
        for i in range(len(text) - 1, -1, -1):
            level += {")": 1, "(": -1}.get(text[i], 0)
            if level == 0:
                break
        else:
            return None
        callee, _, rest = text[:i].rpartition(".") if "(" in text[:i] else ("", "", text[:i])
        if callee:  # a.b(x).c(y): the method c of what a.b(x) returns
            owner = self.expr_target(path, scope, callee, depth + 1)
            result = self.call_result(self.member(owner, rest.strip()))
        else:
            result = self.call_result(self.expr_target(path, scope, rest, depth + 1))
        return result

    # == calls =============================================================================
    def call_target(self, path: str, scope: str, name: str, receiver: str) -> Target | None:
        if not receiver:
            t = self.lookup(path, scope, name)
        elif receiver == "?":
            return None
        else:
            rt = self.expr_target(path, scope, receiver)
            if rt == EXT:
                return EXT
            if rt is None:
                return None
            t = self.member(rt, name)
            if t is None and rt[0] in ("inst", "node"):
                cid = rt[1]
                if self._kind(cid) in _TYPE_KINDS and self.has_external_base(cid):
                    return EXT
        if t is not None and t[0] == "node":
            kind = self._kind(t[1])
            if kind == FILE:
                d = self.member(t, "default")
                return d if d and d[0] == "node" and self._kind(d[1]) in _CALLABLE else None
            if kind in _CALLABLE:
                return t
            return None
        if t is not None and t[0] == "inst":
            hit = self.class_member(t[1], "__call__")
            return ("node", hit) if hit else None
        return t

    def _scope_node(self, path: str, scope: str) -> str:
        """The node a reference in ``scope`` comes from (its def, or the file)."""
        for s in self._chain(scope):
            if not s:
                return path
            if s in self.defs[path]:
                return node_id(path, s)
            if s in self.impls[path]:
                owner = self._owner_class(path, s)
                if owner:
                    return owner
        return path

    def _fallback(self, name: str, kinds: frozenset[str], guessable: bool) -> tuple[str, str]:
        """("external" | "resolved" | "unresolved", node id) for a name we could not place."""
        cands = [c for c in self.by_name.get(name, ()) if self._kind(c) in kinds]
        if not cands:
            return "external", ""
        if self.name_fallback and guessable and len(cands) == 1:
            return "resolved", cands[0]
        uid = unresolved_id(name)
        if uid not in self.nodes:
            self.nodes[uid] = {"kind": UNRESOLVED, "name": name, "candidates": len(cands)}
        return "unresolved", uid

    def _calls(self) -> None:
        for path, f in self.facts.items():
            if path not in self.specs:
                continue
            for c in f.calls:
                self._inferred = False
                try:
                    t = self.call_target(path, c.scope, c.name, c.receiver)
                except RecursionError:
                    t = None
                src = self._scope_node(path, c.scope)
                via = (
                    "new"
                    if c.new
                    else ("self" if c.receiver in self.specs[path].self_names else "")
                )
                if t is not None and t != EXT and t[0] == "node":
                    if self._kind(t[1]) in CLASS_KINDS and not c.new:
                        via = "new"
                    conf = INFERRED if self._inferred else EXACT
                    self._edge(src, t[1], CALLS, conf, c.line, via)
                    self.counts[CALLS]["resolved"] += 1
                    continue
                if t == EXT:
                    self.counts[CALLS]["external"] += 1
                    continue
                if c.name.startswith("__") and c.name.endswith("__"):
                    self.counts[CALLS]["external"] += 1  # dunder protocol calls: object's
                    continue
                kinds = _TYPE_KINDS if c.new else _CALLABLE
                guessable = c.name not in COMMON_METHODS
                status, target = self._fallback(c.name, kinds, guessable)
                self.counts[CALLS][status] += 1
                if status == "resolved":
                    self._edge(src, target, CALLS, BY_NAME, c.line, "name")
                elif status == "unresolved":
                    self._edge(src, target, CALLS, NAME_ONLY, c.line, "name")

    # == inheritance =======================================================================
    def _inheritance(self) -> None:
        for owner, raw in self.raw_bases.items():
            for (_, _, base, line), (t, _) in zip(raw, self.base_targets(owner), strict=False):
                if t is not None and t != EXT and t[1] != owner:
                    self._edge(owner, t[1], INHERITS, EXACT, line)
                    self.counts[INHERITS]["resolved"] += 1
                    continue
                if t == EXT:
                    self.counts[INHERITS]["external"] += 1
                    continue
                status, target = self._fallback(base.rsplit(".", 1)[-1], _TYPE_KINDS, True)
                self.counts[INHERITS][status] += 1
                if target and target != owner:
                    conf = BY_NAME if status == "resolved" else NAME_ONLY
                    self._edge(owner, target, INHERITS, conf, line, "name")

    # == imports ===========================================================================
    def _imports(self) -> None:
        for path, f in self.facts.items():
            spec = self.specs.get(path)
            if spec is None:
                continue
            used = _used_names(f) if spec.family == "java" else None
            for imp in f.imports:
                try:
                    self._one_import(path, spec, imp, used)
                except RecursionError:
                    self.counts[IMPORTS]["unresolved"] += 1

    def _count_import(self, path: str, mod: Target | None, line: int) -> None:
        if mod is None:
            self.counts[IMPORTS]["unresolved"] += 1
        elif mod == EXT:
            self.counts[IMPORTS]["external"] += 1
        else:
            self.counts[IMPORTS]["resolved"] += 1
            if mod[0] == "node":
                target = self.nodes[mod[1]]["path"] if mod[1] in self.nodes else mod[1]
                self._edge(path, target, IMPORTS, EXACT, line)
                if target != mod[1]:
                    self._edge(path, mod[1], IMPORTS, EXACT, line, "symbol")
            elif mod[1].startswith("go:"):
                for p in self.mods.go_package_files(mod[1][3:]):
                    self._edge(path, p, IMPORTS, EXACT, line, "package")

    def _one_import(self, path: str, spec: LangSpec, imp: Import, used: set[str] | None) -> None:
        family = spec.family
        mod = self.import_module(path, imp)
        if family == "rust" and imp.kind != "mod":
            # One leaf per import: the module path plus the bound item.
            for name, _ in imp.names:
                segs = [s for s in imp.module.split("::") if s] + ([] if name == "*" else [name])
                segs = self._rust_inline(path, imp.scope, segs)
                if segs:
                    self._count_import(path, self._rust_use(path, segs), imp.line)
            return
        if family == "java":
            if imp.names and imp.names[0][0] == "*":
                if mod is not None and mod != EXT and mod[0] == "pkg":
                    self.counts[IMPORTS]["resolved"] += 1
                    pkg = mod[1][5:]
                    for name in sorted(used or ()):
                        hit = self.java_fqn.get(f"{pkg}.{name}")
                        if hit:
                            self._edge(path, self.nodes[hit]["path"], IMPORTS, EXACT, imp.line)
                            self._edge(path, hit, IMPORTS, EXACT, imp.line, "symbol")
                else:
                    self._count_import(path, mod, imp.line)
                return
            name = imp.names[0][0] if imp.names else ""
            t = self._java_path(f"{imp.module}.{name}" if name else imp.module)
            self._count_import(path, t, imp.line)
            return
        if family == "python" and imp.names:
            if mod is None or mod == EXT:
                self._count_import(path, mod, imp.line)
                return
            # `from pkg import sub` imports the submodule; the package itself counts only
            # when a name comes from it (a definition or a re-export) or nothing resolves.
            from_module = mod[0] == "node" and any(n == "*" for n, _ in imp.names)
            for name, _ in imp.names:
                if name == "*":
                    continue
                t = self.member(mod, name)
                if t is not None and t != EXT and t[0] == "node" and self._kind(t[1]) == FILE:
                    self._count_import(path, t, imp.line)  # a submodule: its own import
                elif t is not None and t != EXT and t[0] == "node":
                    self._edge(path, t[1], IMPORTS, EXACT, imp.line, "symbol")
                    from_module = True
                elif t is not None and t[0] == "pkg":
                    self.counts[IMPORTS]["resolved"] += 1
                elif mod[0] == "pkg":  # from namespace_pkg import missing
                    self.counts[IMPORTS]["unresolved"] += 1
                else:  # a variable or constant of the module
                    from_module = True
            if from_module and mod[0] == "node":
                self._count_import(path, mod, imp.line)
            return
        if family == "python" and not imp.names:
            self._count_import(path, mod, imp.line)
            return
        self._count_import(path, mod, imp.line)
        if mod is None or mod == EXT:
            return
        for name, _ in imp.names:
            if name == "*":
                continue
            t = self.member(mod, name)
            if t is not None and t != EXT and t[0] == "node" and self._kind(t[1]) != FILE:
                self._edge(path, t[1], IMPORTS, EXACT, imp.line, "symbol")

    def _rust_inline(self, path: str, scope: str, segs: list[str]) -> list[str]:
        """``super`` inside an inline ``mod`` first leaves that module, not the file."""
        depth = sum(1 for s in self._chain(scope) if s and self._def_kind(path, s) == "module")
        segs = list(segs)
        while depth and segs and segs[0] == "super":
            segs[0] = "self"
            if len(segs) > 1 and segs[1] == "super":
                segs = segs[1:]
            depth -= 1
        return segs

    def _rust_use(self, path: str, segs: list[str]) -> Target | None:
        modfile, rest, internal = self.mods.rust_module(path, segs)
        if not internal:
            return EXT
        if modfile is None:
            return None
        t: Target = ("node", modfile)
        for s in rest:
            nxt = self.member(t, s)
            if nxt is None or nxt == EXT:
                return ("node", modfile)  # the module resolved; the item may be a const/macro
            t = nxt
        return t

    # == tests =============================================================================
    def _test_source(self, nid: str) -> str | None:
        """The test that a reference from ``nid`` belongs to: the nearest enclosing test
        definition, else the file when it is a test file, else None."""
        n = self.nodes.get(nid)
        if n is None or n["kind"] == UNRESOLVED:
            return None
        path = n["path"]
        for s in self._chain(n.get("qualname", "")):
            d = self.defs[path].get(s) if s else None
            if d is not None and d.test:
                return node_id(path, s)
        return path if self.nodes[path].get("test") else None

    def _tests(self) -> None:
        for (src, dst, etype), e in list(self.edges.items()):
            if etype not in (CALLS, IMPORTS) or e["confidence"] < BY_NAME:
                continue
            tgt = self.nodes.get(dst)
            if tgt is None or tgt["kind"] == UNRESOLVED:
                continue
            if self.nodes.get(tgt["path"], {}).get("test"):
                continue
            test = self._test_source(src)
            if test is not None:
                self._edge(test, dst, TESTS, e["confidence"], e.get("line", 0), etype)

    # == docs ==============================================================================
    def _mentions(self) -> None:
        for path, f in self.facts.items():
            if f.category != "doc" and f.lang != "doc":
                continue
            defs = self.defs[path]
            for m in f.mentions:
                src = node_id(path, m.scope) if m.scope in defs else path
                status, target, conf = self._mention(path, m.text, m.kind)
                if status is None:
                    continue
                self.counts[MENTIONS][status] += 1
                if target:
                    self._edge(src, target, MENTIONS, conf, m.line, m.kind)

    def _mention(self, doc: str, text: str, kind: str) -> tuple[str | None, str, float]:
        text = text.strip().strip("~!").strip()
        if kind in ("link", "path") or "/" in text or _MENTION_EXTS.search(text):
            return self._mention_path(doc, text, kind)
        sym = re.sub(r"\(.*\)$", "", text).strip().lstrip("@")
        sym = sym.replace("::", ".").replace("#", ".")
        if not re.fullmatch(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*", sym):
            return None, "", 0.0
        if sym in self.py_fqn:
            return "resolved", self.py_fqn[sym], EXACT
        if sym in self.java_fqn:
            return "resolved", self.java_fqn[sym], EXACT
        mod_files = self.mods.py_by_module.get(sym, [])
        if len(mod_files) == 1 and "." in sym:
            return "resolved", mod_files[0], EXACT
        hits = self.by_qual.get(sym, [])
        if "." in sym and not hits:
            parts = sym.split(".")
            for i in range(1, len(parts) - 1):
                hits = self.by_qual.get(".".join(parts[i:]), [])
                if hits:
                    break
        if not hits and "." not in sym:
            if len(sym) < 4 or sym.lower() in _PROSE_WORDS:
                return None, "", 0.0
            # A bare word names a top-level function or class; a method needs its class.
            hits = [h for h in self.by_name.get(sym, []) if self.nodes[h].get("qualname") == sym]
        hits = [h for h in hits if self._kind(h) != SECTION]
        if len(hits) > 1 and "." not in sym:  # `print`: the one top-level def, if one
            top = [h for h in hits if self.nodes[h].get("qualname") == sym]
            if len(top) == 1:
                return "resolved", top[0], BY_NAME
        if len(hits) == 1:
            return "resolved", hits[0], EXACT if kind in ("autodoc", "role") else INFERRED
        if not hits:
            if kind in ("autodoc", "role") and sym.split(".")[0] in self.mods.py_top:
                return "unresolved", "", 0.0
            return None, "", 0.0
        return "unresolved", "", 0.0

    def _mention_path(self, doc: str, text: str, kind: str) -> tuple[str | None, str, float]:
        hosted = _HOSTED.match(text)  # a link to this file on GitHub / GitLab
        if hosted:
            path = hosted.group(1).split("#")[0]
            if path in self.nodes and self._kind(path) == FILE:
                return "resolved", path, INFERRED
            return None, "", 0.0
        if re.match(r"^[a-z][a-z0-9+.-]*:", text) or text.startswith(("#", "//")):
            return None, "", 0.0
        target, _, anchor = text.partition("#")
        target = target.split("?")[0].strip()
        if not target or target.endswith("/") or any(c in target for c in "*<>{}$"):
            return None, "", 0.0  # a directory or a pattern: nothing to point at
        target = re.sub(r"^(?:\./)+", "", target)
        base = posixpath.dirname(doc)
        cands = [
            posixpath.normpath(posixpath.join(base, target)),
            posixpath.normpath(target.lstrip("/")),
        ]
        for c in cands:
            if c in self.nodes and self._kind(c) == FILE:
                m = re.match(r"L(\d+)", anchor)
                if m:
                    inner = self.node_at(c, int(m.group(1)))
                    if inner:
                        return "resolved", inner, EXACT
                return "resolved", c, EXACT
        if posixpath.normpath(posixpath.join(base, target)) in self.mods.dirs or target in (
            self.mods.dirs
        ):
            return None, "", 0.0
        tail = re.sub(r"^(?:\.\./)+", "", target)
        suffix = [p for p in self.facts if p.endswith("/" + tail) or p == tail]
        if len(suffix) == 1:
            return "resolved", suffix[0], INFERRED
        if tail.split("/")[0] in self.mods.dirs or len(suffix) > 1:
            return "unresolved", "", 0.0
        return None, "", 0.0

    def node_at(self, path: str, line: int) -> str | None:
        best, size = None, None
        for q, d in self.defs.get(path, {}).items():
            if d.start_line <= line <= d.end_line and (
                size is None or d.end_line - d.start_line < size
            ):
                best, size = node_id(path, q), d.end_line - d.start_line
        return best

    # == run ===============================================================================
    def run(self) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str, dict]], dict]:
        """Resolve everything: (nodes, edges as (src, dst, type, attrs), counts by type)."""
        self._imports()
        self._inheritance()
        self._calls()
        self._tests()
        self._mentions()
        edges = [(s, d, t, attrs) for (s, d, t), attrs in self.edges.items()]
        counts = {}
        for etype, c in self.counts.items():
            done = c["resolved"] + c["unresolved"]
            counts[etype] = dict(c, rate=round(c["resolved"] / done, 4) if done else 1.0)
        return self.nodes, edges, counts


_HOSTED = re.compile(
    r"^https?://(?:github\.com|gitlab\.com)/[^/]+/[^/]+/(?:-/)?(?:blob|raw)/[^/]+/(.+)$"
)
_PROSE_WORDS = frozenset(
    """true false none null self this main test tests data name path file text type list dict
    index search build update query value values items error errors config init setup run
    start stop open close read write help info version default""".split()
)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v not in ("", None, False)}


def _go_default_name(import_path: str) -> str:
    parts = import_path.rstrip("/").split("/")
    last = parts[-1]
    if re.fullmatch(r"v\d+", last) and len(parts) > 1:
        last = parts[-2]
    return re.sub(r"^go-|[.-]go$", "", last).replace("-", "_").replace(".", "_")


def _used_names(f: FileFacts) -> set[str]:
    used: set[str] = set()
    for c in f.calls:
        if c.receiver:
            used.add(re.split(r"[.:(<\[]", c.receiver)[0])
        else:
            used.add(c.name)
    for b in f.bindings:
        if b.type:
            used.add(b.type.split(".")[0])
    for i in f.inherits:
        used.add(i.base.split(".")[0])
    return used


__all__ = ["Resolver", "split_path"]
