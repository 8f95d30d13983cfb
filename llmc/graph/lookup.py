"""Name lookup: what a name, a dotted path or an expression denotes, from one file's scope.

Names are looked up the way the language does it, as far as a static tool can: enclosing
function scopes, then the module (or Go package, or Java class with its implicit ``this``),
then imported names, wildcard imports, builtins. A receiver (``a.b`` in ``a.b.f()``) is
resolved segment by segment to a module, a package, a class, or an *instance* of a class
(``self``, a variable bound to ``Foo()``, an annotated parameter, a field); methods are found
through base classes. Language differences live in each file's :class:`LangRules`.

Every lookup that can chain is memoised by :class:`~llmc.graph.memo.Memo`, which cuts
cycles and records which files' data the answer read (``iface``, ``bind``, ``lines`` of a
path; ``members`` / ``bases`` of a class; ``name`` / ``qual`` in the name indexes).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from llmc.graph.extract import LITERAL
from llmc.graph.memo import Memo
from llmc.graph.model import (
    CALLABLE,
    CLASS_KINDS,
    FILE,
    FUNC_KINDS,
    TYPE_KINDS,
    Binding,
    Def,
    FileFacts,
    Import,
)
from llmc.graph.model import scope_chain as chain
from llmc.graph.target import EXT, INST, NODE, PKG, SUPER, Target, first, inside, node

if TYPE_CHECKING:
    from collections.abc import Callable

    from llmc.graph.edges import EdgeTable
    from llmc.graph.incremental import FileResult
    from llmc.graph.langs import LangSpec
    from llmc.graph.modules import ModuleIndex
    from llmc.graph.rules.base import ImportRef, LangRules

# A file's bindings by scope and name, and the names its imports bind, are made from its
# facts when a lookup first asks for them and kept for the last this many files asked
# about: tables of every file's (~0.75M bindings and ~0.37M imported names on nine large
# projects; ~50 and ~18 MB, five times that on 89k files) hold what a file's resolution
# reads a few files of. A patch drops a changed file's (llmc.graph.patch).
BINDINGS_KEPT = NAMES_KEPT = 512


def _keep(table: dict, limit: int, path: str, value: Any) -> None:
    if len(table) >= limit:
        del table[next(iter(table))]
    table[path] = value


_IDENT = re.compile(r"[A-Za-z_$][\w$]*\Z")
_LITERAL = re.compile(r"""^(?:[rbfuRBFU]{0,2}["'`]|[\[{]|-?\d)""")


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


class Lookup:
    """Scope, member and type lookups over the repository tables (filled by ``tables``)."""

    facts: dict[str, FileFacts]
    mods: ModuleIndex
    specs: dict[str, LangSpec]  # path -> its language (code files only)
    rules: dict[str, LangRules]  # path -> its language's rules (code files only)
    generic: LangRules  # rules of files without a language (docs, C, ...)
    family_rules: dict[str, LangRules]  # family -> its rules
    nodes: dict[str, dict[str, Any]]
    defs: dict[str, dict[str, Any]]  # path -> qual -> Def (real definitions)
    impls: dict[str, dict[str, Any]]  # path -> qual -> impl pseudo-def
    members: dict[str, dict[str, str]]  # class id -> member name -> node id
    bindings: dict[str, dict[str, dict[str, list[Binding]]]]  # path -> scope -> name (a few)
    names: dict[str, dict[str, list[ImportRef]]]  # path -> local name -> import refs
    wild: dict[str, list[Import]]
    reexports: dict[str, list[Import]]
    raw_bases: dict[str, list[tuple[str, str, str, int]]]
    by_name: dict[str, list[str]]
    by_qual: dict[str, list[str]]
    inherit_entries: dict[str, list[tuple[str, int, str, int]]]  # path -> (owner, i, base, line)
    table: EdgeTable  # the defines edges the tables add
    orphans: dict[str, list[tuple[str | None, Def]]]  # path -> definitions attached elsewhere
    inherit_owners: dict[str, list[tuple[str, str, str, int]]]  # path -> (owner, scope, base, ln)
    owner_reads: dict[str, set]  # path -> keys read to find the owners above
    # The resolver's run (llmc.graph.resolve), which a patch (llmc.graph.patch) brings up to
    # date: declared here, below both, so that neither imports the other for its types.
    order: dict[str, int]  # path -> its place in the merge order
    results: dict[str, FileResult]  # path -> its edges, counts and reads
    facts_changed: set[str]  # files whose facts the last update replaced
    _test_source: Callable[[str], str | None]  # node id -> the test it belongs to

    def __init__(self) -> None:
        self.memo = Memo()

    # == reads (recorded) =================================================================
    def read(self, key: tuple) -> None:
        self.memo.reads.add(key)

    def defs_of(self, path: str) -> dict[str, Any]:
        self.memo.reads.add(("iface", path))
        return self.defs.get(path, {})

    def facts_of(self, path: str) -> FileFacts | None:
        self.memo.reads.add(("iface", path))
        return self.facts.get(path)

    def node_attrs(self, nid: str) -> dict[str, Any] | None:
        self.memo.reads.add(("iface", nid.partition("::")[0]))
        return self.nodes.get(nid)

    def kind(self, nid: str) -> str:
        n = self.node_attrs(nid)
        return n["kind"] if n else ""

    def def_kind(self, path: str, qual: str) -> str:
        self.memo.reads.add(("iface", path))
        return self._def_kind(path, qual)

    def _def_kind(self, path: str, qual: str) -> str:
        """``def_kind`` for a path whose read is already recorded."""
        d = self.defs[path].get(qual)
        if d is not None:
            return d.kind
        return "impl" if qual in self.impls[path] else ""

    def bindings_of(self, path: str, scope: str) -> dict[str, list[Binding]]:
        self.memo.reads.add(("bind", path))
        by_scope = self.bindings.get(path)
        if by_scope is None:
            by_scope = {}
            f = self.facts.get(path)
            for b in f.bindings if f is not None else ():
                by_scope.setdefault(b.scope, {}).setdefault(b.name, []).append(b)
            _keep(self.bindings, BINDINGS_KEPT, path, by_scope)
        return by_scope.get(scope, {})

    def names_of(self, path: str) -> dict[str, list[ImportRef]]:
        self.memo.reads.add(("iface", path))
        names = self.names.get(path)
        if names is None:
            f = self.facts.get(path)
            if f is None:
                return {}
            names = self.rules_of(path).import_names(path, f)
            _keep(self.names, NAMES_KEPT, path, names)
        return names

    def wild_of(self, path: str) -> list[Import]:
        self.memo.reads.add(("iface", path))
        return self.wild.get(path, [])

    def reexports_of(self, path: str) -> list[Import]:
        self.memo.reads.add(("iface", path))
        return self.reexports.get(path, [])

    def members_of(self, cid: str) -> dict[str, str]:
        self.memo.reads.add(("members", cid))
        return self.members.get(cid, {})

    def named(self, name: str) -> list[str]:
        self.memo.reads.add(("name", name))
        return self.by_name.get(name, [])

    def qualified(self, qual: str) -> list[str]:
        self.memo.reads.add(("qual", qual))
        return self.by_qual.get(qual, [])

    def rules_of(self, path: str) -> LangRules:
        return self.rules.get(path, self.generic)

    # == classes ===========================================================================
    def owner_class(self, path: str, qual: str) -> str | None:
        """The class node a scope qualname denotes (a def, an impl block, a Go receiver)."""
        if not qual:
            return None
        kind = self.def_kind(path, qual)
        if kind in CLASS_KINDS and kind != "impl":
            return f"{path}::{qual}"
        parent, _, name = qual.rpartition(".")
        t = self.lookup(path, parent if kind == "impl" else "", name)
        if t is not None and t.kind == NODE and self.kind(t.id) in TYPE_KINDS:
            return t.id
        return None

    def enclosing_class(self, path: str, scope: str) -> str | None:
        self.memo.reads.add(("iface", path))
        for s in chain(scope):
            if not s:
                return None
            kind = self._def_kind(path, s)
            if kind in CLASS_KINDS:
                return self.owner_class(path, s)
            if not kind:  # Go receiver qualifier: "Type" in "Type.Method"
                owner = self.owner_class(path, s)
                if owner:
                    return owner
        return None

    def bases(self, cid: str) -> list[str]:
        return self.memo.guard(("bases", cid), self._bases, cid) or []

    def _bases(self, cid: str) -> list[str]:
        return [t.id for t, _ in self.base_targets(cid) if inside(t) and t.id != cid]

    def base_targets(self, cid: str) -> list[tuple[Target | None, int]]:
        """Each declared base of class ``cid`` resolved: inst(base id), EXT or None."""
        return self.memo.guard(("btargets", cid), self._base_targets, cid) or []

    def _base_targets(self, cid: str) -> list[tuple[Target | None, int]]:
        self.read(("bases", cid))
        out = []
        for path, scope, base, line in self.raw_bases.get(cid, ()):
            out.append((self.resolve_type_name(path, scope.rpartition(".")[0], base), line))
        return out

    def class_member(self, cid: str, name: str) -> str | None:
        return self.memo.guard(("member", cid, name), self._class_member, cid, name)

    def _class_member(self, cid: str, name: str) -> str | None:
        hit = self.members_of(cid).get(name)
        if hit:
            return hit
        for base in self.bases(cid):
            hit = self.class_member(base, name)
            if hit:
                self.memo.inferred = True
                return hit
        return None

    def has_external_base(self, cid: str) -> bool:
        """Whether some ancestor of ``cid`` is outside the repository (or unknown)."""
        return bool(self.memo.guard(("extbase", cid), self._has_external_base, cid))

    def _has_external_base(self, cid: str) -> bool:
        for t, _ in self.base_targets(cid):
            if t is None or t is EXT or self.has_external_base(t.id):
                return True
        return False

    def class_attr(self, cid: str, name: str) -> Target | None:
        """The type of attribute ``name`` of class ``cid`` (fields, ``self.x = ...``)."""
        n = self.node_attrs(cid)
        path, qual = n["path"], n.get("qualname", "")
        for b in self.bindings_of(path, qual).get(name, ()):
            t = self.binding_type(path, qual, b)
            if t is not None:
                return t
        for base in self.bases(cid):
            t = self.memo.guard(("attr", base, name), self.class_attr, base, name)
            if t is not None:
                return t
        return None

    # == name lookup =======================================================================
    def lookup(self, path: str, scope: str, name: str) -> Target | None:
        return self.memo.guard(("lookup", path, scope, name), self._lookup, path, scope, name)

    def _lookup(self, path: str, scope: str, name: str) -> Target | None:
        rules = self.rules.get(path)
        if rules is None:
            return None
        spec = self.specs[path]
        if name in spec.self_names:
            cls = self.enclosing_class(path, scope)
            if cls is None:
                return None
            return node(cls) if name in spec.class_names else Target(INST, cls)
        if name in spec.super_names:
            cls = self.enclosing_class(path, scope)
            return Target(SUPER, cls) if cls else None
        defs = self.defs_of(path)
        for s in chain(scope):
            kind = self._def_kind(path, s) if s else "module"
            if not kind or (kind in CLASS_KINDS and s != scope):
                continue
            q = f"{s}.{name}" if s else name
            if q in defs:
                return node(f"{path}::{q}")
            if name in self.bindings_of(path, s) and kind not in CLASS_KINDS:
                return self.var(path, s, name)
        refs = self.names_of(path).get(name)
        if refs:
            return first(self.import_ref(path, ref) for ref in refs)
        if spec.implicit_this:
            for s in chain(scope):
                if s and self.def_kind(path, s) in CLASS_KINDS:
                    cls = self.owner_class(path, s)
                    if cls is None:
                        continue
                    hit = self.class_member(cls, name)
                    if hit:
                        return node(hit)
                    t = self.class_attr(cls, name)
                    if t is not None:
                        return t
        hit = rules.scope_member(path, name)
        if hit is not None:
            return hit
        for imp in self.wild_of(path):
            mod = self.import_module(path, imp)
            if inside(mod):
                t = self.member(mod, name)
                if t is not None:
                    return t
        if name in spec.builtins:
            return EXT
        return None

    def var(self, path: str, scope: str, name: str) -> Target | None:
        for b in self.bindings_of(path, scope).get(name, ()):
            t = self.binding_type(path, scope, b)
            if t is not None:
                self.memo.inferred = True
                return t
        return None

    def binding_type(self, path: str, scope: str, b: Binding) -> Target | None:
        key = ("bind", path, scope, b.name, b.line)
        return self.memo.guard(key, self._binding_type, path, scope, b)

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
        if self.def_kind(path, scope) not in CLASS_KINDS:
            return scope
        # The binding was lifted to its class; find the method it was written in.
        self.read(("lines", path))
        best = scope
        for q, d in self.defs_of(path).items():
            if q.startswith(scope + ".") and d.start_line <= b.line <= d.end_line:
                if best == scope or len(q) > len(best):
                    best = q
        return best

    def call_result(self, callee: Target | None) -> Target | None:
        """The type of the value a call to ``callee`` returns, when it can be known."""
        if callee is None or callee is EXT:
            return callee
        if callee.kind != NODE:
            return None
        n = self.node_attrs(callee.id)
        if n is None:
            return None
        if n["kind"] in TYPE_KINDS:
            return Target(INST, callee.id)
        if n["kind"] == FILE:
            d = self.member(callee, "default")
            return self.call_result(d) if d and d.id != callee.id else None
        if n["kind"] in FUNC_KINDS:
            d = self.defs_of(n["path"]).get(n["qualname"])
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
            t: Target | None = node(cls)
            for s in segs[1:]:
                t = self.member(t, s) if t else None
        else:
            t = self.resolve_segments(path, scope, segs)
        if t is None or t is EXT:
            return t
        if t.kind == NODE and self.kind(t.id) in TYPE_KINDS:
            return Target(INST, t.id)
        return None

    def resolve_segments(self, path: str, scope: str, segs: list[str]) -> Target | None:
        rules = self.rules.get(path)
        if rules is not None:
            handled, t = rules.rooted_path(path, scope, segs)
            if handled:
                return t
        t = self.lookup(path, scope, segs[0])
        for s in segs[1:]:
            if t is None or t is EXT:
                return t
            t = self.member(t, s)
        return t

    def walk(self, t: Target | None, segs: list[str]) -> Target | None:
        """Members ``segs`` of ``t`` in turn; an unknown or external step stays as it is."""
        for s in segs:
            t = self.member(t, s) if inside(t) else t
        return t

    # == members ===========================================================================
    def member(self, target: Target | None, name: str) -> Target | None:
        if target is None or target is EXT:
            return target
        return self.memo.guard(("m", target, name), self._member, target, name)

    def _member(self, target: Target, name: str) -> Target | None:
        kind = target.kind
        if kind == PKG:
            return self.rules_for_family(target.lang).pkg_member(target.id, name)
        if kind in (INST, SUPER):
            cid = target.id
            if kind == SUPER:
                for base in self.bases(cid):
                    hit = self.class_member(base, name)
                    if hit:
                        return node(hit)
                return EXT  # not in any repository base: object, or a library class
            hit = self.class_member(cid, name)
            if hit:
                return node(hit)
            return self.class_attr(cid, name)
        nid = target.id
        n = self.node_attrs(nid)
        if n is None:
            return None
        if n["kind"] == FILE:
            return self._module_member(nid, name)
        if n["kind"] in TYPE_KINDS:
            hit = self.class_member(nid, name)
            if hit:
                return node(hit)
            return self.class_attr(nid, name)
        if n["kind"] == "module":  # Rust inline module, TS namespace
            q = f"{n['qualname']}.{name}"
            if q in self.defs_of(n["path"]):
                return node(f"{n['path']}::{q}")
        return None

    def _module_member(self, path: str, name: str) -> Target | None:
        f = self.facts_of(path)
        if f is None:
            return None
        if name in self.defs_of(path):
            return node(f"{path}::{name}")
        handled, t = self.rules_of(path).module_member(path, f, name)
        if handled:
            return t
        for imp in self.reexports_of(path):
            for orig, alias in imp.names:
                if orig == "*" and not alias:
                    t = self.member(self.import_module(path, imp), name)
                    if inside(t):
                        return t
                elif (alias or orig) == name:
                    mod = self.import_module(path, imp)
                    return mod if orig == "*" else self.member(mod, orig)
        refs = self.names_of(path).get(name)
        if refs:
            t = first(self.import_ref(path, ref) for ref in refs)
            if t is not None:
                return t
        for imp in self.wild_of(path):
            t = self.member(self.import_module(path, imp), name)
            if inside(t):
                return t
        return None

    def rules_for_family(self, family: str) -> LangRules:
        return self.family_rules.get(family, self.generic)

    # == imports ===========================================================================
    def import_module(self, path: str, imp: Import) -> Target | None:
        """The module an import names: node(file), a package, EXT or None."""
        key = ("imod", path, imp.line, imp.module, imp.level, imp.kind)
        return self.memo.guard(key, self.rules_of(path).import_module, path, imp)

    def import_ref(self, path: str, ref: ImportRef) -> Target | None:
        """What a name bound by an import denotes."""
        if ref.kind == "module":
            return self.import_module(path, ref.imp)
        if ref.kind == "top":  # Python `import a.b` binds `a`
            imp = ref.imp
            top = Import(imp.module.split(".")[0], [], "", imp.line, imp.level, imp.kind)
            return self.import_module(path, top)
        mod = self.import_module(path, ref.imp)
        if mod is None or mod is EXT:
            return mod
        return self.member(mod, ref.name)

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
            return self.call_result(self.member(owner, rest.strip()))
        return self.call_result(self.expr_target(path, scope, rest, depth + 1))

    # == calls =============================================================================
    def call_target(self, path: str, scope: str, name: str, receiver: str) -> Target | None:
        if not receiver:
            t = self.lookup(path, scope, name)
        elif receiver == "?":
            return None
        else:
            rt = self.expr_target(path, scope, receiver)
            if rt is EXT:
                return EXT
            if rt is None:
                return None
            t = self.member(rt, name)
            if t is None and rt.kind in (INST, NODE):
                cid = rt.id
                if self.kind(cid) in TYPE_KINDS and self.has_external_base(cid):
                    return EXT
        if t is not None and t.kind == NODE:
            kind = self.kind(t.id)
            if kind == FILE:
                d = self.member(t, "default")
                return d if d and d.kind == NODE and self.kind(d.id) in CALLABLE else None
            if kind in CALLABLE:
                return t
            return None
        if t is not None and t.kind == INST:
            hit = self.class_member(t.id, "__call__")
            return node(hit) if hit else None
        return t

    def scope_node(self, path: str, scope: str) -> str:
        """The node a reference in ``scope`` comes from (its def, or the file)."""
        defs = self.defs_of(path)
        for s in chain(scope):
            if not s:
                return path
            if s in defs:
                return f"{path}::{s}"
            if s in self.impls[path]:
                owner = self.owner_class(path, s)
                if owner:
                    return owner
        return path


__all__ = ["Lookup", "split_path"]
