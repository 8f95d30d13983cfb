"""The exact-symbol stage: definitions the query names, found by name, not by similarity.

A code-shaped name in the query (``ShoppingCart``, ``apply_discount()``, ``cart.py``) that
the index defines few times is *pinned*: its definitions come first whatever fusion says.
A name with more definitions than ``search.exact_max`` (``__init__``, ``run``) says
little and is left to fusion; past the pin budget, definitions are fused as the ``exact``
list. Once the route is known, plain words of a code question may name symbols too
(``exact_words``), and pins are kept only from routes the decision searches.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmc.config import SearchConfig
from llmc.search import retrieve
from llmc.search.query import identifiers, paths
from llmc.search.trace import Trace
from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, ROUTE_CATEGORY, RouteDecision
from llmc.types import StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources
    from llmc.store.db import Store


@dataclasses.dataclass(frozen=True)
class ExactMatch:
    """What the exact-symbol stage found."""

    pinned: tuple[int, ...] = ()
    fused: tuple[StoredSpan, ...] = ()  # definitions fused as the ``exact`` list
    defined: tuple[str, ...] = ()  # names the query mentions that the index defines


def defined_names(store: Store, text: str, exact_max: int) -> tuple[str, ...]:
    """The code-shaped names in ``text`` that the index defines at most ``exact_max``
    times (the router's evidence, and `llmc tune`'s intent features)."""
    strong = [i for i in identifiers(text) if i.strong]
    found = retrieve.definitions(store, strong)
    return tuple(ident.name for ident, defs in found if len(defs) <= exact_max)


def exact_symbols(sources: Sources, text: str, scfg: SearchConfig, trace: Trace) -> ExactMatch:
    """Definitions of the code-looking names in the query: pinned first when a name
    has few definitions, else fused as the ``exact`` list; files the query names."""
    if not scfg.exact_symbol:
        return ExactMatch()
    strong = [i for i in identifiers(text) if i.strong]
    pinned: list[int] = []
    fused: list[StoredSpan] = []
    defined: list[str] = []
    for ident, defs in retrieve.definitions(sources.store, strong):
        if len(defs) > scfg.exact_max:  # __init__, run, main: naming it says little
            trace.note("exact", f"`{ident.name}`: {len(defs)} definitions, too common to pin")
        elif len(pinned) < scfg.exact_max:
            defined.append(ident.name)
            pinned += [d.id for d in defs][: scfg.exact_max - len(pinned)]
            trace.note("exact", f"`{ident.name}` ({ident.why}): pinned {len(defs)} definition(s)")
        else:
            defined.append(ident.name)
            fused += defs
            trace.note("exact", f"`{ident.name}`: {len(defs)} definition(s), fused")
    named = [p for p, _ in paths(text)]
    if named:
        in_files = retrieve.file_spans(sources.store, named)
        fused += in_files
        if in_files:
            trace.note("exact", f"query names indexed file(s): {', '.join(named)}")
    return ExactMatch(tuple(pinned), tuple(fused), tuple(defined))


def exact_words(
    sources: Sources,
    text: str,
    decision: RouteDecision,
    exact: ExactMatch,
    scfg: SearchConfig,
    trace: Trace,
) -> ExactMatch:
    """For a code question, plain words may name symbols too: fuse their definitions.
    Pins stay only from routes the decision searches (a forced --route docs pins no code)."""
    pinned = allowed_pins(sources, exact.pinned, decision)
    if not scfg.exact_symbol or decision.intent != CODE_ROUTE:
        return dataclasses.replace(exact, pinned=pinned)
    idents = identifiers(text)
    covered = {w.lower() for i in idents if i.strong for w in re.findall(r"\w+", i.name)}
    covered |= {w.lower() for p, _ in paths(text) for w in re.findall(r"\w+", p)}
    weak = [i for i in idents if not i.strong and i.name.lower() not in covered]
    fused = list(exact.fused)
    with trace.stage("exact"):
        for ident, defs in retrieve.definitions(sources.store, weak):
            if len(defs) <= scfg.exact_max:
                fused += defs
                trace.note("exact", f"word `{ident.name}` names {len(defs)} definition(s)")
    return dataclasses.replace(exact, pinned=pinned, fused=tuple(fused))


def allowed_pins(
    sources: Sources, pinned: Sequence[int], decision: RouteDecision
) -> tuple[int, ...]:
    if not pinned:
        return ()
    cats = {ROUTE_CATEGORY[r] for r in (CODE_ROUTE, DOCS_ROUTE) if decision.weight(r) > 0}
    spans = sources.spans(list(pinned))
    return tuple(i for i in pinned if i in spans and spans[i].span.category in cats)


def pinned_categories(sources: Sources, pinned: Sequence[int]) -> set[str]:
    """The categories (code, doc) of the pinned spans."""
    return {s.span.category for s in sources.spans(list(pinned)).values()} if pinned else set()


__all__ = [
    "ExactMatch",
    "allowed_pins",
    "defined_names",
    "exact_symbols",
    "exact_words",
    "pinned_categories",
]
