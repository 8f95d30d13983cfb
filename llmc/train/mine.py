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

import ast
import logging
import os
import random
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from llmc.config import IndexConfig
from llmc.index.chunk import chunk_file
from llmc.index.walk import read_text, walk
from llmc.languages import detect_language
from llmc.models.reranker import passage_text
from llmc.types import CODE, DOC, Span, StoredSpan

log = logging.getLogger(__name__)

CODE_QUERY = "code"
DOC_TITLE = "doc-title"
DOC_SENTENCE = "doc-sentence"

_DOCSTRING = re.compile(r"(?m)^[ \t]*[rRuU]?(\"\"\"|''')[\s\S]*?\1[ \t]*(?:\n|$)")
_ROLE = re.compile(r"(?::[\w:.+-]+:|\{[\w:.+-]+\})`~?([^`<]*?)\s*(?:<[^>]*>)?`")
_MARKUP = [
    (re.compile(r"``([^`]+)``"), r"\1"),
    (re.compile(r"`([^`]+)`_{0,2}"), r"\1"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),
    (re.compile(r"(?<!\w)\*([^*\s][^*]*)\*"), r"\1"),
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),
    (re.compile(r"\|([\w-]+)\|"), r"\1"),
]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`*\"'])|(?<=[.!?])$")
_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+_:.<>])\1{2,}\s*$")
_NO_QUERY_PARTS = re.compile(
    r"(?i)(^|/)(tests?|testing|changelog|changes|history|news|releases?|announce|whatsnew|"
    r"authors|license|licence|copying|contributors|code[-_]of[-_]conduct)([-_./]|$)"
)
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test\.py|conftest\.py)$")
_GENERIC_TITLES = frozenset(
    """
    usage installation install introduction overview examples example api reference
    changelog changes license contributing contents index summary notes parameters
    returns raises attributes methods functions classes modules see also todo faq
    quickstart tutorial getting started indices and tables table of contents
    """.split()
)
_BAD_STARTS = (">>>", "..", ":", "deprecated", "todo", "alias", "see ", "same as", "like ")
MIN_CODE_WORDS = 3
MIN_TITLE_WORDS = 2
MIN_SENTENCE_WORDS = 6
MAX_QUERY_WORDS = 40
MIN_BODY_WORDS = 15
BM25_DEPTH = 30
HARD_POOL = 8


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


# ---------------------------------------------------------------------------- text


def strip_docstrings(text: str) -> str:
    """``text`` without the docstring of any def or class it contains, found by ``ast`` (any
    quoting, any prefix): the docstring's lines are removed when it has them to itself,
    else the literal becomes ``pass``; other string literals stay. An indented span (a
    method) is parsed inside a block; text ``ast`` cannot parse falls back to a regex."""
    parsed = _parse_block(text)
    if parsed is None:
        return _strip_docstrings_regex(text)
    tree, shift = parsed
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()  # 0-based line numbers
    edits: dict[int, list[tuple[int, int]]] = {}  # line -> [(start col, end col)], one-line
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = node.body[0] if node.body else None
        if not (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
            and first.end_lineno is not None
            and first.end_col_offset is not None
        ):
            continue
        start, end = first.lineno - 1 - shift, first.end_lineno - 1 - shift
        head = _col(lines[start], first.col_offset)
        tail = _col(lines[end], first.end_col_offset)
        own_lines = not lines[start][:head].strip() and lines[end][tail:].strip() in ("", ";")
        if own_lines and len(node.body) > 1:
            drop.update(range(start, end + 1))
        elif start == end:
            edits.setdefault(start, []).append((head, tail))
        else:  # the docstring is the whole body, on its own lines: keep a statement
            indent = lines[start][:head]
            drop.update(range(start + 1, end + 1))
            lines[start] = f"{indent}pass\n" if own_lines else lines[start][:head] + "pass\n"
    for row, spans in edits.items():
        line = lines[row]
        for head, tail in sorted(spans, reverse=True):
            line = line[:head] + "pass" + line[tail:]
        lines[row] = line
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def _col(line: str, byte_offset: int) -> int:
    """The character index of ``ast``'s UTF-8 byte offset in ``line``."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))


def _parse_block(text: str) -> tuple[ast.Module, int] | None:
    """``text`` parsed, with the number of lines put before it: an indented span (a method
    cut out of its class) parses as the body of an ``if``. None when it does not parse."""
    for prefix in ("", "if 1:\n"):
        try:
            return ast.parse(prefix + text), prefix.count("\n")
        except (SyntaxError, ValueError):
            continue
    return None


def _strip_docstrings_regex(text: str) -> str:
    """The fallback for text ``ast`` cannot parse: a triple-quoted string on its own
    lines whose preceding code ends with ``:`` (the signature); other literals stay."""
    out: list[str] = []
    pos = 0
    for m in _DOCSTRING.finditer(text):
        before = text[: m.start()].rstrip()
        if before.endswith(":") and re.search(r"\b(def|class)\b", before[-2000:]):
            out.append(text[pos : m.start()])
            pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def clean_markup(text: str) -> str:
    """Plain words from reST/Markdown: roles, literals, emphasis, links removed."""
    text = _ROLE.sub(
        lambda m: m.group(1).rsplit(".", 1)[-1] if "." in m.group(1) else m.group(1), text
    )
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return re.sub(r"\s+", " ", text).strip()


def first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, markup removed, without the final stop."""
    para = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    para = clean_markup(para)
    sentence = _SENTENCE_END.split(para, maxsplit=1)[0].strip()
    return sentence.rstrip(".:;").strip()


def _words(text: str) -> int:
    return len(re.findall(r"[A-Za-z][\w'-]*", text))


def _prose_words(text: str) -> int:
    """Words outside directive, option and fence lines (autodoc stubs have few)."""
    lines = [ln for ln in text.split("\n") if not ln.lstrip().startswith(("..", ":", "```", ">>>"))]
    return _words("\n".join(lines))


