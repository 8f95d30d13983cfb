"""Docs-intent training queries for the learned ranker, mined from a project's own docs.

The docstring task teaches "a sentence about behaviour → the function", and section titles
teach "a heading → its section"; neither looks like a user asking the documentation
something, so a ranker trained on them learns that prose is rarely the answer. Issue 13
asks for "heading → section, README/docs mentions → code". From the indexed sections of a
project's Markdown/reST files (``_queries_allowed``: no tests, changelogs, licences; prose
body of ``MIN_BODY_WORDS`` or more) this mines, each section used by one query at most:

- ``doc-title``: the section's title → the section (``llmc.docstrings.doc_query``'s rule;
  the title stays in the corpus, as a user may quote a heading);
- ``doc-question``: the title asked as a question, one seeded template of
  ``QUESTION_TEMPLATES`` (``"how does {project} handle {title}"``, ``"{title}?"``, ...);
  one-word titles count here, and a few generic ones get their own phrasing
  (``GENERIC_QUESTIONS``: "Installation" → "how do I install {project}"). The title stays;
- ``doc-sentence``: the section's leading sentence (markup removed) → the section, with
  that sentence cut out of the corpus file (``Cut``), as the protocol strips docstrings: the
  query is a paraphrase of the section's topic that no span holds word for word;
- ``doc-mention``: a prose sentence of the section that names a code identifier (an inline
  literal or role naming a function, method or class the project defines, one or two
  definitions at most) → that definition and the section, the sentence cut out too: "where
  is X implemented" and "how do I X" in one, as mixed-intent questions ask.

A cut blanks the sentence's words on the lines it spans and keeps every line, so line
numbers (and every other span and judgment) stay as they were. The choice is seeded by the
seed and the project's name; ``mine`` is pure (spans in, ``DocQuery`` out) and
``apply_cuts`` edits files, so both are testable without an index.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmc.docstrings import (
    _GENERIC_TITLES,
    _SENTENCE_END,
    _UNDERLINE,
    DOC_SENTENCE,
    DOC_TITLE,
    MAX_QUERY_WORDS,
    MIN_BODY_WORDS,
    _prose_words,
    _queries_allowed,
    clean_markup,
    doc_query,
    section_body,
)
from llmc.types import CODE, DOC, Span

DOCS_VERSION = 1
DOC_QUESTION = "doc-question"
DOC_MENTION = "doc-mention"
DOC_KINDS = (DOC_TITLE, DOC_QUESTION, DOC_SENTENCE, DOC_MENTION)
_SCARCE = (DOC_MENTION, DOC_TITLE, DOC_QUESTION, DOC_SENTENCE)
# Shares of ``max_doc_queries`` (the mention kind has its own limit).
DOC_SHARES: Mapping[str, float] = {DOC_TITLE: 0.25, DOC_QUESTION: 0.25, DOC_SENTENCE: 0.5}

QUESTION_TEMPLATES = (
    "how does {project} handle {title}",
    "{title}?",
    "what does the documentation say about {title}",
    "explain {title}",
    "{title} in {project}",
    "where are the docs on {title}",
    "how do {title} work",
    "tell me about {title}",
    "how do I use {title}",
    "{title} example",
)
GENERIC_QUESTIONS: Mapping[str, tuple[str, ...]] = {
    "installation": ("install", "how do I install {project}"),
    "install": ("install", "how do I install {project}"),
    "quickstart": ("getting started", "{project} quickstart"),
    "getting started": ("getting started", "how do I get started with {project}"),
    "tutorial": ("{project} tutorial", "getting started"),
    "introduction": ("what is {project}", "{project} overview"),
    "overview": ("what is {project}", "{project} overview"),
    "usage": ("how do I use {project}", "{project} usage"),
    "contributing": ("how do I contribute to {project}", "run the test suite"),
    "faq": ("{project} frequently asked questions", "faq"),
}
MIN_SENTENCE_WORDS = 6
MIN_IDENT_CHARS = 4
MAX_DEFINITIONS = 2  # an identifier defined more often than this is ambiguous
_NOT_PROSE = (".. ", "```", "~~~", "    ", "\t", "|", ">>>", "<", "{", "!", "[!")
_IDENT = re.compile(r"(?::[\w:.+-]+:)?`{1,2}~?!?([A-Za-z_][\w.]*)(?:\(\))?\s*(?:<[^>]*>)?`{1,2}")
_WORD = re.compile(r"[A-Za-z][\w'-]*")


@dataclass(frozen=True)
class Target:
    """A relevant span: path and 1-based inclusive lines (a whole section or definition)."""

    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Cut:
    """Words to blank in a file: ``words`` whitespace-separated tokens, starting at token
    ``skip`` of the paragraph that begins on line ``first`` (1-based) and ends on ``last``."""

    path: str
    first: int
    last: int
    skip: int
    words: int


@dataclass(frozen=True)
class DocQuery:
    kind: str
    query: str
    targets: tuple[Target, ...]  # the section first, then any definition
    cut: Cut | None = None


@dataclass(frozen=True)
class Section:
    span: Span  # part 0
    end_line: int  # last line over all its parts


@dataclass(frozen=True)
class _Para:
    first: int  # 1-based line numbers in the file
    last: int
    lines: tuple[str, ...]


def sections(spans: Iterable[Span]) -> list[Section]:
    """Doc sections (part 0) with their full line range, in file order, queries allowed."""
    by_path: dict[str, list[Span]] = {}
    for s in spans:
        if s.category == DOC and s.kind == "section":
            by_path.setdefault(s.path, []).append(s)
    out: list[Section] = []
    for path in sorted(by_path):
        if not _queries_allowed(path):
            continue
        ordered = sorted(by_path[path], key=lambda s: (s.start_line, s.part))
        for s in ordered:
            if s.part == 0:
                out.append(Section(s, s.end_line))
            elif out and out[-1].span.path == path and out[-1].span.qualname == s.qualname:
                out[-1] = Section(out[-1].span, max(out[-1].end_line, s.end_line))
    return out


def definitions(spans: Iterable[Span]) -> dict[str, list[Target]]:
    """Code definitions by plain name (functions, methods, classes; tests left out)."""
    out: dict[str, list[Target]] = {}
    for s in spans:
        if s.category != CODE or s.kind not in ("function", "method", "class") or s.part:
            continue
        if _queries_allowed(s.path):  # part 0: a later part overlaps it, so matches too
            out.setdefault(s.symbol, []).append(Target(s.path, s.start_line, s.end_line))
    return out


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _good(q: str, min_words: int) -> bool:
    return min_words <= _words(q) <= MAX_QUERY_WORDS and len(q) <= 300


def paragraphs(span: Span) -> list[_Para]:
    """The prose paragraphs of a section's body (not code, directives, lists, tables)."""
    lines = span.text.split("\n")
    title = clean_markup(span.symbol.strip())
    i = 0
    while i < min(len(lines), 4):  # the title line(s), as ``section_body`` skips them
        line = lines[i].strip()
        bare = line.lstrip("#").strip().rstrip("#").strip()
        if not line or _UNDERLINE.match(line) or (bare and clean_markup(bare) == title):
            i += 1
            continue
        break
    out: list[_Para] = []
    block: list[int] = []
    for j in range(i, len(lines) + 1):
        if j < len(lines) and lines[j].strip():
            block.append(j)
            continue
        if block:
            text = [lines[k] for k in block]
            head = text[0]
            if not head.startswith(_NOT_PROSE) and not head.lstrip().startswith(
                ("- ", "* ", "+ ", "#", ".. ", ":", "|", ">>>", "```", "=")
            ):
                base = span.start_line
                out.append(_Para(base + block[0], base + block[-1], tuple(text)))
            block = []
    return out


