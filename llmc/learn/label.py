"""What to label and how an answer becomes a label; the terminal I/O is the CLI's.

``LabelSession`` runs the searches, skips what this labeler already graded, and appends
each answer to ``.llmc/judgments.jsonl`` at once (quitting half-way loses nothing).
``parse_answer`` reads what was typed at the prompt: ``0``-``3`` grades, a trailing
``c``/``d`` retags the result as code or doc (``2d``), ``s`` (or nothing) skips, ``q``
quits, ``?`` shows the rubric.

Active learning (``suggest``): for each candidate query (the query log, labeled queries,
or given ones) the search runs with its trace, and two disagreements are measured.
Between the stages: 1 - the Jaccard overlap of the BM25 and dense top 10, plus the
router's doubt (1 - its confidence) at half weight. Per result: how differently BM25 and
dense rank it, ``|1/rank_bm25 - 1/rank_dense|`` (a list that missed it counts 0), so a
result one retriever puts first and the other misses scores 1. The queries with the most
disagreement come first, each with its unlabeled results of most disagreement: labels
where the stages disagree move fused rankings and tuned weights the most.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc.errors import LearnError
from llmc.learn.judgments import (
    RUBRIC,
    Label,
    append_labels,
    judgments_path,
    labeled_items,
    load_labels,
    query_key,
    tag_of,
)
from llmc.learn.querylog import logged_queries
from llmc.learn.sets import judged_queries

TOP = 10
TAG_LETTERS = {"c": "code", "d": "doc"}
# Kinds whose qualified name names one definition or section: kept with the label so eval
# finds it after the code moves. A block or window name (the module) would mean the file.
NAMED_KINDS = frozenset({"function", "method", "class", "section"})


@dataclass(frozen=True)
class Item:
    """One search result offered for labeling."""

    query: str
    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    tag: str
    snippet: str
    rank: int
    score: float
    sources: tuple[str, ...] = ()
    disagreement: float = 0.0
    qualname: str = ""

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (query_key(self.query), self.path, self.start_line, self.end_line)


@dataclass(frozen=True)
class Answer:
    action: str  # grade | skip | quit | help
    grade: int | None = None
    tag: str | None = None


def parse_answer(text: str) -> Answer:
    """What was typed at the grade prompt (see the module docstring); ValueError if unclear."""
    t = text.strip().lower()
    if t in ("", "s", "skip"):
        return Answer("skip")
    if t in ("q", "quit", "exit"):
        return Answer("quit")
    if t in ("?", "h", "help"):
        return Answer("help")
    tag = None
    if len(t) >= 2 and t[-1] in TAG_LETTERS:
        tag, t = TAG_LETTERS[t[-1]], t[:-1].strip()
    if t in ("0", "1", "2", "3"):
        return Answer("grade", int(t), tag)
    raise ValueError(f"{text.strip()!r}: type 0-3 (optionally with c or d), s, q or ?")


def rubric_lines() -> list[str]:
    lines = [f"{g} = {RUBRIC[g]}" for g in (3, 2, 1, 0)]
    lines.append("add c or d to tag the result code or doc (2d); s skips, q quits")
    return lines


def _items(response: Any, k: int) -> list[Item]:
    out = []
    for rank, r in enumerate(response.results[:k], start=1):
        out.append(
            Item(
                query=response.query,
                path=r.path,
                start_line=int(r.start_line),
                end_line=int(r.end_line),
                symbol=r.symbol,
                kind=r.kind,
                tag=tag_of(r.path, getattr(r, "category", "")),
                snippet=r.snippet,
                rank=rank,
                score=float(r.score),
                sources=tuple(r.sources),
                qualname=getattr(r, "qualname", "") or "",
            )
        )
    return out


# -- active learning ----------------------------------------------------------------------
def _retriever(list_name: str) -> str:
    return list_name.split(".", 1)[0]


def _best_ranks(ranks: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, rank in ranks.items():
        r = _retriever(name)
        out[r] = min(rank, out.get(r, rank))
    return out


def query_disagreement(response: Any) -> tuple[float, tuple[str, ...]]:
    """How much BM25 and dense disagree on the query, plus the router's doubt; in [0, 1]."""
    ex = response.explain
    tops: dict[str, set[int]] = {}
    if ex is not None:
        for name, hits in ex.lists.items():
            tops.setdefault(_retriever(name), set()).update(h.span_id for h in hits[:TOP])
    reasons = []
    lists_part = 0.0
    if tops.get("bm25") and tops.get("dense"):
        a, b = tops["bm25"], tops["dense"]
        overlap = len(a & b) / len(a | b)
        lists_part = 1.0 - overlap
        reasons.append(f"BM25 and dense top {TOP} overlap {overlap:.0%}")
    doubt = 1.0 - float(getattr(response.route, "confidence", 1.0))
    if doubt > 0.5:
        reasons.append(f"the router is unsure ({response.route.intent}, doubt {doubt:.2f})")
    return (lists_part + 0.5 * doubt) / 1.5, tuple(reasons)


