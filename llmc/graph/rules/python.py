"""Python: packages and source roots (see :mod:`llmc.graph.modules`), ``import a.b``
binding ``a``, submodules as package members, ``from pkg import sub`` importing the
submodule, and dotted names (``pkg.mod.Class``) for doc mentions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmc.graph.model import EXACT, FILE, IMPORTS, FileFacts, Import, node_id
from llmc.graph.rules.base import LangRules, Resolution, external_or_none
from llmc.graph.target import NODE, PKG, Target, inside, node

if TYPE_CHECKING:
    from llmc.graph.edges import EdgeSink


class PythonRules(LangRules):
    family = "python"
    table_key = "pyfqn"  # the key its lookups record

    def __init__(self, r: Resolution) -> None:
        super().__init__(r)
        self.fqns: dict[str, str] = {}  # dotted name -> node id

    def _target(self, hit: str) -> Target:
        return Target(PKG, hit, self.family) if hit.endswith("/") else node(hit)

    def module_name(self, path: str, f: FileFacts) -> str:
        return self.r.mods.py_module.get(path, "")

    def index_file(self, path: str, f: FileFacts) -> None:
        mod = self.r.mods.py_module.get(path, "")
        for q in self.r.defs[path]:
            self.fqns[f"{mod}.{q}" if mod else q] = node_id(path, q)

    def keys(self, path: str, f: FileFacts) -> list[tuple]:
        mod = self.r.mods.py_module.get(path, "")
        quals = dict.fromkeys(d.qualname for d in f.defs if d.kind != "impl")
        return [("pyfqn", f"{mod}.{q}" if mod else q) for q in quals]

    def value(self, key: tuple) -> Any:
        return self.fqns.get(key[1])

    def refresh(self, keys: set[tuple]) -> None:
        """The last file in path order that defines a dotted name wins, as in a build.
        A name ``a.b.c`` can come from module ``a`` (``b.c``), ``a.b`` (``c``), ...;
        files without a module name (a root ``__init__.py``) define it as it is."""
        mods, order = self.r.mods, self.r.order
        unnamed = [p for p, m in mods.py_module.items() if not m]
        for _, sym in keys:
            best: tuple[int, str] | None = None
            parts = sym.split(".")
            splits = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(1, len(parts))]
            for mod, q in [*splits, ("", sym)]:
                paths = mods.py_by_module.get(mod, ()) if mod else unnamed
                for p in paths:
                    if self.r.rules.get(p) is not self:
                        continue
                    if q in self.r.defs.get(p, ()) and (best is None or order[p] > best[0]):
                        best = (order[p], f"{p}::{q}")
            if best is None:
                self.fqns.pop(sym, None)
            else:
                self.fqns[sym] = best[1]

    def bare_import(self, imp: Import) -> str:
        return imp.module.split(".")[0]

    def module_member(self, path: str, f: FileFacts, name: str) -> tuple[bool, Target | None]:
        sub = self.r.mods.py_submodule(path, name)
        return (True, self._target(sub)) if sub else (False, None)

    def pkg_member(self, key: str, name: str) -> Target | None:
        sub = self.r.mods.py_submodule(key, name)  # a namespace package "dir/"
        return self._target(sub) if sub else None

    def import_module(self, path: str, imp: Import) -> Target | None:
        mods = self.r.mods
        hit = mods.resolve_python(imp.module, imp.level, path)
        if hit:
            return self._target(hit)
        return external_or_none(mods.python_internal(imp.module, imp.level))

    def record_import(self, path: str, imp: Import, out: EdgeSink) -> None:
        r = self.r
        mod = r.import_module(path, imp)
        if not imp.names or not inside(mod):
            r.count_import(path, mod, imp.line, out)
            return
        # `from pkg import sub` imports the submodule; the package itself counts only
        # when a name comes from it (a definition or a re-export) or nothing resolves.
        from_module = mod.kind == NODE and any(n == "*" for n, _ in imp.names)
        for name, _ in imp.names:
            if name == "*":
                continue
            t = r.member(mod, name)
            if inside(t) and t.kind == NODE and r.kind(t.id) == FILE:
                r.count_import(path, t, imp.line, out)  # a submodule: its own import
            elif inside(t) and t.kind == NODE:
                out.edge(path, t.id, IMPORTS, EXACT, imp.line, "symbol")
                from_module = True
            elif t is not None and t.kind == PKG:
                out.count(IMPORTS, "resolved")
            elif mod.kind == PKG:  # from namespace_pkg import missing
                out.count(IMPORTS, "unresolved")
            else:  # a variable or constant of the module
                from_module = True
        if from_module and mod.kind == NODE:
            r.count_import(path, mod, imp.line, out)

    def fqn(self, sym: str) -> str | None:
        self.r.read(("pyfqn", sym))
        return self.fqns.get(sym)

    def mention_module(self, sym: str) -> list[str]:
        return self.r.mods.py_by_module.get(sym, [])

    def known_top(self, name: str) -> bool:
        return name in self.r.mods.py_top


__all__ = ["PythonRules"]
