"""Exact evidence in a query: the files, traceback frames and definitions it names.

A bug report says where to look: ``File "/home/x/proj/pkg/mod.py", line 85, in load``
(Python), ``at load (/srv/app/lib/mod.js:10:5)`` (JavaScript), ``pkg/mod.py:85``, a path
in a sentence. These are facts about the repository, stronger than any similarity score,
and the ranker (trained on short questions) must not rank them away. This module finds
them in the text (pure functions; whether a path is indexed is asked through a callable)
and keeps them on top of a ranking (``promote``):

- ``FRAME`` (3): a span at a quoted frame (path and line), and the definition the frame's
  function names in that file;
- ``PATH`` (2): a file the query names (also as the tail of an absolute path from another
  machine: ``/home/x/proj/pkg/mod.py`` is ``pkg/mod.py`` when the index has that path,
  ``site-packages/pkg/mod.py`` is ``src/pkg/mod.py`` when no other file ends so);
- ``DEFINITION`` (1): a definition the exact stage pinned (a name the query spells).

``promote`` puts frames, then named files, first, the ranker's order among equals, and
keeps each named definition among the first ``DEFINITION_WITHIN`` (where the ranker put
it when that is within, else moved up): on validation reports, definitions leading
outright lost to the ranker's own order (docs/reports/2026-11-27-exact-evidence-
validation.md); the rest keep their order. On a code-routed report a
changelog or release-notes file (``CHANGELOG.md``, ``NEWS``, ``whats-new.rst``), which
names every function it ever touched, cannot lead without evidence of its own
(``is_changelog``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from llmc.search.query import (  # Frame, frames, named_paths: re-exported
    Frame,
    clean_path,
    frames,
    named_paths,
    parse,
)

FRAME, PATH, DEFINITION = 3, 2, 1
STRENGTH_NAMES = {FRAME: "frame", PATH: "path named", DEFINITION: "definition named"}
MAX_SUFFIX_PARTS = 8  # a path's tail is tried from this many parts down to one
TAIL_PARTS = 3  # tails this short may sit anywhere in the index (a src/ layout)
DEFINITION_WITHIN = 5  # a named definition is kept among this many first spans
CHANGELOG_AFTER = 10  # on a code report, a changelog without evidence follows this many files

_CHANGELOG = re.compile(
    r"^(?:change[-_ ]?logs?|changes|news|history|releases?|release[-_ ]?notes|whats[-_]?new"
    r"|what[-_]s[-_]new|upgrading|version[-_]?history)(?:[-_.]v?[\dx][\w.]*)?$"
)
_NOTES_EXT = frozenset({"", "md", "markdown", "rst", "txt", "adoc"})
_CHANGELOG_DIRS = frozenset({"changelog.d", "changes", "newsfragments", "release-notes",
                             "release_notes", "whatsnew", "changelog"})  # fmt: skip


@dataclass(frozen=True)
class QueryEvidence:
    """What the query names: frames (path, line, function) and paths, as written."""

    frames: tuple[Frame, ...] = ()
    paths: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.frames or self.paths)


def query_evidence(text: str) -> QueryEvidence:
    """The frames and paths ``text`` names (paths in frames are listed under both)."""
    parsed = parse(text)
    paths = [f.path for f in parsed.frames] + list(parsed.named_paths)
    return QueryEvidence(parsed.frames, tuple(dict.fromkeys(paths)))


def path_suffixes(path: str, parts: int = MAX_SUFFIX_PARTS) -> list[str]:
    """``path`` and its tails, longest first: ``/home/x/pkg/mod.py`` → ``home/x/pkg/mod.py``,
    ``x/pkg/mod.py``, ``pkg/mod.py``, ``mod.py`` (at most ``parts`` parts)."""
    pieces = [p for p in clean_path(path).split("/") if p and p not in (".", "..")]
    return ["/".join(pieces[i:]) for i in range(max(0, len(pieces) - parts), len(pieces))]


def resolve_path(
    path: str, indexed: Callable[[str], bool], by_tail: Callable[[str], Sequence[str]]
) -> str | None:
    """The indexed path ``path`` names: itself or its longest tail that the index holds
    (``indexed``); else the one indexed file that ends in its tail of ``TAIL_PARTS``,
    then fewer, parts (``by_tail``: the indexed paths equal to it or ending in ``/`` + it):
    ``site-packages/attr/_make.py`` → ``src/attr/_make.py``. None when there is none, or
    when a tail fits several files."""
    tails = path_suffixes(path)
    for tail in tails:
        if indexed(tail):
            return tail
    for tail in tails[-TAIL_PARTS:]:
        named = list(dict.fromkeys(by_tail(tail)))
        if named:
            return named[0] if len(named) == 1 else None
    return None


def is_changelog(path: str) -> bool:
    """A changelog, release notes or news file (``CHANGELOG.md``, ``NEWS``,
    ``docs/whats-new.rst``), or a fragment of one (``changelog.d/123.md``)."""
    parts = path.lower().replace("\\", "/").split("/")
    name = parts[-1]
    stem, _, ext = name.rpartition(".") if "." in name else (name, "", "")
    if bool(set(parts[:-1]) & _CHANGELOG_DIRS):
        return True
    return ext in _NOTES_EXT and bool(_CHANGELOG.match(stem))


def containing(spans: Iterable[tuple[int, int, int]], line: int) -> int | None:
    """The id of the smallest ``(id, start, end)`` span holding ``line`` (ties: first)."""
    best: tuple[int, int] | None = None
    for span_id, start, end in spans:
        if start <= line <= end and (best is None or end - start < best[1]):
            best = (span_id, end - start)
    return best[0] if best else None


C = TypeVar("C")


def promote(
    ranked: Sequence[C],
    strength: Mapping[int, int],
    span_id: Callable[[C], int],
    demoted: Callable[[C], bool] | None = None,
    file_of: Callable[[C], str] | None = None,
    within: int = DEFINITION_WITHIN,
) -> list[C]:
    """``ranked`` with its exact evidence kept on top (``strength``: span id → ``FRAME`` /
    ``PATH`` / ``DEFINITION``): frames, then named files, first, the ranker's order among
    equals; a named definition keeps the ranker's place when that is among the first
    ``within``, else it moves up to the ``within``-th place (right after the frames and
    files when they are more; ``within`` 0: definitions lead like the rest). The others
    follow in their order, except that a ``demoted`` one (a changelog on a code report)
    comes after the others of the first ``CHANGELOG_AFTER`` files (``file_of``; without
    it, candidates)."""
    floor = DEFINITION if within <= 0 else PATH
    lead = sorted(
        (c for c in ranked if strength.get(span_id(c), 0) >= floor),
        key=lambda c: -strength[span_id(c)],
    )
    rest = [c for c in ranked if strength.get(span_id(c), 0) < floor]
    if demoted is not None:
        rest = _after_files(
            rest, demoted, file_of, {file_of(c) for c in lead} if file_of else set()
        )
    if floor == DEFINITION:
        return lead + rest
    at = {span_id(c): pos for pos, c in enumerate(lead + rest)}
    named = [c for c in rest if strength.get(span_id(c), 0) > 0]
    # the j-th named definition goes no lower than place within - len(named) + j (0-based),
    # and no higher than its own place or right after the frames and files
    places = [
        min(at[span_id(c)], max(len(lead) + j, within - len(named) + j))
        for j, c in enumerate(named)
    ]
    others = iter(c for c in rest if strength.get(span_id(c), 0) <= 0)
    out = list(lead)
    for c, place in zip(named, places, strict=True):
        while len(out) < place:
            nxt = next(others, None)
            if nxt is None:
                break
            out.append(nxt)
        out.append(c)
    out.extend(others)
    return out


def _after_files(
    rest: list[C], demoted: Callable[[C], bool], file_of: Callable[[C], str] | None,
    files: set[object],
) -> list[C]:  # fmt: skip
    """``rest`` with the ``demoted`` candidates after the others of the first
    ``CHANGELOG_AFTER`` files (counting ``files``, those already ranked above)."""
    kept = [c for c in rest if not demoted(c)]
    late = [c for c in rest if demoted(c)]
    cut = len(kept)
    for i, c in enumerate(kept):
        key: object = file_of(c) if file_of is not None else i
        if key not in files and len(files) >= CHANGELOG_AFTER:
            cut = i
            break
        files.add(key)
    return kept[:cut] + late + kept[cut:]


__all__ = [
    "CHANGELOG_AFTER",
    "DEFINITION",
    "DEFINITION_WITHIN",
    "FRAME",
    "PATH",
    "STRENGTH_NAMES",
    "TAIL_PARTS",
    "Frame",
    "QueryEvidence",
    "containing",
    "frames",
    "is_changelog",
    "named_paths",
    "path_suffixes",
    "promote",
    "query_evidence",
    "resolve_path",
]
