"""The one answer path: a query's span answer or file answer, as the CLI (with or without a
daemon), the daemon's ``/v1/search`` and MCP's ``search`` tool, and the lab all get it.

``answer`` runs the pipeline once (``Searcher.search``, whose result step skips the spans of
files deleted since the index run and says so: ``results.py``), and for ``group="file"``
groups a deeper span list into files (``files.py``: the whole-file BM25 list fused in, which
leaves deleted files out too; the learned file ranker). Nothing else assembles an answer,
so what the lab measures is what a user gets, and an answer does not depend on whether a
daemon runs (tests/daemon/test_one_answer_path.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from llmc.search.files import FILE_SPANS, FileHit, group_by_file, whole_file_args
from llmc.search.types import SearchResponse

GROUPS = ("span", "file")


@dataclass(frozen=True)
class Answer:
    """A query's answer. ``response`` is the span answer (for a file answer, the deeper
    span list the files were grouped from); ``files`` the file answer, best first."""

    response: SearchResponse
    group: str = "span"
    files: tuple[FileHit, ...] = ()
    whole_file_weight: float = 0.0
    file_ranker: str = "fusion"

    @property
    def results(self) -> tuple[Any, ...]:
        return self.response.results

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.response.warnings

    def with_warning(self, warning: str) -> Answer:
        response = dataclasses.replace(self.response, warnings=(*self.warnings, warning))
        return dataclasses.replace(self, response=response)

    def to_json(self, extras: bool = False) -> dict[str, Any]:
        """The `llmc search --json` object (``--files``: ``group`` and ``files`` in place
        of ``results``). ``extras`` adds what a human display needs beyond it:
        ``highlight_terms`` and, per result, ``span_id``, ``qualname``, ``category``,
        ``snippet_start_line``."""
        out = self.response.to_json()
        if extras:
            out["highlight_terms"] = list(self.response.highlight_terms)
            for row, r in zip(out["results"], self.response.results, strict=True):
                row.update(
                    span_id=r.span_id,
                    qualname=r.qualname,
                    category=r.category,
                    snippet_start_line=r.snippet_start_line,
                )
        if self.group != "file":
            return out
        del out["results"]
        out["group"] = "file"
        out["whole_file_weight"] = self.whole_file_weight
        out["file_ranker"] = self.file_ranker
        out["files"] = [h.to_json() for h in self.files]
        return out


def answer(
    searcher: Any,
    query: str,
    *,
    k: int | None = None,
    route: str | None = None,
    explain: bool = False,
    group: str = "span",
    spans: int = FILE_SPANS,
) -> Answer:
    """``searcher``'s answer to ``query`` (a ``Searcher``; see the module docstring).

    ``k``: results, or files with ``group="file"`` (default ``search.k``); ``spans``: how
    deep the span list grouped into files is (at least ``k``)."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r} (known: {', '.join(GROUPS)})")
    if group == "span":
        return Answer(searcher.search(query, k=k, route=route, explain=explain))
    want = k or searcher.cfg.search.k
    response = searcher.search(query, k=max(spans, want), route=route, explain=explain)
    files = whole_file_args(searcher, query)
    hits = group_by_file(response.results, want, **files)
    return Answer(
        response,
        group="file",
        files=tuple(hits),
        whole_file_weight=files.get("whole_weight", 0.0) if files.get("whole") else 0.0,
        file_ranker="learned" if files.get("ranker") is not None else "fusion",
    )


__all__ = ["GROUPS", "Answer", "answer"]
