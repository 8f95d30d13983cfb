"""The hooks a language family's resolution rules provide, with the defaults that suit a
language the resolver knows nothing special about."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from llmc.graph.model import EXACT, FILE, IMPORTS, FileFacts, Import
from llmc.graph.target import EXT, NODE, Target, inside

if TYPE_CHECKING:
    from llmc.graph.edges import EdgeSink
    from llmc.graph.modules import ModuleIndex


@dataclass(frozen=True)
class ImportRef:
    """A local name bound by an import: the ``module`` itself, its ``top`` package
    (Python ``import a.b`` binds ``a``), or the ``name`` taken from it."""

    kind: str  # module | top | name
    imp: Import
    name: str = ""


class Resolution(Protocol):
    """The resolver as language rules see it (:class:`llmc.graph.resolve.Resolver`)."""

    facts: dict[str, FileFacts]
    mods: ModuleIndex
    defs: dict[str, dict[str, Any]]
    wild: dict[str, list[Import]]

    def read(self, key: Hashable) -> None: ...
    def defs_of(self, path: str) -> dict[str, Any]: ...
    def facts_of(self, path: str) -> FileFacts | None: ...
    def node_attrs(self, nid: str) -> dict[str, Any] | None: ...
    def kind(self, nid: str) -> str: ...
    def def_kind(self, path: str, qual: str) -> str: ...
    def lookup(self, path: str, scope: str, name: str) -> Target | None: ...
    def member(self, target: Target | None, name: str) -> Target | None: ...
    def walk(self, t: Target | None, segs: list[str]) -> Target | None: ...
    def enclosing_class(self, path: str, scope: str) -> str | None: ...
    def import_module(self, path: str, imp: Import) -> Target | None: ...
    def count_import(self, path: str, mod: Target | None, line: int, out: EdgeSink) -> None: ...


class LangRules:
    """One language family's resolution rules, for one resolver run."""

    family = ""
    table_key = ""  # the first item of the keys of this family's own table entries

    def __init__(self, r: Resolution) -> None:
        self.r = r

    # -- indexing ---------------------------------------------------------------------------
    def module_name(self, path: str, f: FileFacts) -> str:
        """The ``module`` attribute of a file node (Python dotted name, Go/Java package)."""
        return f.module

    def index_file(self, path: str, f: FileFacts) -> None:
        """Add the file's definitions to this family's own tables."""

    def keys(self, path: str, f: FileFacts) -> list[tuple]:
        """The keys of this family's table entries that ``path``'s facts ``f`` add to
        (the keys its lookups record, see :meth:`value`)."""
        return []

    def value(self, key: tuple) -> Any:
        """The table entry a lookup recording ``key`` reads: equal values, equal answers."""
        return None

    def refresh(self, keys: set[tuple]) -> None:
        """Recompute these entries from every file's facts, after some files changed."""

    def bind_import(self, path: str, imp: Import, names: dict[str, list[ImportRef]]) -> bool:
        """Bind the names of an import the family's own way; False: the common way."""
        return False

    def wild_import(self, imp: Import) -> bool:
        """Whether an import that ``bind_import`` took is a wildcard one (Go's ``.``)."""
        return False

    def import_names(
        self, path: str, f: FileFacts, wild: list[Import] | None = None
    ) -> dict[str, list[ImportRef]]:
        """The local names ``path``'s imports bind; with ``wild``, its wildcard imports
        are appended there, in order (re-exports bind none: ``Lookup.reexports_of``)."""
        names: dict[str, list[ImportRef]] = defaultdict(list)
        for imp in f.imports:
            if imp.kind == "reexport":
                continue
            if self.bind_import(path, imp, names):
                if wild is not None and self.wild_import(imp):
                    wild.append(imp)
            elif imp.kind == "mod":
                names[imp.module].append(ImportRef("module", imp))
            elif not imp.names:
                if imp.alias:
                    names[imp.alias].append(ImportRef("module", imp))
                elif top := self.bare_import(imp):
                    names[top].append(ImportRef("top", imp))
            else:
                if imp.alias:  # JS `import * as ns` together with other names
                    names[imp.alias].append(ImportRef("module", imp))
                for name, alias in imp.names:
                    if name == "*":
                        if wild is not None:
                            wild.append(imp)
                    else:
                        names[alias or name].append(ImportRef("name", imp, name))
        return names

    def bare_import(self, imp: Import) -> str:
        """The name a plain ``import a.b`` without alias binds ("" : none)."""
        return ""

    # -- lookups ------------------------------------------------------------------------------
    def scope_member(self, path: str, name: str) -> Target | None:
        """A name visible in the whole file besides its own definitions and imports (the
        Go package, the Java package, Rust child modules)."""
        return None

    def rooted_path(self, path: str, scope: str, segs: list[str]) -> tuple[bool, Target | None]:
        """A path the family resolves from a root other than the scope (Rust ``crate::``)."""
        return False, None

    def module_member(self, path: str, f: FileFacts, name: str) -> tuple[bool, Target | None]:
        """``name`` of module ``path`` before re-exports and imports; (True, t) decides."""
        return False, None

    def pkg_member(self, key: str, name: str) -> Target | None:
        return None

    def package_files(self, key: str) -> list[str]:
        """The files an import of package ``key`` links to."""
        return []

    def import_module(self, path: str, imp: Import) -> Target | None:
        return None

    # -- edges --------------------------------------------------------------------------------
    def record_import(self, path: str, imp: Import, out: EdgeSink) -> None:
        """Edges and counts for one import statement."""
        r = self.r
        mod = r.import_module(path, imp)
        r.count_import(path, mod, imp.line, out)
        if not inside(mod):
            return
        for name, _ in imp.names:
            if name == "*":
                continue
            t = r.member(mod, name)
            if t is not None and t.kind == NODE and r.kind(t.id) != FILE:
                out.edge(path, t.id, IMPORTS, EXACT, imp.line, "symbol")

    def fqn(self, sym: str) -> str | None:
        """The node a fully qualified name in a doc mention names."""
        return None

    def mention_module(self, sym: str) -> list[str]:
        """Files of the module a doc mention names."""
        return []

    def known_top(self, name: str) -> bool:
        """Whether ``name`` is a top-level package of the repository."""
        return False


def external_or_none(internal: bool) -> Target | None:
    """An import that resolved to no file: unknown when it names the repository, else EXT."""
    return None if internal else EXT


__all__ = ["ImportRef", "LangRules", "Resolution", "external_or_none"]
