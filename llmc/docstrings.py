"""Queries from a project's own text, with no index or model: Python docstrings stripped
from code (``strip_docstrings``), a docstring's or section's first sentence with its
reST/Markdown markup removed, and the filters that keep a query (length, openings) and the
files that may give one (not tests, changelogs, licences).

Shared by training (``llmc/learn/mine.py`` mines queries with them) and evaluation (the
protocol's docstring task and stripped corpus, ``lab/protocol/``), so neither has to
import the other for them.
"""

from __future__ import annotations

import ast
import re

from llmc.types import Span

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
_DOC_TAG = re.compile(r"(?m)^\s*@\w")  # JSDoc / Javadoc: the description ends at a tag
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
    """A documented function's query: its docstring's first sentence (outside Python, the
    doc comment's: the description before the first ``@tag`` of JSDoc or Javadoc, without
    Go's leading name, "ParseHeader splits ..." giving the answer away)."""
    if span.kind not in ("function", "method") or span.part != 0 or not span.docstring:
        return ""
    if span.lang == "python":
        q = first_sentence(span.docstring)
    else:
        q = first_sentence(_DOC_TAG.split(span.docstring, maxsplit=1)[0])
        first, _, rest = q.partition(" ")
        if span.symbol and first == span.symbol:
            q = rest
    return q if _good_query(q, MIN_CODE_WORDS) else ""


def strip_leading_comment(text: str) -> str:
    """A definition without the comment block above it: the chunker keeps a C-family
    definition's doc comment in its span (JSDoc, Javadoc, Go's and Rust's line comments)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("//"):
            i += 1
        elif line.startswith("/*"):
            while i < len(lines) and "*/" not in lines[i]:
                i += 1
            i += 1
        else:
            break
    return "\n".join(lines[i:])


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


def _queries_allowed(path: str) -> bool:
    return not (_NO_QUERY_PARTS.search(path) or _TEST_FILE.search(path))


__all__ = [
    "CODE_QUERY",
    "DOC_SENTENCE",
    "DOC_TITLE",
    "MIN_CODE_WORDS",
    "clean_markup",
    "code_query",
    "doc_query",
    "first_sentence",
    "section_body",
    "strip_docstrings",
    "strip_leading_comment",
]
