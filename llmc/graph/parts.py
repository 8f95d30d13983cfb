"""A cold build's merge, part by part: the edges of one range of sources at a time.

A cold build (no kept state) spills each resolved file's edge events to disk
(:class:`PartSpill`), each event in the file of its phase and of its source's *part*: the
sources are cut into ranges of the sorted file paths (:func:`part_bounds`), so that every
id of a file (``path``, ``path::...``) falls in one part. The merge then replays the
``?name`` placeholders first (every phase, in order: the first one of a name wins, as in
one pass), then each part's events alone, after the part's edges that the tables made (kept on disk
while the files are resolved): the part's merged edges, ``tests`` edges added
where one pass adds them (before the mentions), are encoded, sorted, to a temp file and let
go (:class:`~llmc.graph.output.EncodedEdges`), and the next part's are merged. The merged
edges are never all in memory: one part's are (on nine large projects 834k edges held
~150 MB whole).

The result is the same as merging every file's events in one table (``Resolver._merge``):

* an edge's key is (source, target, type), so its events are all in its source's part,
  in the same order (files in merge order, phases in order), and a part's table is the
  whole table's edges of that part, inserted in the same order;
* a ``tests`` edge is made from the confident calls and imports of a test file's ids,
  and leads from the test that encloses them (the same file, so the same part): each part
  makes its own, from its edges in the same order as one pass would visit them;
* the graph file lists edges by source, then (type, target): parts are ranges of sources
  in that order, each written sorted.
"""

from __future__ import annotations

import bisect
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from llmc.graph.cache import SPILL
from llmc.graph.codec import decode_events
from llmc.graph.edges import Edge
from llmc.graph.output import EncodedEdges
from llmc.paths import open_state_file

log = logging.getLogger(__name__)

# Events of this many files' sources, about, in one part (and at most MAX_PARTS parts):
# on nine large projects, 17,870 files in 12 parts of ~70k edges each.
FILES_PER_PART = 1500
MAX_PARTS = 128
_SEED_BATCH = 4096  # kept edges encoded at a time
_intern = sys.intern
EVENTS = "graph_events.{pid}.{slot}.tmp"  # slot: phase * (parts + 1) + part (+1: the ?names)


