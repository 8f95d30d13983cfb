"""Go: a package is a directory; its files share one scope (test files see the
package's test-only names too); an import binds the package name or its alias."""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from typing import Any

from llmc.graph.model import FileFacts, Import, node_id
from llmc.graph.rules.base import ImportRef, LangRules, Resolution, external_or_none
from llmc.graph.target import PKG, Target, node


class GoRules(LangRules):
    family = "go"
    table_key = "go"  # the key its lookups record

    def __init__(self, r: Resolution) -> None:
        super().__init__(r)
        self.members: dict[str, dict[str, str]] = defaultdict(dict)  # dir -> name -> id
        self.members_all: dict[str, dict[str, str]] = defaultdict(dict)  # with _test.go

    def index_file(self, path: str, f: FileFacts) -> None:
        d = posixpath.dirname(path)
        for q in self.r.defs[path]:
            if "." not in q:
                self.members_all[d].setdefault(q, node_id(path, q))
                if not path.endswith("_test.go"):
                    self.members[d].setdefault(q, node_id(path, q))

    def keys(self, path: str, f: FileFacts) -> list[tuple]:
        return [("go", posixpath.dirname(path))]

    def value(self, key: tuple) -> Any:
        d = key[1]
        return (dict(self.members.get(d, {})), dict(self.members_all.get(d, {})))

    def refresh(self, keys: set[tuple]) -> None:
        """A package's names again from its files in path order (the first one wins)."""
        r = self.r
        for _, d in keys:
            self.members.pop(d, None)
            self.members_all.pop(d, None)
            for p in sorted(r.mods.go_files.get(d, ()), key=r.order.__getitem__):
                if r.rules.get(p) is self:
                    self.index_file(p, r.facts[p])

    def wild_import(self, imp: Import) -> bool:
        return imp.alias == "."

    def bind_import(self, path: str, imp: Import, names: dict[str, list[ImportRef]]) -> bool:
        if imp.alias not in (".", "_"):
            d = self.r.mods.resolve_go(imp.module)
            local = imp.alias or (
                self.r.mods.go_package_name(d) if d else _default_name(imp.module)
            )
            names[local].append(ImportRef("module", imp))
        return True

    def scope_member(self, path: str, name: str) -> Target | None:
        d = posixpath.dirname(path)
        self.r.read(("go", d))
        members = self.members_all if path.endswith("_test.go") else self.members
        hit = members.get(d, {}).get(name)
        return node(hit) if hit else None

    def pkg_member(self, key: str, name: str) -> Target | None:
        self.r.read(("go", key))
        hit = self.members.get(key, {}).get(name)
        return node(hit) if hit else None

    def package_files(self, key: str) -> list[str]:
        return self.r.mods.go_package_files(key)

    def import_module(self, path: str, imp: Import) -> Target | None:
        d = self.r.mods.resolve_go(imp.module)
        if d:
            return Target(PKG, d, self.family)
        return external_or_none(self.r.mods.go_internal(imp.module))


def _default_name(import_path: str) -> str:
    parts = import_path.rstrip("/").split("/")
    last = parts[-1]
    if re.fullmatch(r"v\d+", last) and len(parts) > 1:
        last = parts[-2]
    return re.sub(r"^go-|[.-]go$", "", last).replace("-", "_").replace(".", "_")


__all__ = ["GoRules"]
