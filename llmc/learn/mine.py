"""Mine (query, positive, hard negatives) from a project, with llmc's own chunker and BM25.

The corpus of a project is every span ``llmc index`` would make of it, with each Python
docstring removed (``strip_docstrings``) so no span holds a mined query word for word.

Queries:

- ``code``: the first sentence of a function's or method's docstring (reST/Markdown
  markup removed); its positive is that span with the docstring removed.
- ``doc-title``: a Markdown/reST section title of two words or more (not a generic one
  like "Usage"); the positive is the section without its title lines.
- ``doc-sentence``: otherwise the section's first sentence; the positive is the section
  without its title and without that sentence.

Hard negatives are the best BM25 hits (llmc's tantivy ``LexicalIndex`` over the stripped
corpus, in a temporary directory; it indexes what the cross-encoder reads: path, symbol of
code spans, stripped text, never a section's title) that are not the positive: not overlapping it, not
another part of it, not a span containing the query text. One random negative from the
same project is added. Tests, changelogs, release notes and licences give no queries (their
spans stay in the corpus as negatives).
"""

from __future__ import annotations

import logging
import os
import random
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from llmc.config import IndexConfig
from llmc.docstrings import (  # re-exported: train and its tests take them from here
    CODE_QUERY,
    DOC_SENTENCE,
    DOC_TITLE,
    _queries_allowed,
    clean_markup,
    code_query,
    doc_query,
    first_sentence,
    section_body,
    strip_docstrings,
    strip_leading_comment,
)
from llmc.index.chunk import chunk_file
from llmc.index.walk import read_text, walk
from llmc.languages import detect_language
from llmc.models.reranker import passage_text
from llmc.types import CODE, DOC, Span, StoredSpan

log = logging.getLogger(__name__)

BM25_DEPTH = 30
HARD_POOL = 8
PYTHON_ONLY = ("python",)  # code queries by default (the reranker's, `llmc` fine-tuning's)
CODE_LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")


@dataclass(frozen=True)
class Passage:
    """A corpus span as the cross-encoder sees it (``passage_text`` of the stripped span)."""

    pid: int
    path: str
    qualname: str
    part: int
    start_line: int
    end_line: int
    category: str
    text: str


@dataclass(frozen=True)
class Example:
    project: str
    kind: str  # CODE_QUERY | DOC_TITLE | DOC_SENTENCE
    query: str
    positive: int  # pid
    hard: tuple[int, ...]  # BM25 negatives, best first
    random: tuple[int, ...]
    bm25: tuple[int, ...]  # the BM25 ranking of the whole corpus for the query (top 30)
    bm25_scores: tuple[float, ...] = ()  # their BM25 scores


@dataclass
class Mined:
    project: str
    passages: list[Passage]
    examples: list[Example]
    files: int
    spans: int


# ---------------------------------------------------------------------------- mining


def chunk_project(root: Path, cfg: IndexConfig | None = None) -> tuple[list[Span], int]:
    """Every span llmc would index in ``root`` (code and docs), and the file count."""
    cfg = cfg or IndexConfig()
    try:
        paths = [f.path for f in walk(root, cfg).files]
    except Exception as e:  # noqa: BLE001 - e.g. a .gitignore line pathspec rejects
        log.warning("%s: llmc's walker failed (%s); listing files without .gitignore", root, e)
        paths = _plain_walk(root, set(cfg.skip_dirs), cfg.max_file_size)
    spans: list[Span] = []
    files = 0
    for path in paths:
        lang, category = detect_language(path)
        if lang is None:
            continue
        ft = read_text(root, path)
        if ft.text is None:
            continue
        files += 1
        spans.extend(chunk_file(path, ft.text, lang, category, cfg))
    return spans, files


def _plain_walk(root: Path, skip_dirs: set[str], max_size: int) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink() and full.stat().st_size <= max_size:
                out.append(full.relative_to(root).as_posix())
    return out


def mine_project(
    name: str,
    root: Path,
    rng: random.Random,
    n_hard: int = 2,
    n_random: int = 1,
    max_chars: int = 2000,
    languages: Collection[str] = PYTHON_ONLY,
) -> Mined:
    """The stripped corpus of ``root`` and its examples (query, positive, negatives); code
    queries from the documented functions of ``languages`` (``CODE_LANGUAGES``: all)."""
    spans, files = chunk_project(root)
    passages, stored, candidates = _passages(spans, max_chars, languages)
    examples = _examples(name, passages, stored, candidates, rng, n_hard, n_random)
    log.info(
        "%s: %d files, %d spans, %d examples (%d code, %d doc)",
        name,
        files,
        len(passages),
        len(examples),
        sum(e.kind == CODE_QUERY for e in examples),
        sum(e.kind != CODE_QUERY for e in examples),
    )
    return Mined(name, passages, examples, files, len(passages))