def split_sentences(para: _Para) -> list[tuple[int, int, str]]:
    """(first token, token count, raw text) of each sentence of a paragraph."""
    flat = " ".join(" ".join(line.split()) for line in para.lines).strip()
    out = []
    at = 0
    for sentence in _SENTENCE_END.split(flat):
        sentence = sentence.strip()
        if not sentence:
            continue
        n = len(sentence.split())
        out.append((at, n, sentence))
        at += n
    return out


def sentence_query(raw: str) -> str:
    q = re.sub(r"[\s.:;!*]+$", "", clean_markup(raw))
    return q if _good(q, MIN_SENTENCE_WORDS) and re.match(r"[A-Za-z`\"'(]", q) else ""


def _title_question(section: Span, project: str, rng: random.Random) -> str:
    title = clean_markup(section.symbol).strip().rstrip(":?")
    low = title.lower()
    if low in GENERIC_QUESTIONS:
        return rng.choice(GENERIC_QUESTIONS[low]).format(project=project)
    if (
        not title
        or _norm(low) == _norm(project)
        or low in _GENERIC_TITLES
        or re.search(r"\.(md|rst|txt)$", low)
        or re.match(r"^v?\d", low)
        or not _good(title, 1)
        or _words(title) > 10
        or low.startswith(("how ", "why ", "what ", "when ", "can ", "do ", "does ", "is "))
    ):
        return ""
    template = rng.choice(QUESTION_TEMPLATES)
    return template.format(project=project, title=low)


