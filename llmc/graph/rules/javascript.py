"""JavaScript / TypeScript: relative module paths with extension probing, and
``default`` exports (a CommonJS module without one is its own default)."""

from __future__ import annotations

from llmc.graph.model import FileFacts, Import
from llmc.graph.rules.base import LangRules, external_or_none
from llmc.graph.target import Target, node


class JavaScriptRules(LangRules):
    family = "javascript"

    def module_member(self, path: str, f: FileFacts, name: str) -> tuple[bool, Target | None]:
        if name != "default":
            return False, None
        if not f.default_export:  # CommonJS `module.exports = {...}`: the module itself
            return True, node(path)
        if f.default_export in self.r.defs_of(path):
            return True, node(f"{path}::{f.default_export}")
        return True, self.r.lookup(path, "", f.default_export)

    def import_module(self, path: str, imp: Import) -> Target | None:
        mods = self.r.mods
        hit = mods.resolve_js(imp.module, path)
        if hit:
            return node(hit)
        return external_or_none(mods.js_internal(imp.module))


__all__ = ["JavaScriptRules"]
