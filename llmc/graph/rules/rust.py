"""Rust: ``mod`` files, ``use`` trees with ``crate`` / ``self`` / ``super`` (leaving an
inline ``mod`` first), child modules in scope, one import per ``use`` leaf."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmc.graph.model import FileFacts, Import
from llmc.graph.model import scope_chain as chain
from llmc.graph.rules.base import LangRules
from llmc.graph.target import EXT, Target, inside, node

if TYPE_CHECKING:
    from llmc.graph.edges import EdgeSink


class RustRules(LangRules):
    family = "rust"

    def scope_member(self, path: str, name: str) -> Target | None:
        child = self.r.mods.rust_child(path, name)
        return node(child) if child else None

    def rooted_path(self, path: str, scope: str, segs: list[str]) -> tuple[bool, Target | None]:
        head = segs[0]
        if head in ("crate", "super") or (
            head == "self" and len(segs) > 1 and self.r.enclosing_class(path, scope) is None
        ):
            modfile, rest, internal = self.r.mods.rust_module(path, segs)
            if not internal:
                return True, EXT
            return True, self.r.walk(node(modfile) if modfile else None, rest)
        return False, None

    def module_member(self, path: str, f: FileFacts, name: str) -> tuple[bool, Target | None]:
        child = self.r.mods.rust_child(path, name)
        return (True, node(child)) if child else (False, None)

    def import_module(self, path: str, imp: Import) -> Target | None:
        if imp.kind == "mod":
            hit = self.r.mods.rust_child(path, imp.module)
            return node(hit) if hit else None
        segs = self._inline(path, imp.scope, [s for s in imp.module.split("::") if s])
        if not segs:
            return None
        modfile, rest, internal = self.r.mods.rust_module(path, segs)
        if not internal:
            return EXT
        return self.r.walk(node(modfile) if modfile else None, rest)

    def record_import(self, path: str, imp: Import, out: EdgeSink) -> None:
        if imp.kind == "mod":
            super().record_import(path, imp, out)
            return
        for name, _ in imp.names:  # one leaf per import: the module path plus the item
            segs = [s for s in imp.module.split("::") if s] + ([] if name == "*" else [name])
            segs = self._inline(path, imp.scope, segs)
            if segs:
                self.r.count_import(path, self._use(path, segs), imp.line, out)

    def _inline(self, path: str, scope: str, segs: list[str]) -> list[str]:
        """``super`` inside an inline ``mod`` first leaves that module, not the file."""
        depth = sum(1 for s in chain(scope) if s and self.r.def_kind(path, s) == "module")
        segs = list(segs)
        while depth and segs and segs[0] == "super":
            segs[0] = "self"
            if len(segs) > 1 and segs[1] == "super":
                segs = segs[1:]
            depth -= 1
        return segs

    def _use(self, path: str, segs: list[str]) -> Target | None:
        modfile, rest, internal = self.r.mods.rust_module(path, segs)
        if not internal:
            return EXT
        if modfile is None:
            return None
        t = node(modfile)
        for s in rest:
            nxt = self.r.member(t, s)
            if not inside(nxt):
                return node(modfile)  # the module resolved; the item may be a const/macro
            t = nxt
        return t


__all__ = ["RustRules"]