def _norm(name: str) -> str:
    return re.sub(r"[-_.\s]+", "", name.lower())


def mine(
    spans: Sequence[Span],
    project: str,
    limit: int,
    mentions: int,
    seed: int,
    shares: Mapping[str, float] = DOC_SHARES,
) -> list[DocQuery]:
    """Docs-intent queries of one project's indexed ``spans``: ``limit`` split by
    ``shares`` over titles, questions and leading sentences, and ``mentions`` identifier
    sentences; each section gives one query at most (seeded)."""
    rng = random.Random(f"{seed}:{project}:docs-intent")
    secs = sections(spans)
    order = list(range(len(secs)))
    rng.shuffle(order)
    defs = definitions(spans)
    want = {k: round(limit * shares.get(k, 0.0)) for k in DOC_KINDS}
    want[DOC_MENTION] = mentions
    got: dict[str, list[DocQuery]] = {k: [] for k in DOC_KINDS}
    seen: set[str] = set()
    for i in order:
        sec = secs[i]
        span = sec.span
        section = Target(span.path, span.start_line, sec.end_line)
        body = section_body(span)
        prose = _prose_words(body)
        if prose < MIN_BODY_WORDS:
            continue
        kind, title, _ = doc_query(span, body)
        found: list[DocQuery] = []
        paras = paragraphs(span)
        if len(got[DOC_MENTION]) < want[DOC_MENTION]:
            found += _mentions(paras, section, defs)
        if kind == DOC_TITLE:
            found.append(DocQuery(DOC_TITLE, title, (section,)))
        question = _title_question(span, project, rng)
        if question:
            found.append(DocQuery(DOC_QUESTION, question, (section,)))
        sentences = split_sentences(paras[0]) if paras else []
        if sentences:
            at, n, raw = sentences[0]
            q = sentence_query(raw)
            if q and prose - _words(raw) >= MIN_BODY_WORDS // 2:
                cut = Cut(span.path, paras[0].first, paras[0].last, at, n)
                found.append(DocQuery(DOC_SENTENCE, q, (section,), cut))
        # the kind furthest below its quota takes the section (ties: the scarcer kind first,
        # as few sections name a definition or have a usable title, and most lead a sentence)
        open_ = [
            d for d in found if d.query.lower() not in seen and len(got[d.kind]) < want[d.kind]
        ]
        if not open_:
            continue
        pick = min(open_, key=lambda d: (len(got[d.kind]) / want[d.kind], _SCARCE.index(d.kind)))
        got[pick.kind].append(pick)
        seen.add(pick.query.lower())
        if all(len(got[k]) >= want[k] for k in DOC_KINDS):  # every quota met
            break
    return [d for k in DOC_KINDS for d in got[k]]


