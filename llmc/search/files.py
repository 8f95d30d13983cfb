"""File-level answers (``llmc search --files``, ``"group": "file"``): a deep span list
grouped by file, files ranked by their spans' evidence, each with its best few spans.

The file score is a pure function of the ranks its spans hold in the span list
(``file_score``), chosen by name; the default was chosen on validation projects
(docs/reports/2026-11-27-long-reports-validation.md). The files so ranked are then fused
with the whole-file BM25 list (``llmc.store.file_lexical``) when there is one: each file
scores ``1 / (FUSION_K + its rank by spans) + weight / (FUSION_K + its whole-file rank)``,
so a file whose terms are spread over many spans (a keyword table, ``setup.py``) climbs
(docs/reports/2026-11-27-whole-file-bm25-validation.md). Last, by default, the learned file
ranker reorders the first 40 files of that order (``file_ranker.py``, ``search.file_ranker``;
docs/reports/2026-11-27-file-ranker-validation.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FILE_SPANS = 100  # spans asked of the pipeline before grouping
SPANS_PER_FILE = 3
METHODS = ("max", "max+0.25", "rrf10", "rrf60")
DEFAULT_METHOD = "max"
FUSION_K = 10
WHOLE_FILES = 20  # files asked of the whole-file index


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
    whole: Sequence[str] = (),
    whole_weight: float = 0.0,
    query: str = "",
    ranker: Any = None,
    plain: Sequence[str] = (),
) -> list[FileHit]:
    """The ``k`` best files of ``results`` (spans, best first), each with its first
    ``spans_per_file`` spans; ties keep the order of the files' best spans. With
    ``whole`` (paths by whole-file BM25, best first) and a ``whole_weight`` above 0, the
    two file lists are fused (see the module docstring); a file only the whole-file list
    holds comes with no span. With a ``ranker`` (the learned file ranker's model) and the
    ``query``, the first files of that order are reordered by its score
    (``file_ranker.learned_order``), which becomes their ``score``."""
    ranks: dict[str, list[int]] = {}
    spans: dict[str, list[Any]] = {}
    for i, r in enumerate(results, start=1):
        ranks.setdefault(r.path, []).append(i)
        spans.setdefault(r.path, []).append(r)
    order = sorted(ranks, key=lambda p: (-file_score(ranks[p], method), ranks[p][0]))
    scores = {p: file_score(ranks[p], method) for p in order}
    if whole and whole_weight > 0:
        fused = {p: 1.0 / (FUSION_K + i) for i, p in enumerate(order, start=1)}
        for i, p in enumerate(dict.fromkeys(whole), start=1):
            fused[p] = fused.get(p, 0.0) + whole_weight / (FUSION_K + i)
        place = {p: i for i, p in enumerate(order)}
        order = sorted(fused, key=lambda p: (-fused[p], place.get(p, len(place)), p))
        scores = fused
    if ranker is not None and query:
        from llmc.search.file_ranker import learned_order

        listed = [r.path for r in results]
        order, learned = learned_order(ranker, query, listed, whole, order, plain)
        scores = {**scores, **learned}
    return [
        FileHit(
            path=p,
            score=scores[p],
            matched=len(ranks.get(p, ())),
            spans=tuple(spans.get(p, [])[: max(1, spans_per_file)]),
        )
        for p in order[: max(0, k)]
    ]


def whole_file_args(searcher: Any, query: str) -> dict[str, Any]:
    """``group_by_file``'s / ``files_json``'s file-level arguments for ``searcher`` (a
    ``Searcher``: its whole-file list, ``search.file_bm25_weight``, and the learned file
    ranker's model when ``search.file_ranker`` is ``learned``, with the plain RRF order of
    its last search of ``query``: ``Searcher.plain_files``); empty for any other
    searcher, whose files then come from its span list alone."""
    ask = getattr(searcher, "whole_files", None)
    if not callable(ask):
        return {}
    from llmc.search.file_ranker import configured_model

    ranker = configured_model(searcher.cfg.search.file_ranker)
    plain = getattr(searcher, "plain_files", None)
    return {
        "whole": ask(query),
        "whole_weight": searcher.cfg.search.file_bm25_weight,
        "query": query,
        "ranker": ranker,
        "plain": plain(query) if ranker is not None and callable(plain) else [],
    }


__all__ = [
    "DEFAULT_METHOD",
    "FILE_SPANS",
    "FUSION_K",
    "WHOLE_FILES",
    "METHODS",
    "SPANS_PER_FILE",
    "FileHit",
    "file_score",
    "group_by_file",
    "whole_file_args",
]