def _without_docs(span: Span, languages: Collection[str]) -> str:
    """A code span's text without the documentation its query comes from (Python's
    docstrings; the doc comment above a definition in the other ``languages``)."""
    if span.lang == "python":
        return strip_docstrings(span.text)
    return strip_leading_comment(span.text) if span.lang in languages else span.text


def _passages(
    spans: Sequence[Span], max_chars: int, languages: Collection[str] = PYTHON_ONLY
) -> tuple[list[Passage], list[StoredSpan], list[tuple[str, str, int]]]:
    """Each span as the cross-encoder sees it (docstrings stripped, a section without its
    title), as BM25 indexes it, and the queries it gives (a docstring's first sentence for
    code, a title, question or sentence for a doc section): ``(passages, stored,
    candidates)``, each candidate ``(kind, query, passage id)``, a query once."""
    passages: list[Passage] = []
    stored: list[StoredSpan] = []
    candidates: list[tuple[str, str, int]] = []  # (kind, query, pid)
    seen_queries: set[str] = set()
    for span in spans:
        pid = len(passages)
        kind, query = "", ""
        if span.category == DOC:
            body = section_body(span) if span.kind == "section" else span.text
            if span.kind == "section" and _queries_allowed(span.path):
                kind, query, positive = doc_query(span, body)
                text = positive if kind else body
            else:
                text = body
        else:
            text = _without_docs(span, languages)
            if span.lang in languages and _queries_allowed(span.path):
                query = code_query(span)
                kind = CODE_QUERY if query and _substantial(text) else ""
        if not text.strip():
            continue
        passages.append(
            Passage(
                pid,
                span.path,
                span.qualname or span.symbol,
                span.part,
                span.start_line,
                span.end_line,
                span.category,
                passage_text(span.path, text, max_chars),
            )
        )
        # BM25 sees what the cross-encoder sees: no header, no docstring, and for a section
        # no title (it would sit in the boosted symbol field and give doc-title queries away).
        symbol = (span.symbol, span.qualname) if span.category != DOC else ("", "")
        stored.append(
            StoredSpan(
                pid,
                replace(
                    span,
                    text=text,
                    header="",
                    docstring="",
                    symbol=symbol[0],
                    qualname=symbol[1],
                ),
            )
        )
        if kind and query.lower() not in seen_queries:
            seen_queries.add(query.lower())
            candidates.append((kind, query, pid))
    return passages, stored, candidates


def _examples(
    name: str, passages: list[Passage], stored: list[StoredSpan],
    candidates: list[tuple[str, str, int]], rng: random.Random, n_hard: int, n_random: int,
) -> list[Example]:  # fmt: skip
    """Each candidate query with its positive, ``n_hard`` BM25 negatives from the same
    project (the passages a query would find that are not its answer) and ``n_random``
    random ones; a query without one hard negative is dropped."""
    from llmc.store.lexical import LexicalIndex

    examples: list[Example] = []
    with tempfile.TemporaryDirectory(prefix="llmc-train-bm25-") as tmp:
        lexical = LexicalIndex(Path(tmp))
        lexical.rebuild(stored, generation=1)
        for kind, query, pid in candidates:
            found = lexical.search(query, BM25_DEPTH)
            hits = [h.span_id for h in found]
            eligible = [h for h in hits if _is_negative(passages[pid], passages[h], query)]
            pool = eligible[:HARD_POOL]
            hard = tuple(sorted(rng.sample(pool, min(n_hard, len(pool))), key=pool.index))
            randoms: list[int] = []
            for _ in range(n_random * 20):
                if len(randoms) >= n_random:
                    break
                r = rng.randrange(len(passages))
                if (
                    r not in hard
                    and r not in randoms
                    and _is_negative(passages[pid], passages[r], query)
                ):
                    randoms.append(r)
            if len(hard) < min(n_hard, 1):
                continue
            examples.append(
                Example(
                    name,
                    kind,
                    query,
                    pid,
                    hard,
                    tuple(randoms),
                    tuple(hits),
                    tuple(round(h.score, 4) for h in found),
                )
            )
    return examples


def _substantial(code: str) -> bool:
    """More than a signature and a one-liner: at least three non-blank lines."""
    lines = [line for line in code.split("\n") if line.strip() and not line.strip().startswith("#")]
    return len(lines) >= 3


def _is_negative(pos: Passage, other: Passage, query: str) -> bool:
    if other.pid == pos.pid:
        return False
    if other.path == pos.path and (
        other.qualname == pos.qualname
        or (other.start_line <= pos.end_line and pos.start_line <= other.end_line)
    ):
        return False
    return query.lower() not in other.text.lower()


def category_of_example(example: Example) -> str:
    return CODE if example.kind == CODE_QUERY else DOC


__all__ = [
    "CODE_LANGUAGES",
    "CODE_QUERY",
    "DOC_SENTENCE",
    "DOC_TITLE",
    "Example",
    "Mined",
    "Passage",
    "_queries_allowed",
    "chunk_project",
    "clean_markup",
    "code_query",
    "doc_query",
    "first_sentence",
    "mine_project",
    "section_body",
    "strip_docstrings",
]