def _mentions(
    paras: Sequence[_Para], section: Target, defs: Mapping[str, list[Target]]
) -> list[DocQuery]:
    """The first sentence of the section naming one defined identifier (as a query)."""
    for para in paras:
        for at, n, raw in split_sentences(para):
            names = {m.group(1).rsplit(".", 1)[-1] for m in _IDENT.finditer(raw)}
            named = [
                x for x in sorted(names)
                if len(x) >= MIN_IDENT_CHARS and not x.startswith("__") and x in defs
                and len(defs[x]) <= MAX_DEFINITIONS
            ]  # fmt: skip
            if len(named) != 1:
                continue
            q = sentence_query(raw)
            if not q:
                continue
            cut = Cut(section.path, para.first, para.last, at, n)
            return [DocQuery(DOC_MENTION, q, (section, *defs[named[0]]), cut)]
    return []


def cut_lines(lines: list[str], cut: Cut) -> list[str]:
    """``lines`` (a file's, no line ends) with the cut's tokens blanked; same line count."""
    out = list(lines)
    token = 0
    end = cut.skip + cut.words
    for row in range(cut.first - 1, min(cut.last, len(lines))):
        line = lines[row]
        tokens = line.split()
        keep = [t for k, t in enumerate(tokens, start=token) if not cut.skip <= k < end]
        if len(keep) != len(tokens):
            indent = line[: len(line) - len(line.lstrip())]
            out[row] = indent + " ".join(keep) if keep else ""
        token += len(tokens)
    return out


def apply_cuts(root: Path, cuts: Iterable[Cut]) -> int:
    """Blank every cut's words in its file under ``root`` (line ends kept); files edited."""
    by_path: dict[str, list[Cut]] = {}
    for c in cuts:
        by_path.setdefault(c.path, []).append(c)
    for path, todo in by_path.items():
        file = root / path
        raw = file.read_bytes().decode("utf-8")
        ends = re.findall(r"\r\n|\n|\r", raw)
        lines = re.split(r"\r\n|\n|\r", raw)
        # later cuts first: a cut never moves the tokens before it, so order is safe anyway
        for c in sorted(todo, key=lambda c: (c.first, c.skip), reverse=True):
            lines = cut_lines(lines, c)
        text = "".join(line + (ends[i] if i < len(ends) else "") for i, line in enumerate(lines))
        tmp = file.with_name(file.name + ".llmc-tmp")
        tmp.write_bytes(text.encode("utf-8"))
        tmp.replace(file)
    return len(by_path)


def to_json(d: DocQuery) -> dict:
    return {
        "kind": d.kind,
        "query": d.query,
        "targets": [[t.path, t.start_line, t.end_line] for t in d.targets],
        "cut": None if d.cut is None else [
            d.cut.path, d.cut.first, d.cut.last, d.cut.skip, d.cut.words
        ],
    }  # fmt: skip


def from_json(raw: Mapping) -> DocQuery:
    cut = raw.get("cut")
    return DocQuery(
        str(raw["kind"]),
        str(raw["query"]),
        tuple(Target(str(p), int(a), int(b)) for p, a, b in raw["targets"]),
        None
        if cut is None
        else Cut(str(cut[0]), int(cut[1]), int(cut[2]), int(cut[3]), int(cut[4])),
    )


__all__ = [
    "DOCS_VERSION",
    "DOC_KINDS",
    "DOC_MENTION",
    "DOC_QUESTION",
    "DOC_SHARES",
    "Cut",
    "DocQuery",
    "Target",
    "apply_cuts",
    "cut_lines",
    "definitions",
    "from_json",
    "mine",
    "paragraphs",
    "sections",
    "split_sentences",
    "to_json",
]