def item_disagreement(ranks: dict[str, int]) -> float:
    """``|1/rank_bm25 - 1/rank_dense|`` of one fused result (a missing rank counts 0)."""
    best = _best_ranks(ranks)
    rb, rd = best.get("bm25"), best.get("dense")
    return abs((1.0 / rb if rb else 0.0) - (1.0 / rd if rd else 0.0))


@dataclass(frozen=True)
class Suggestion:
    query: str
    disagreement: float
    reasons: tuple[str, ...]
    items: tuple[Item, ...]


def suggest(
    searcher: Any,
    queries: Iterable[str],
    skip: set[tuple],
    n_queries: int = 5,
    per_query: int = 3,
    k: int = 10,
) -> list[Suggestion]:
    """The ``n_queries`` queries whose stages disagree most, each with its ``per_query``
    unlabeled results of most disagreement (best fused rank first among equals)."""
    out = []
    for q in dict.fromkeys(" ".join(q.split()) for q in queries if q.strip()):
        response = searcher.search(q, k=k, explain=True)
        if not response.results:
            continue
        score, reasons = query_disagreement(response)
        ranks = response.explain.ranks if response.explain is not None else ()
        items = []
        for item, r in zip(_items(response, k), ranks or [{}] * k, strict=False):
            if item.key in skip:
                continue
            d = item_disagreement(dict(r))
            items.append(Item(**{**item.__dict__, "disagreement": d}))
        if not items:
            continue
        items.sort(key=lambda i: (-i.disagreement, i.rank))
        out.append(Suggestion(q, score, reasons, tuple(items[:per_query])))
    out.sort(key=lambda s: -s.disagreement)
    return out[:n_queries]


@dataclass(frozen=True)
class Round:
    """One query to label: its unlabeled results and, for a suggestion, why it was chosen."""

    query: str
    items: tuple[Item, ...]
    reasons: tuple[str, ...] = ()


# -- a labeling session -------------------------------------------------------------------
class LabelSession:
    """Searches for one labeler and stores their answers (see the module docstring)."""

    def __init__(self, root: Path, cfg: Any, labeler: str, source: str = "label"):
        self.root = Path(root)
        self.cfg = cfg
        self.labeler = labeler
        self.source = source
        labels, self.problems = load_labels(judgments_path(self.root))
        self.done = labeled_items(labels, labeler)
        self.labeled = 0
        self.skipped = 0
        self._searcher: Any = None

    @property
    def searcher(self) -> Any:
        if self._searcher is None:
            from llmc.search import Searcher

            self._searcher = Searcher(self.root, self.cfg)
        return self._searcher

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    def __enter__(self) -> LabelSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def items(self, query: str, k: int) -> list[Item]:
        """The top ``k`` results of ``query`` this labeler has not graded yet."""
        response = self.searcher.answer(query, k=k).response  # what `llmc search` shows
        return [i for i in _items(response, k) if i.key not in self.done]

    def suggestions(
        self, queries: Sequence[str], n_queries: int, per_query: int
    ) -> list[Suggestion]:
        return suggest(self.searcher, queries, self.done, n_queries, per_query)

    def rounds(
        self,
        k: int,
        query: str | None = None,
        suggest: int | None = None,
        from_log: int | None = None,
    ) -> Iterator[Round]:
        """What to label, one query at a time: ``query``'s top ``k``; the ``suggest`` queries
        of the log and the labels where the stages disagree most; or the ``from_log`` latest
        logged queries that still have unlabeled results."""
        if suggest:
            pool = logged_queries(self.root, 200) + [q.query for q in judged_queries(self.root)]
            if not pool:
                raise LearnError("no logged or labeled queries to choose from yet")
            for s in self.suggestions(pool, suggest, k):
                yield Round(s.query, s.items, s.reasons)
            return
        asked = [query] if query else logged_queries(self.root, 10 * (from_log or 1))
        shown = 0
        for q in asked:
            items = self.items(q, k)
            if not items:
                continue
            if from_log and shown >= from_log:
                return
            shown += 1
            yield Round(q, tuple(items))

    def record(self, item: Item, answer: Answer) -> Label | None:
        """Store a grade (appended at once); count a skip. Quit and help store nothing."""
        if answer.action == "skip":
            self.skipped += 1
            return None
        if answer.action != "grade" or answer.grade is None:
            return None
        label = Label(
            query=item.query,
            path=item.path,
            start_line=item.start_line,
            end_line=item.end_line,
            grade=answer.grade,
            tag=answer.tag or item.tag,
            labeler=self.labeler,
            source=self.source,
            symbol=(item.qualname or item.symbol) if item.kind in NAMED_KINDS else "",
            ts=time.time(),
        )
        append_labels(self.root, [label])
        self.done.add(item.key)
        self.labeled += 1
        return label


__all__ = [
    "Answer",
    "Item",
    "LabelSession",
    "Round",
    "Suggestion",
    "item_disagreement",
    "parse_answer",
    "query_disagreement",
    "rubric_lines",
    "suggest",
]
