"""The lead stage: what the query spells exactly comes first, after every ranker.

Two kinds of query say precisely what they want, and the learned ranker, which reads the
exact-symbol match as one feature among 49, can rank it 4th or lower:

- **A lookup** (``query.lookup_name``): one name and words that only say "its
  definition" ("class Schema", "the load method", "Nested", "where is X defined?").
  The name's code definitions, when the exact stage pinned them, lead: the answer a
  "go to symbol" gives. A doc heading of that name keeps the ranker's place.
- **A pasted message** (``query.pasted_messages``): an exception line or a quoted
  string. The code spans that hold it verbatim (whitespace and case aside) lead: they
  are the code that says it. Found by a conjunction of its terms in the lexical index
  (``LexicalIndex.containing_all``), then checked against the span's text.

Long reports are left to their own evidence (``exact.keep_evidence``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from llmc.search import fusion
from llmc.search.query import collapse, parse
from llmc.search.router import is_test_path
from llmc.search.trace import Trace
from llmc.search.types import Candidate
from llmc.types import CODE, StoredSpan

if TYPE_CHECKING:  # pragma: no cover
    from llmc.search.sources import Sources

MESSAGE_CANDIDATES = 64  # spans holding every term of a message, checked verbatim
MESSAGE_LEADS = 3  # at most this many spans lead for the pasted messages
_SEAMS = re.compile(r"(?<=\S)([\"'])\s?\1(?=\s?\S)")  # "abc" "def": the quotes between


def lead(
    sources: Sources, text: str, ranked: Sequence[Candidate], pinned: Sequence[int],
    trace: Trace,
) -> list[Candidate]:  # fmt: skip
    """``ranked`` with the spans holding a pasted message, then a lookup's code
    definitions (of those the exact stage pinned), moved to the top."""
    first = message_spans(sources, text, trace)
    name = parse(text).lookup_name
    if name and pinned:
        spans = sources.spans(list(pinned))
        code = [i for i in pinned if i in spans and spans[i].span.category == CODE]
        code = _tests_last(code, spans)
        if code:
            trace.note("lead", f"a lookup of `{name}`: {len(code)} code definition(s) first")
        first += [i for i in code if i not in first]
    return fusion.pin_first(ranked, first) if first else list(ranked)


def message_spans(sources: Sources, text: str, trace: Trace) -> list[int]:
    """The code spans holding a message the query pastes, verbatim, best BM25 first."""
    messages = parse(text).pasted_messages
    if not messages or sources.lexical is None:
        return []
    found: list[int] = []
    for message in messages:
        hits = sources.lexical.containing_all(message, MESSAGE_CANDIDATES)
        if not hits:
            continue
        wanted = _flat(message)
        spans = sources.spans([h.span_id for h in hits])
        holding = [
            h.span_id for h in hits
            if h.span_id in spans and spans[h.span_id].span.category == CODE
            and wanted in _flat(spans[h.span_id].span.text)
        ]  # fmt: skip
        source = [i for i in holding if not is_test_path(spans[i].span.path)]
        trace.note(
            "lead",
            f"message {message[:60]!r}: verbatim in {len(holding)} code span(s), "
            f"{len(source)} outside tests",
        )
        # the code that says it, not the tests that expect it (unless only tests say it)
        found += [i for i in (source or holding) if i not in found]
    return found[:MESSAGE_LEADS]


def _tests_last(ids: list[int], spans: Mapping[int, StoredSpan]) -> list[int]:
    return sorted(ids, key=lambda i: is_test_path(spans[i].span.path))


def _flat(text: str) -> str:
    """Case, runs of whitespace and the seams of implicitly joined string literals aside
    (``"Working outside of application"`` / ``" context."`` over two lines)."""
    return _SEAMS.sub("", collapse(text)).strip().casefold()


__all__ = ["lead", "message_spans"]