def part_bounds(paths: Iterable[str], files_per_part: int | None = None) -> list[str]:
    """Where each part after the first begins: file paths, about ``files_per_part`` apart
    in sorted order, each one that no other path is a prefix of (then every id of a file
    sorts inside its part: ``a.py::x`` would sort after ``a.py.orig``, were that a bound)."""
    per = FILES_PER_PART if files_per_part is None else files_per_part
    ordered = sorted(paths)
    known = set(ordered)
    n = len(ordered)
    parts = min(MAX_PARTS, max(1, n // max(1, per)))
    bounds: list[str] = []
    for k in range(1, parts):
        i = k * n // parts
        while i < n and any(ordered[i][:j] in known for j in range(1, len(ordered[i]))):
            i += 1
        if i < n and (not bounds or ordered[i] > bounds[-1]):
            bounds.append(ordered[i])
    return bounds


def spill_paths(llmc_dir: Path, pid: int) -> list[Path]:
    """Every spill file a cold build in process ``pid`` may have left (results, events,
    encoded edges)."""
    llmc_dir = Path(llmc_dir)
    return [llmc_dir / SPILL.format(pid=pid), *llmc_dir.glob(f"graph_events.{pid}.*.tmp")]


class PartSpill:
    """Each resolved file's edge events on disk, by phase and by the part of their source,
    and the ``?name`` placeholders by phase; then the merged edges, encoded part by part."""

    def __init__(self, llmc_dir: Path, phases: int, bounds: list[str]):
        self.bounds = bounds
        self.parts = len(bounds) + 1
        self.phases = phases
        pid = os.getpid()
        slots = phases * (self.parts + 1)
        self.paths = [Path(llmc_dir) / EVENTS.format(pid=pid, slot=i) for i in range(slots)]
        self._fhs = [_create(p) for p in self.paths]
        self.seed_paths = [
            Path(llmc_dir) / EVENTS.format(pid=pid, slot=f"seed{k}") for k in range(self.parts)
        ]
        self._seed_fhs: list = []
        self.merged = EncodedEdges(Path(llmc_dir) / EVENTS.format(pid=pid, slot="edges"))

    def _slot(self, phase: int, part: int) -> int:
        return phase * (self.parts + 1) + part

    def part_of(self, src: str) -> int:
        return bisect.bisect_right(self.bounds, src)

    def add(self, phases: tuple) -> None:
        """One resolved file's events, one tuple per phase."""
        one = self.parts == 1
        for phase, events in enumerate(phases):
            if not events:
                continue
            by_part: dict[int, list] = {}
            for ev in events:
                part = self.parts if len(ev) == 3 else (0 if one else self.part_of(ev[0]))
                got = by_part.get(part)
                if got is None:
                    got = by_part[part] = []
                got.append(ev)
            for part, evs in by_part.items():
                self._fhs[self._slot(phase, part)].write(orjson.dumps(evs) + b"\n")

    def keep_seeds(self, edges: dict[tuple, Edge]) -> None:
        """Put the edges made before any event (the tables' ``defines``) on disk, by the
        part of their source, in their order, until their part is merged (``seeds``);
        ``edges`` is emptied. Called as soon as the tables are built, they are out of
        memory while the files are resolved (on nine large projects 204k edges, ~45 MB)."""
        if not edges:
            return
        if not self._seed_fhs:
            self._seed_fhs = [_create(p) for p in self.seed_paths]
        rows: list[list] = [[] for _ in range(self.parts)]
        for (s, d, t), e in edges.items():
            got = rows[self.part_of(s)]
            got.append((s, d, t, e.confidence, e.count, e.line, e.via, e.via_first))
            if len(got) >= _SEED_BATCH:
                self._seed_fhs[self.part_of(s)].write(orjson.dumps(got) + b"\n")
                got.clear()
        for part, got in enumerate(rows):
            if got:
                self._seed_fhs[part].write(orjson.dumps(got) + b"\n")
        edges.clear()

    def seeds(self, part: int) -> dict[tuple, Edge]:
        """The kept edges of ``part``, as they were (``keep_seeds``), in their order."""
        out: dict[tuple, Edge] = {}
        if not self._seed_fhs:
            return out
        self._seed_fhs[part].close()
        with open(self.seed_paths[part], "rb") as fh:
            for line in fh:
                for s, d, t, conf, count, ln, via, via_first in orjson.loads(line):
                    out[(_intern(s), _intern(d), _intern(t))] = Edge.restore(
                        conf, count, ln, _intern(via), via_first
                    )
        return out

    def placeholders(self) -> Iterator[list[tuple]]:
        """Every file's ``?name`` placeholder events, phase by phase, in the order added."""
        for phase in range(self.phases):
            yield from self._read(self._slot(phase, self.parts))

    def part(self, phase: int, part: int) -> Iterator[list[tuple]]:
        """Each file's events of ``phase`` whose source is in ``part``, in the order added."""
        return self._read(self._slot(phase, part))

    def _read(self, slot: int) -> Iterator[list[tuple]]:
        self._fhs[slot].close()
        with open(self.paths[slot], "rb") as fh:
            for line in fh:
                events = decode_events(line)
                if events is None:
                    log.warning("graph: spilled edge events unreadable; left out")
                    continue
                yield events

    def remove(self) -> None:
        """Delete the events (the merged edges stay until written: ``merged.remove()``)."""
        for fh in (*self._fhs, *self._seed_fhs):
            fh.close()
        for p in (*self.paths, *self.seed_paths):
            try:
                p.unlink()
            except OSError:
                pass


def _create(path: Path):  # noqa: ANN202 (a binary file object)
    fd = open_state_file(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    return os.fdopen(fd, "wb")


__all__ = ["EVENTS", "PartSpill", "part_bounds", "spill_paths"]
