"""File-level answers (``llmc search --files``, ``"group": "file"``): a deep span list
grouped by file, files ranked by their spans' evidence, each with its best few spans.

The file score is a pure function of the ranks its spans hold in the span list
(``file_score``), chosen by name; the default was chosen on validation projects
(docs/reports/2026-11-27-long-reports-validation.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FILE_SPANS = 100  # spans asked of the pipeline before grouping
SPANS_PER_FILE = 3
METHODS = ("max", "max+0.25", "rrf10", "rrf60")
DEFAULT_METHOD = "max"


def file_score(ranks: Sequence[int], method: str = DEFAULT_METHOD) -> float:
    """A file's score from the 1-based ranks of its spans in the span list.

    ``max``: its best span alone, 1 / rank (the file ranks where its best span does);
    ``max+0.25``: that plus a quarter of 1 / rank of its next two spans; ``rrf10`` /
    ``rrf60``: the sum of 1 / (k + rank) over its spans (k = 10, 60), so a file whose
    evidence is spread over several spans climbs. ``max`` won on validation (commit
    subjects and long reports → files); the sums lost clearly, ``max+0.25`` tied."""
    if not ranks:
        return 0.0
    if method == "max":
        return 1.0 / min(ranks)
    if method == "max+0.25":
        best, *rest = sorted(ranks)
        return 1.0 / best + 0.25 * sum(1.0 / r for r in rest[:2])
    if method == "rrf10":
        return sum(1.0 / (10 + r) for r in ranks)
    if method == "rrf60":
        return sum(1.0 / (60 + r) for r in ranks)
    raise ValueError(f"unknown file score {method!r} (known: {', '.join(METHODS)})")


@dataclass(frozen=True)
class FileHit:
    """One file of a file-level answer: its score, its span count in the span list and
    its best spans, best first."""

    path: str
    score: float
    matched: int  # how many of the span list's spans lie in it
    spans: tuple[Any, ...]  # SearchResult-like: path, start_line, end_line, score, ...

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "score": round(self.score, 6),
            "matched_spans": self.matched,
            "spans": [
                {
                    "start_line": s.start_line,
                    "end_line": s.end_line,
                    "symbol": getattr(s, "symbol", ""),
                    "kind": getattr(s, "kind", ""),
                    "score": round(float(s.score), 6),
                    "snippet": getattr(s, "snippet", ""),
                }
                for s in self.spans
            ],
        }


def group_by_file(
    results: Sequence[Any],
    k: int,
    *,
    spans_per_file: int = SPANS_PER_FILE,
    method: str = DEFAULT_METHOD,
) -> list[FileHit]:
    """The ``k`` best files of ``results`` (spans, best first), each with its first
    ``spans_per_file`` spans; ties keep the order of the files' best spans."""
    ranks: dict[str, list[int]] = {}
    spans: dict[str, list[Any]] = {}
    for i, r in enumerate(results, start=1):
        ranks.setdefault(r.path, []).append(i)
        spans.setdefault(r.path, []).append(r)
    order = sorted(ranks, key=lambda p: (-file_score(ranks[p], method), ranks[p][0]))
    return [
        FileHit(
            path=p,
            score=file_score(ranks[p], method),
            matched=len(ranks[p]),
            spans=tuple(spans[p][: max(1, spans_per_file)]),
        )
        for p in order[: max(0, k)]
    ]


def files_json(response: dict[str, Any], k: int, spans_per_file: int = SPANS_PER_FILE) -> dict:
    """A span answer's JSON (``SearchResponse.to_json``) turned into the file-level one:
    ``results`` replaced by ``files``, everything else kept."""
    from types import SimpleNamespace

    rows = [SimpleNamespace(**r) for r in response.get("results", [])]
    hits = group_by_file(rows, k, spans_per_file=spans_per_file)
    out = {key: v for key, v in response.items() if key != "results"}
    out["group"] = "file"
    out["files"] = [h.to_json() for h in hits]
    return out


__all__ = [
    "DEFAULT_METHOD",
    "FILE_SPANS",
    "METHODS",
    "SPANS_PER_FILE",
    "FileHit",
    "file_score",
    "files_json",
    "group_by_file",
]
