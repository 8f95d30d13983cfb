"""Java: packages (declared, not directories) and fully qualified class names; the
same package is in scope; wildcard imports link the classes the file uses."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from llmc.graph.model import EXACT, IMPORTS, TYPE_KINDS, FileFacts, Import, node_id
from llmc.graph.rules.base import LangRules, Resolution, external_or_none
from llmc.graph.target import PKG, Target, inside, node

if TYPE_CHECKING:
    from llmc.graph.edges import EdgeSink


class JavaRules(LangRules):
    family = "java"
    table_key = "java"  # the key its lookups record

    def __init__(self, r: Resolution) -> None:
        super().__init__(r)
        self.fqns: dict[str, str] = {}  # fully qualified type name -> node id

    def index_file(self, path: str, f: FileFacts) -> None:
        for q, d in self.r.defs[path].items():
            if d.kind in TYPE_KINDS:
                self.fqns[f"{f.module}.{q}" if f.module else q] = node_id(path, q)

    def keys(self, path: str, f: FileFacts) -> list[tuple]:
        return [
            ("java", f"{f.module}.{d.qualname}" if f.module else d.qualname)
            for d in f.defs
            if d.kind in TYPE_KINDS
        ]

    def value(self, key: tuple) -> Any:
        return self.fqns.get(key[1])

    def refresh(self, keys: set[tuple]) -> None:
        """The last file in path order that defines a type name wins, as in a build."""
        r = self.r
        for _, sym in keys:
            parts = sym.split(".")
            splits = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts))]
            best: tuple[int, str] | None = None
            for pkg, q in splits:
                for p in r.mods.java_pkg_files.get(pkg, ()):
                    if r.rules.get(p) is not self:
                        continue
                    d = r.defs.get(p, {}).get(q)
                    if d is not None and d.kind in TYPE_KINDS:
                        if best is None or r.order[p] > best[0]:
                            best = (r.order[p], f"{p}::{q}")
            if best is None:
                self.fqns.pop(sym, None)
            else:
                self.fqns[sym] = best[1]

    def fqn(self, sym: str) -> str | None:
        self.r.read(("java", sym))
        return self.fqns.get(sym)

    def scope_member(self, path: str, name: str) -> Target | None:
        f = self.r.facts_of(path)
        hit = self.fqn(f"{f.module}.{name}" if f and f.module else name)
        return node(hit) if hit else None

    def pkg_member(self, key: str, name: str) -> Target | None:
        hit = self.fqn(f"{key}.{name}")
        if hit:
            return node(hit)
        sub = f"{key}.{name}"
        return Target(PKG, sub, self.family) if sub in self.r.mods.java_pkg_files else None

    def import_module(self, path: str, imp: Import) -> Target | None:
        return self._path(imp.module)

    def _path(self, dotted: str) -> Target | None:
        hit = self.fqn(dotted)
        if hit:
            return node(hit)
        if dotted in self.r.mods.java_pkg_files:
            return Target(PKG, dotted, self.family)
        head, _, last = dotted.rpartition(".")
        if head:
            parent = self._path(head)
            if inside(parent):
                return self.r.member(parent, last)
        return external_or_none(self.r.mods.java_internal(dotted))

    def record_import(self, path: str, imp: Import, out: EdgeSink) -> None:
        r = self.r
        if imp.names and imp.names[0][0] == "*":
            mod = r.import_module(path, imp)
            if inside(mod) and mod.kind == PKG:
                out.count(IMPORTS, "resolved")
                for name in sorted(_used_names(r.facts[path])):
                    hit = self.fqn(f"{mod.id}.{name}")
                    if hit:
                        out.edge(path, r.node_attrs(hit)["path"], IMPORTS, EXACT, imp.line)
                        out.edge(path, hit, IMPORTS, EXACT, imp.line, "symbol")
            else:
                r.count_import(path, mod, imp.line, out)
            return
        name = imp.names[0][0] if imp.names else ""
        t = self._path(f"{imp.module}.{name}" if name else imp.module)
        r.count_import(path, t, imp.line, out)


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


__all__ = ["JavaRules"]
