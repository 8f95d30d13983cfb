"""What a name or expression denotes during resolution: the one record lookups pass around.

``node``: a repository node (file, definition); ``inst``: an instance of a class node;
``super``: the bases of a class node (``super()``); ``pkg``: a package that is not one file
(a Go package directory, a Java package, a Python namespace package), owned by the
language rules named in ``lang``; ``ext``: outside the repository (a library, a builtin).
"""

from __future__ import annotations

from dataclasses import dataclass

NODE = "node"
INST = "inst"
SUPER = "super"
PKG = "pkg"


@dataclass(frozen=True, slots=True)
class Target:
    kind: str
    id: str = ""
    lang: str = ""  # pkg targets only: the language family whose rules read ``id``

    @property
    def is_node(self) -> bool:
        return self.kind == NODE


EXT = Target("ext")


def node(nid: str) -> Target:
    return Target(NODE, nid)


def inside(t: Target | None) -> bool:
    """Whether ``t`` is a repository target (neither unknown nor external)."""
    return t is not None and t is not EXT


def first(targets) -> Target | None:
    """The first repository target; else EXT when one was external; else None."""
    ext = False
    for t in targets:
        if t is EXT:
            ext = True
        elif t is not None:
            return t
    return EXT if ext else None


__all__ = ["EXT", "INST", "NODE", "PKG", "SUPER", "Target", "first", "inside", "node"]
