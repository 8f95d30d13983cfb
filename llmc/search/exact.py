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
from llmc.search import evidence, retrieve
from llmc.search.query import parse
from llmc.search.trace import Trace
from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, ROUTE_CATEGORY, Candidate, RouteDecision
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
    # a report's exact evidence (``evidence.py``): (span id, strength) of spans at quoted
    # frames and of the definitions frames name; the indexed files the report names
    evidence: tuple[tuple[int, int], ...] = ()
    evidence_paths: tuple[str, ...] = ()


def defined_names(store: Store, text: str, exact_max: int) -> tuple[str, ...]:
    """The code-shaped names in ``text`` that the index defines at most ``exact_max``
    times (the router's evidence, and `llmc tune`'s intent features)."""
    strong = [i for i in parse(text).identifiers if i.strong]
    found = retrieve.definitions(store, strong)
    return tuple(ident.name for ident, defs in found if len(defs) <= exact_max)


def exact_symbols(sources: Sources, text: str, scfg: SearchConfig, trace: Trace) -> ExactMatch:
    """Definitions of the code-looking names in the query: pinned first when a name
    has few definitions, else fused as the ``exact`` list; files the query names."""
    if not scfg.exact_symbol:
        return ExactMatch()
    strong = [i for i in parse(text).identifiers if i.strong]
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
    named = [p for p, _ in parse(text).paths]
    if named:
        in_files = retrieve.file_spans(sources.store, named)
        fused += in_files
        if in_files:
            trace.note("exact", f"query names indexed file(s): {', '.join(named)}")
    return ExactMatch(tuple(pinned), tuple(fused), tuple(defined))


def report_evidence(sources: Sources, text: str, exact: ExactMatch, trace: Trace) -> ExactMatch:
    """A report's frames and paths, resolved against the index (an absolute path from
    another machine by its longest indexed tail): the span holding each frame's line and
    the definitions its function names in that file (``FRAME``), the files it names
    (``PATH``; their first spans join the ``exact`` list), pinned code definitions
    (``DEFINITION``: a doc section named like the project is no evidence)."""
    found = evidence.query_evidence(text)
    pinned = sources.spans(list(exact.pinned)) if exact.pinned else {}
    strength: dict[int, int] = {  # a code definition; a doc heading is not one
        i: evidence.DEFINITION for i, s in pinned.items() if s.span.category == "code"
    }
    fused = list(exact.fused)
    store = sources.store
    resolved: dict[str, str | None] = {}

    def resolve(path: str) -> str | None:
        if path not in resolved:
            resolved[path] = evidence.resolve_path(
                path, lambda p: _indexed(store, p), lambda n: _named(store, n)
            )
        return resolved[path]

    for frame in found.frames:
        path = resolve(frame.path)
        if path is None:
            continue
        spans = store.spans_for_path(path)
        at = evidence.containing(
            ((s.id, s.span.start_line, s.span.end_line) for s in spans), frame.line
        )
        hits = [at] if at is not None else []
        if frame.function:
            last = frame.function.rsplit(".", 1)[-1]
            hits += [s.id for s in spans if frame.function in (s.span.symbol, s.span.qualname)
                     or s.span.symbol == last]  # fmt: skip
        for span_id in hits:
            strength[span_id] = evidence.FRAME
        fused += [s for s in spans if s.id in hits]
        trace.note(
            "evidence",
            f"frame {path}:{frame.line}{' in ' + frame.function if frame.function else ''}: "
            f"{len(set(hits))} span(s)",
        )
    paths = [p for p in dict.fromkeys(resolve(p) for p in found.paths) if p is not None]
    for path in paths:
        fused += retrieve.file_spans(store, [path])
    if paths:
        trace.note("evidence", f"names indexed file(s): {', '.join(paths)}")
    return dataclasses.replace(
        exact, fused=tuple(fused), evidence=tuple(strength.items()), evidence_paths=tuple(paths)
    )


def keep_evidence(
    sources: Sources, ranked: Sequence[Candidate], exact: ExactMatch, decision: RouteDecision,
    trace: Trace,
) -> list[Candidate]:  # fmt: skip
    """A report's ranking with its exact evidence on top (``evidence.promote``): spans at
    quoted frames, then the best-ranked span of each file it names, first (the ranker's
    order among equals); the code definitions it names kept among the first
    ``evidence.DEFINITION_WITHIN``. On a code report a changelog without evidence cannot
    lead."""
    strength = dict(exact.evidence)
    paths = sources.paths([c.span_id for c in ranked])
    for path in exact.evidence_paths:
        best = next((c.span_id for c in ranked if paths.get(c.span_id) == path), None)
        if best is not None:
            strength[best] = max(strength.get(best, 0), evidence.PATH)
    demoted = None
    if decision.intent == CODE_ROUTE:
        demoted = lambda c: evidence.is_changelog(paths.get(c.span_id, ""))  # noqa: E731
    out = evidence.promote(
        ranked, strength, lambda c: c.span_id, demoted, lambda c: paths.get(c.span_id, "")
    )
    lead = [c for c in out if strength.get(c.span_id, 0) > 0]
    if lead:
        counts = {n: sum(1 for c in lead if strength[c.span_id] == s)
                  for s, n in evidence.STRENGTH_NAMES.items()}  # fmt: skip
        said = ", ".join(f"{v} {n}" for n, v in counts.items() if v)
        trace.note("evidence", f"exact evidence kept on top: {said}")
    return out


def _indexed(store: Store, path: str) -> bool:
    return store.has_file(path)


def _named(store: Store, tail: str) -> list[str]:
    """Indexed paths ending in ``/`` + ``tail`` (at most 2: one is an answer, two a doubt)."""
    return store.paths_ending(tail, limit=2)


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
    idents = parse(text).identifiers
    covered = {w.lower() for i in idents if i.strong for w in re.findall(r"\w+", i.name)}
    covered |= {w.lower() for p, _ in parse(text).paths for w in re.findall(r"\w+", p)}
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
    "keep_evidence",
    "pinned_categories",
    "report_evidence",
]
