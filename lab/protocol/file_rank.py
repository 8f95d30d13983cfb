"""File-level scoring for the protocol's file tasks (long reports → changed files): the
metrics of one ranked file list against its answer, and ``bm25-file``, the baseline that
ranks whole files by BM25 (no spans, no models)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

BM25_FILE = "bm25-file"
FILE_METRICS = ("acc@1", "acc@5", "acc@10", "mrr@10")


@dataclass(frozen=True)
class FileScores:
    """Acc@k: every answer file is within the first k; MRR@10: 1 / rank of the first."""

    acc_1: float
    acc_5: float
    acc_10: float
    rr_10: float

    def value(self, metric: str) -> float:
        return {
            "acc@1": self.acc_1,
            "acc@5": self.acc_5,
            "acc@10": self.acc_10,
            "mrr@10": self.rr_10,
        }[metric]


def file_scores(ranked: Sequence[str], answer: Sequence[str]) -> FileScores:
    """The metrics of ``ranked`` (paths, best first; repeats count once, at their first
    rank) against the set ``answer``."""
    order = list(dict.fromkeys(ranked))
    want = set(answer)
    rank = {p: i + 1 for i, p in enumerate(order)}

    def acc(k: int) -> float:
        return 1.0 if want and all(rank.get(p, k + 1) <= k for p in want) else 0.0

    first = min((rank[p] for p in want if p in rank), default=0)
    rr = 1.0 / first if 0 < first <= 10 else 0.0
    return FileScores(acc(1), acc(5), acc(10), rr)


def bm25_scores(
    docs: Sequence[Sequence[str]], query: Sequence[str], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """Okapi BM25 of each tokenised document for a tokenised query (idf: the Lucene form
    ln(1 + (N - n + 0.5) / (n + 0.5)), so it is never negative)."""
    n_docs = len(docs)
    if not n_docs:
        return []
    lengths = [len(d) for d in docs]
    avg = sum(lengths) / n_docs or 1.0
    counts = [Counter(d) for d in docs]
    df = Counter(t for c in counts for t in c)
    terms = Counter(query)
    out = []
    for c, length in zip(counts, lengths, strict=True):
        s = 0.0
        for t, qtf in terms.items():
            tf = c.get(t, 0)
            if not tf:
                continue
            idf = math.log(1.0 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))
            s += qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        out.append(s)
    return out


class FileBM25Searcher:
    """``bm25-file``: BM25 over whole files (llmc's code-aware tokens, lower-cased), over
    the files llmc would index under ``root``; each result is a whole file."""

    def __init__(self, root: Path):
        from llmc.config import IndexConfig
        from llmc.index.walk import walk
        from llmc.store.tokens import code_tokens

        self.paths: list[str] = []
        self.lines: list[int] = []
        self.docs: list[list[str]] = []
        for f in walk(root, IndexConfig()).files:
            try:
                text = (root / f.path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            self.paths.append(f.path)
            self.lines.append(max(1, text.count("\n") + 1))
            self.docs.append([t.lower() for t in code_tokens(text)])

    def search(self, query: str, k: int | None = None) -> Any:
        from llmc.store.tokens import code_tokens

        scores = bm25_scores(self.docs, [t.lower() for t in code_tokens(query)])
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], self.paths[i]))
        results = [
            SimpleNamespace(
                path=self.paths[i], start_line=1, end_line=self.lines[i], score=scores[i]
            )
            for i in order[: k or 10]
            if scores[i] > 0
        ]
        return SimpleNamespace(results=results, route=None)

    def close(self) -> None:
        return None


__all__ = [
    "BM25_FILE",
    "FILE_METRICS",
    "FileBM25Searcher",
    "FileScores",
    "bm25_scores",
    "file_scores",
]
