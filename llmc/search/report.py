"""Long queries as first-class input: a bug report split into the parts each retriever suits.

A short query (at most ``LONG_WORDS`` words, within ``search.max_query_chars``; on several
lines, at most ``LINES_WORDS`` words and no traceback frame) goes to every stage as it is,
exactly as before. A longer one (an issue report, a pasted traceback) is read into parts (``read_query``); past ``search.max_query_chars`` the parts
come from the first that many characters (a warning says so) while the exact stage reads
all of it (a traceback often ends a report):

- **title**: its first line (its first sentence when that line is long); **prose**: the sentences; **code**: fenced or indented
  blocks; **traceback**: frame and exception lines; **identifiers**: code-shaped names;
- each retriever gets the part it suits: BM25 the title, identifiers and prose words
  (de-duplicated, at most ``LEXICAL_TERMS``), dense the title and the first prose
  paragraph within the embedder's window (``DENSE_CHARS``), the exact stage the whole
  text (paths, frames, names), the router and the ranker's query features a *focus*
  of at most ``FOCUS_WORDS`` words (title, then identifiers), so the features
  a model trained on short questions sees stay in its range.

Pure functions; the ``--explain`` trace shows the split (``describe``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmc.search.evidence import path_suffixes
from llmc.search.query import STOPWORDS, clean_query, collapse, parse

LONG_WORDS = 40  # more words than this make a report
LINES_WORDS = 12  # ... or more than this on several lines
LEXICAL_TERMS = 128
DENSE_CHARS = 1000  # ~256 word pieces: MiniLM's window
FOCUS_WORDS = 32
FOCUS_IDENTIFIERS = 12
FOCUS_MIN = 4
TITLE_WORDS = 25  # a longer first line gives its first sentence as the title
HARD_LIMIT = 200_000  # characters read of any query (memory stays bounded)

_FENCE = re.compile(r"^\s*(```|~~~)")
_TRACE_LINE = re.compile(
    r'^\s*(?:File "|at \S|Traceback \(most recent call last\)|During handling of|'
    r"The above exception|[\w.]*(?:Error|Exception|Warning)\b[\w.]*(?::|\s*$)|\^+\s*$)"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")
_NOT_NAMES = frozenset({"Traceback", "File"})
_WORDS = re.compile(r"[A-Za-z_][\w]*")


@dataclass(frozen=True)
class QueryParts:
    """One query as each stage reads it. For a short query every field is ``text``."""

    text: str  # the whole query, whitespace collapsed (what the response echoes)
    long: bool = False
    title: str = ""
    prose: str = ""
    code: tuple[str, ...] = ()
    traceback: tuple[str, ...] = ()
    names: tuple[str, ...] = ()  # code-shaped identifiers, strongest evidence first
    lexical: str = ""  # BM25's text
    dense: str = ""  # the embedders' (and the cross-encoder's) text
    focus: str = ""  # the router's and the ranker's query features' text
    warnings: tuple[str, ...] = ()

    def describe(self) -> str:
        """One trace line saying what each retriever got."""
        if not self.long:
            return "short query: every stage reads it whole"
        return (
            f"read as a report ({len(self.text):,} chars, {len(self.text.split())} words): "
            f"title {len(self.title.split())} words, prose {len(self.prose.split())} words, "
            f"{len(self.code)} code line(s), {len(self.traceback)} traceback line(s), "
            f"{len(self.names)} identifier(s); BM25 gets {len(self.lexical.split())} terms "
            f"(title, identifiers, prose), dense {len(self.dense)} chars (title + first "
            f"paragraph), exact the whole text, ranker features a {len(self.focus.split())}"
            "-word focus (title + identifiers)"
        )


def is_long(text: str, lines: int, max_chars: int) -> bool:
    """Whether a query is read as a report: more than ``LONG_WORDS`` words, longer than
    ``max_chars``, or several lines holding more than ``LINES_WORDS`` words or a
    traceback frame (a pasted stack)."""
    words = len(text.split())
    if words > LONG_WORDS or 0 < max_chars < len(text):
        return True
    return lines > 1 and (words > LINES_WORDS or bool(parse(text).frames))


def read_query(raw: object, max_chars: int = 2000) -> QueryParts:
    """``raw`` cleaned (``query.clean_query``) and, when long, split into its parts."""
    multi, warnings = clean_query(raw, HARD_LIMIT)
    lines = [ln.rstrip() for ln in multi.split("\n")]
    nonblank = [ln for ln in lines if ln.strip()]
    text = collapse(multi)
    if not is_long(text, len(nonblank), max_chars):
        return QueryParts(text, False, text, text, (), (), (), text, text, text, warnings)
    if 0 < max_chars < len(multi):  # the retrievers read the first max_chars; exact all
        lines = multi[:max_chars].rstrip().split("\n")
        warnings = (
            *warnings,
            f"query cut to its first {max_chars} characters for BM25, dense and the ranker "
            f"(search.max_query_chars); its paths, frames and names were read from all "
            f"{len(text):,}",
        )
    return split_report(lines, text, warnings)


def split_report(lines: list[str], text: str, warnings: tuple[str, ...] = ()) -> QueryParts:
    """The parts of a report given as ``lines`` (``text``: the whole query, collapsed;
    ``lines`` may be its first ``search.max_query_chars`` only)."""
    read = collapse("\n".join(lines))
    code: list[str] = []
    trace: list[str] = []
    prose_paras: list[list[str]] = [[]]
    title = ""
    fenced = False
    for ln in lines:
        if _FENCE.match(ln):
            fenced = not fenced
            continue
        stripped = ln.strip()
        if not stripped:
            if prose_paras[-1]:
                prose_paras.append([])
            continue
        if fenced:
            (trace if _TRACE_LINE.match(ln) else code).append(stripped)
        elif _TRACE_LINE.match(ln):
            trace.append(stripped)
        elif ln.startswith(("    ", "\t", ">>> ", "$ ")):
            code.append(stripped)
        elif not title:
            title, _, more = _first_sentence(stripped)
            if more:
                prose_paras[-1].append(more)
        else:
            prose_paras[-1].append(stripped)
    if not title:  # all code: the first line names it
        title = _cut((trace or code or [read])[0], DENSE_CHARS)
    paras = [" ".join(p) for p in prose_paras if p]
    prose = " ".join(paras)
    names = tuple(
        dict.fromkeys(
            i.name
            for i in parse(read).all_identifiers
            if i.code_shaped and i.name not in _NOT_NAMES
        )
    )
    frame_words = [
        f"{path_suffixes(f.path, 3)[0] if f.path else ''} {f.function}" for f in parse(text).frames
    ]
    focus = _focus(title, names, paras[0] if paras else "")
    dense = title if not paras else f"{title}. {paras[0]}"
    return QueryParts(
        text=text,
        long=True,
        title=title,
        prose=prose,
        code=tuple(code),
        traceback=tuple(trace),
        names=names,
        lexical=_lexical(title, names, prose, code + frame_words),
        dense=_cut(dense, DENSE_CHARS),
        focus=focus or _cut(read, DENSE_CHARS),
        warnings=warnings,
    )


def _first_sentence(line: str) -> tuple[str, str, str]:
    """A first line of more than ``TITLE_WORDS`` words (a report pasted on one line) is
    cut after its first sentence when that is shorter: ``(title, "", the rest)``."""
    if len(line.split()) <= TITLE_WORDS:
        return line, "", ""
    m = _SENTENCE_END.search(line)
    if m is None or len(line[: m.start()].split()) > TITLE_WORDS:
        return line, "", ""
    return line[: m.start()], "", line[m.end() :]


def _focus(title: str, names: tuple[str, ...], first: str) -> str:
    """The router's and the ranker's text: the title and the first identifiers, at most
    ``FOCUS_WORDS`` words (a short question's length); a title of fewer than
    ``FOCUS_MIN`` words with no identifier gets the first paragraph's words too. (The
    first paragraph always added was worse on validation: generic prose pulls the
    router off code.)"""
    words = title.split()[:FOCUS_WORDS]
    words += [n for n in names[:FOCUS_IDENTIFIERS] if n not in words]
    if len(words) < FOCUS_MIN:
        words += first.split()
    return " ".join(words[:FOCUS_WORDS])


def _lexical(title: str, names: tuple[str, ...], prose: str, code: list[str]) -> str:
    """BM25's terms: title words, identifiers, prose words, then code words and
    the frames' paths and functions,
    each once,
    stopwords dropped, at most ``LEXICAL_TERMS``."""
    out: dict[str, None] = {}
    for chunk in (title, " ".join(names), prose, " ".join(code)):
        for word in _WORDS.findall(chunk):
            if word.lower() not in STOPWORDS and len(word) > 1:
                out.setdefault(word, None)
                if len(out) >= LEXICAL_TERMS:
                    return " ".join(out)
    return " ".join(out)


def _cut(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    cut = text[:chars]
    return cut[: cut.rfind(" ")] if " " in cut else cut


__all__ = [
    "DENSE_CHARS",
    "FOCUS_WORDS",
    "HARD_LIMIT",
    "LEXICAL_TERMS",
    "LINES_WORDS",
    "LONG_WORDS",
    "QueryParts",
    "is_long",
    "read_query",
    "split_report",
]