def _good_query(q: str, min_words: int) -> bool:
    low = q.lower()
    return (
        min_words <= _words(q) <= MAX_QUERY_WORDS
        and len(q) <= 300
        and not low.startswith(_BAD_STARTS)
        and bool(re.match(r"[A-Za-z`\"'(]", q))
    )


def code_query(span: Span) -> str:
    if span.kind not in ("function", "method") or span.part != 0 or not span.docstring:
        return ""
    q = first_sentence(span.docstring)
    return q if _good_query(q, MIN_CODE_WORDS) else ""


def section_body(span: Span) -> str:
    """A section's text without its title line(s) (and reST over/underlines)."""
    lines = span.text.split("\n")
    title = span.symbol.strip()
    i = 0
    while i < min(len(lines), 4):
        line = lines[i].strip()
        bare = line.lstrip("#").strip().rstrip("#").strip()
        if _UNDERLINE.match(line) or (bare and title and clean_markup(bare) == clean_markup(title)):
            i += 1
            continue
        if not line:
            i += 1
            continue
        break
    return "\n".join(lines[i:]).strip()


def doc_query(span: Span, body: str) -> tuple[str, str, str]:
    """(kind, query, positive text) for a section, or ("", "", "") when it gives none."""
    if span.kind != "section" or span.part != 0 or _prose_words(body) < MIN_BODY_WORDS:
        return "", "", ""
    title = clean_markup(span.symbol)
    if (
        title
        and title.lower() not in _GENERIC_TITLES
        and not re.search(r"\.(md|rst|txt)$", title, re.I)
        and _good_query(title, MIN_TITLE_WORDS)
        and not re.match(r"^v?\d", title)
    ):
        return DOC_TITLE, title, body
    para = re.split(r"\n\s*\n", body, maxsplit=1)[0]
    if para.lstrip().startswith((".. ", "```", "    ", "\t", "|", "- ", "* ", ">>>")):
        return "", "", ""
    sentence = first_sentence(para)
    if not _good_query(sentence, MIN_SENTENCE_WORDS):
        return "", "", ""
    rest = _drop_sentence(body, para)
    if _words(rest) < MIN_BODY_WORDS // 2:
        return "", "", ""
    return DOC_SENTENCE, sentence, rest


def _drop_sentence(body: str, para: str) -> str:
    """``body`` without its first paragraph's first sentence."""
    flat = re.sub(r"\s+", " ", para.strip())
    parts = _SENTENCE_END.split(flat, maxsplit=1)
    rest_para = parts[1].strip() if len(parts) > 1 else ""
    return (rest_para + "\n\n" + body[len(para) :].strip()).strip() if para else body


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


def _queries_allowed(path: str) -> bool:
    return not (_NO_QUERY_PARTS.search(path) or _TEST_FILE.search(path))


def mine_project(
    name: str,
    root: Path,
    rng: random.Random,
    n_hard: int = 2,
    n_random: int = 1,
    max_chars: int = 2000,
) -> Mined:
    """The stripped corpus of ``root`` and its examples (query, positive, negatives)."""
    from llmc.store.lexical import LexicalIndex

    spans, files = chunk_project(root)
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
            text = strip_docstrings(span.text) if span.lang == "python" else span.text
            if span.lang == "python" and _queries_allowed(span.path):
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
    "CODE_QUERY",
    "DOC_SENTENCE",
    "DOC_TITLE",
    "Example",
    "Mined",
    "Passage",
    "chunk_project",
    "clean_markup",
    "first_sentence",
    "mine_project",
    "strip_docstrings",
]
