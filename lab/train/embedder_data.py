"""Training and selection data for the code-tuned embedder (``python -m lab train embedder``).

Training pairs come from the train projects only (``lab.train.projects``), mined with the
reranker's miner (``llmc.learn.mine``): a docstring's first sentence → its function with the
docstring removed, a section title or first sentence → the rest of the section, each with
BM25 hard negatives from the same project. Unlike the reranker, the embedder reads what
``llmc index`` embeds: the span's context header, a newline, then its text
(``Span.embed_text``), so the pairs carry that format.

Selection data comes from the *validation* projects of the evaluation protocol (the
docstring task's queries and its stripped corpus, chunked as llmc indexes it): the trainer
ranks every span of a project for every query with each candidate model and keeps the one
with the best MRR@10. Test projects are never read here.

Both are plain JSONL so a training run can happen on another machine (an accelerator with
sentence-transformers but none of llmc's index dependencies).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from llmc.learn.mine import CODE_QUERY, Mined, chunk_project, mine_project
from llmc.types import CODE, Span

log = logging.getLogger(__name__)

MAX_PASSAGE_CHARS = 1500  # ~256 word pieces, the embedder's max_seq_length at index time


@dataclass(frozen=True)
class Pair:
    """One MultipleNegativesRankingLoss example: the query, its passage, one hard negative."""

    project: str
    kind: str
    query: str
    positive: str
    negative: str


@dataclass(frozen=True)
class SelectionSpan:
    span_id: int
    path: str
    qualname: str
    text: str  # header + newline + text, as indexed


@dataclass(frozen=True)
class SelectionQuery:
    query: str
    path: str
    qualname: str


def _headers(root: Path) -> dict[tuple[str, int, int, int], str]:
    spans, _ = chunk_project(root)
    return {(s.path, s.start_line, s.end_line, s.part): training_header(s) for s in spans}


def training_header(span: Span) -> str:
    """The span's index header without what would give its mined query away: a code
    span's docstring lines (the query is the docstring's first sentence) and a section's
    title path (a doc-title query *is* the title). The stripped corpus the protocol indexes
    has no docstrings either, so its headers look the same."""
    lines = span.header.split("\n")
    if span.category != CODE:
        return lines[0]
    doc = [d.strip() for d in span.docstring.splitlines() if d.strip()]
    kept = [lines[0]] + [
        line
        for line in lines[1:]
        if not (line.strip() and any(d.startswith(line.strip()) for d in doc))
    ]
    return "\n".join(kept)


def _embed_text(header: str, passage_text: str, path: str) -> str:
    """``passage_text`` (path, newline, text) rewritten as the index embeds it."""
    text = (
        passage_text[len(path) + 1 :]
        if path and passage_text.startswith(path + "\n")
        else passage_text
    )
    full = f"{header}\n{text}" if header else text
    return full[:MAX_PASSAGE_CHARS]


def pairs_of(
    mined: Mined, headers: dict[tuple[str, int, int, int], str], rng: random.Random
) -> list[Pair]:
    """One pair per mined example; its negative is the best BM25 hard negative, else random."""
    by_pid = {p.pid: p for p in mined.passages}

    def text_of(pid: int) -> str:
        p = by_pid[pid]
        return _embed_text(
            headers.get((p.path, p.start_line, p.end_line, p.part), ""), p.text, p.path
        )

    out: list[Pair] = []
    for ex in mined.examples:
        negatives = list(ex.hard) or list(ex.random)
        if not negatives:
            continue
        neg = negatives[0] if rng.random() < 0.7 else rng.choice(negatives)
        out.append(Pair(mined.project, ex.kind, ex.query, text_of(ex.positive), text_of(neg)))
    return out


def mine_pairs(projects: Iterable[tuple[str, Path]], seed: int = 42) -> list[Pair]:
    """Pairs from every (name, unpacked root); deterministic for a seed."""
    pairs: list[Pair] = []
    for name, root in projects:
        rng = random.Random(f"{seed}:{name}")
        mined = mine_project(name, root, rng, n_hard=3, n_random=1)
        got = pairs_of(mined, _headers(root), rng)
        log.info("%s: %d pairs (%d code)", name, len(got), sum(p.kind == CODE_QUERY for p in got))
        pairs.extend(got)
    return pairs


def selection_set(
    root: Path, queries_file: Path
) -> tuple[list[SelectionSpan], list[SelectionQuery]]:
    """A validation project's stripped corpus as indexed, and its docstring queries."""
    spans, _ = chunk_project(root)
    corpus = [
        SelectionSpan(i, s.path, s.qualname or s.symbol, s.embed_text[:MAX_PASSAGE_CHARS])
        for i, s in enumerate(spans)
    ]
    queries = []
    for line in queries_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        rel = q["relevant"][0]
        queries.append(SelectionQuery(q["query"], rel["path"], rel.get("symbol", "")))
    return corpus, queries


def write_jsonl(path: Path, rows: Sequence[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")  # type: ignore[call-overload]
    tmp.replace(path)


__all__ = [
    "Pair",
    "SelectionQuery",
    "SelectionSpan",
    "mine_pairs",
    "pairs_of",
    "selection_set",
    "write_jsonl",
]
