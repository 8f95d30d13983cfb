"""How each language family resolves names: one :class:`LangRules` subclass per family.

A :class:`~llmc.graph.langs.LangSpec` names its family's rules; the resolver makes one
instance per family and calls its hooks (import binding and resolution, module names,
package scope, rooted paths, module members, doc-mention names), so the resolver itself has
no language branches.
"""

from llmc.graph.rules.base import ImportRef, LangRules

__all__ = ["ImportRef", "LangRules"]
