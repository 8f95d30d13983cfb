"""Query text: clean it, and find what in it names code (identifiers, paths).

Pure functions. ``normalize_query`` is the one gate every query passes: anything a user,
a script or a pipe can hand us comes out as clean text, or as one clear LlmcError.
``parse`` reads a text once into a ``ParsedQuery`` (its identifiers, lookup name, pasted
messages, paths, and what a bug report quotes: traceback frames and file paths), which every
stage reads instead of scanning the text again: the router, the exact-symbol path, the
evidence stage, HyDE's gate, the report reader, the ranker's features and the lead stage
all ask ``parse`` for the same text and get the same record.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from llmc.errors import LlmcError
from llmc.store.tokens import code_tokens

STOPWORDS = frozenset(
    """a an and are as at be by can could do does did for from had has have how i if in into
    is it its me my no not of on or our should so than that the their them then there these
    this those to was we were what when where which who whom why will with would you your
    find show get give tell please""".split()
)

CODE_EXTENSIONS = frozenset(
    """py pyi js jsx mjs cjs ts tsx go rs java kt kts scala c h cc cpp cxx hpp hh cs rb php
    swift m mm lua pl sh bash zsh sql scm el clj ex exs erl hs ml r jl dart vue svelte toml
    yaml yml json ini cfg""".split()
)
DOC_EXTENSIONS = frozenset("md markdown rst txt adoc org".split())
CONFIG_EXTENSIONS = frozenset("toml yaml yml json ini cfg".split())
DATA_EXTENSIONS = frozenset(
    "db sqlite sqlite3 csv tsv log lock xml html htm css png jpg jpeg gif svg pdf zip gz tar whl "
    "bin dat pkl parquet".split()
)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BACKTICK = re.compile(r"`([^`\n]{1,200})`")
_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\s*\(")
# "def parse", "fn main", "class Foo" (a capital: "the class is built" names nothing).
_DEF_KEYWORD = re.compile(
    r"\b(?:(?:def|fn|func)\s+([A-Za-z_]\w*)|(?:class|struct|interface|trait|impl|enum)\s+"
    r"([A-Z]\w*))"
)
_PATH = re.compile(r"(?<![\w/.])((?:[\w.-]+/)*[\w-]+\.([A-Za-z]{1,8}))(?![\w/])")
_SLASH_PATH = re.compile(r"(?<![\w/])((?:[\w.-]+/)+[\w.-]+)")
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w(])")
_SNAKE = re.compile(r"(?<![\w.])(_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*|_+[A-Za-z]\w*)\b")
_CAMEL = re.compile(r"(?<![\w.])([a-z]+[A-Z]\w*)\b")
_PASCAL = re.compile(r"(?<![\w.])([A-Z][a-z0-9]+[A-Z]\w*|[A-Z]{2,}[a-z]\w*)\b")
_WORD = re.compile(r"^[A-Za-z_][\w]*$")
WHOLE_QUERY = "the whole query"
A_LOOKUP = "a lookup"  # "class Schema", "load method", "where is X defined?"
# Words around a name that make the query a lookup of its definition, not prose.
LOOKUP_WORDS = frozenset(
    """class def function func fn method struct interface trait enum the a an of where is
    are definition defined declared declaration find show me go to""".split()
)
_DEFINITION_WORDS = frozenset(
    "class def function func fn method struct interface trait enum definition defined "
    "declared declaration".split()
)
_LOOKUP_TOKEN = re.compile(r"`?[A-Za-z_][\w.]*(?:\(\))?`?|[?:]")
# An exception line ("RuntimeError: Working outside of application context.") and quoted
# text: what a user pastes from a terminal, expected verbatim in the code that says it.
_EXCEPTION_LINE = re.compile(
    r"(?:^|\s)(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt))"
    r":\s+(\S.{8,300}?)\s*$"
)
_QUOTED = re.compile(r"(?<!\w)(?:\"([^\"\n]{12,300})\"|'([^'\n]{12,300})'|“([^”\n]{12,300})”)")
PASCAL_CASE = "PascalCase"  # also product names (SQLite, GitHub): weaker code evidence


def clean_query(raw: object, max_chars: int = 0) -> tuple[str, tuple[str, ...]]:
    """``(clean text, warnings)`` keeping the query's lines (a report's structure):
    control characters and lone surrogates removed, spaces within a line collapsed, cut
    to ``max_chars`` (0: no cut) with a warning. An empty query is an LlmcError."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        raise LlmcError(f"a query must be text, got {type(raw).__name__}")
    warnings: list[str] = []
    try:  # bytes smuggled in as surrogates (argv, surrogateescape): decode them for real
        text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", raw)
    text = unicodedata.normalize("NFC", text)
    cleaned = _CONTROL.sub(" ", text).replace("\ufffd", " ")
    if cleaned != text:
        warnings.append("removed control or undecodable characters from the query")
    lines = cleaned.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    text = "\n".join(_one_line(ln) for ln in lines).strip("\n")
    if not text.strip():
        raise LlmcError("empty query: give some words, an identifier or a path to search for")
    if max_chars > 0 and len(text) > max_chars:
        text = text[:max_chars].rstrip()
        warnings.append(f"query cut to its first {max_chars:,} characters")
    return text, tuple(warnings)


def _one_line(line: str) -> str:
    """One line of a query: its indentation kept (it marks code), inner spaces collapsed."""
    body = line.lstrip()
    if not body.strip():
        return ""
    return line[: len(line) - len(body)] + _SPACES.sub(" ", body).rstrip()


def collapse(text: str) -> str:
    """``text`` on one line, runs of whitespace as one space."""
    return _SPACES.sub(" ", text).strip()


def normalize_query(raw: object, max_chars: int = 2000) -> tuple[str, tuple[str, ...]]:
    """``(clean text, warnings)``: control characters, lone surrogates and excess
    whitespace removed, cut to ``max_chars``. An empty query is an LlmcError."""
    multi, warnings = clean_query(raw)
    text = collapse(multi)
    if max_chars > 0 and len(text) > max_chars:
        text = text[:max_chars].rstrip()
        warnings = (
            *warnings,
            f"query cut to its first {max_chars} characters (search.max_query_chars)",
        )
    return text, warnings


@dataclass(frozen=True)
class Identifier:
    """A name in the query that may be a symbol. ``strong``: it looks like code
    (backticks, call parens, snake_case, camelCase, dotted, ``def x``) or is the whole
    query; a plain word inside a sentence is weak."""

    name: str
    strong: bool
    why: str

    @property
    def code_shaped(self) -> bool:
        """Looks like code by its shape, not only by standing alone."""
        return self.strong and self.why != WHOLE_QUERY


def identifiers(query: str, limit: int = 8, looked_up: str | None = None) -> list[Identifier]:
    """Symbol-like names in ``query``, strongest evidence first, de-duplicated (the first
    ``limit``); ``looked_up``: ``lookup_name(query)`` when the caller has it."""
    found: dict[str, Identifier] = {}

    def add(name: str, strong: bool, why: str) -> None:
        name = name.strip().strip(".:")
        if name.endswith("()"):
            name = name[:-2]
        if not name or len(name) > 200 or not re.match(r"^[A-Za-z_][\w.]*$", name):
            return
        if _is_path_like(name) or all(len(p) <= 1 for p in name.split(".")):
            return
        old = found.get(name)
        if old is None or (strong and not old.strong):
            found[name] = Identifier(name, strong, why)

    for m in _BACKTICK.finditer(query):
        add(m.group(1), True, "in backticks")
    for m in _DEF_KEYWORD.finditer(query):
        name = m.group(1) or m.group(2)
        if name.lower() not in STOPWORDS:
            add(name, True, "after a definition keyword")
    for m in _CALL.finditer(query):
        add(m.group(1), True, "called with ()")
    for m in _DOTTED.finditer(query):
        add(m.group(1), True, "dotted name")
    for m in _SNAKE.finditer(query):
        add(m.group(1), True, "snake_case")
    for m in _CAMEL.finditer(query):
        add(m.group(1), True, "camelCase")
    for m in _PASCAL.finditer(query):
        add(m.group(1), True, PASCAL_CASE)
    stripped = query.strip().strip("`?!.,;:'\"").removesuffix("()")
    if _WORD.match(stripped):
        add(stripped, True, WHOLE_QUERY)
    looked_up = lookup_name(query) if looked_up is None else looked_up
    if looked_up:
        add(looked_up, True, A_LOOKUP)
    for token in re.findall(r"[A-Za-z_][\w]*", query):
        if token.lower() not in STOPWORDS and len(token) >= 3:
            add(token, False, "word")
    ordered = sorted(found.values(), key=lambda i: not i.strong)
    return ordered[:limit]


def lookup_name(query: str) -> str:
    """The name a query looks up, '' when it is not a lookup: the query is one name and
    words that only say "its definition" ("class Schema", "Schema class", "the load
    method", "where is parse_args defined?", "`open_file`"), no other word."""
    if len(query) > 120:
        return ""
    tokens = _LOOKUP_TOKEN.findall(query)
    if "".join(tokens) != "".join(query.split()):  # other punctuation: not a lookup
        return ""
    names = [t.strip("`").removesuffix("()") for t in tokens if t not in ("?", ":")]
    left = [n for n in names if n.lower() not in LOOKUP_WORDS]
    if len(left) != 1 or all(len(p) <= 1 for p in left[0].split(".")):
        return ""
    said = {n.lower() for n in names} & _DEFINITION_WORDS
    shaped = len(names) == 1 or any(_looks_like_code(t) for t in tokens if t.strip("`()"))
    return left[0].strip(".") if said or shaped else ""  # "the cart" is prose


def _looks_like_code(token: str) -> bool:
    name = token.strip("`")
    return (
        token != name
        or name.endswith("()")
        or bool("_" in name or "." in name.strip(".") or _CAMEL.match(name) or _PASCAL.match(name))
    )


def pasted_messages(query: str) -> list[str]:
    """Text the query quotes from a program's output, to be found verbatim in code: the
    message of an exception line (``ValueError: bad thing``) and quoted strings of 12+
    characters. Trailing punctuation is left off (code often adds it with a format)."""
    out: list[str] = []
    for line in query.split("\n"):
        m = _EXCEPTION_LINE.search(line.strip())
        if m:
            out.append(m.group(2))
    for m in _QUOTED.finditer(query):
        out.append(next(g for g in m.groups() if g))
    cleaned = (collapse(t).strip().rstrip(".!:;,") for t in out)
    return list(dict.fromkeys(t for t in cleaned if len(t) >= 12 and " " in t))[:4]


def symbol_lookups(ident: Identifier) -> list[str]:
    """The names to look up for one identifier: ``a.b.C`` → ``a.b.C``, ``b.C``, ``C``."""
    parts = ident.name.split(".")
    names = [ident.name]
    if len(parts) > 2:
        names.append(".".join(parts[-2:]))
    if len(parts) > 1:
        names.append(parts[-1])
    return list(dict.fromkeys(names))


def _known_extension(ext: str) -> bool:
    return ext in CODE_EXTENSIONS or ext in DOC_EXTENSIONS or ext in DATA_EXTENSIONS


def _is_path_like(token: str) -> bool:
    ext = token.rsplit(".", 1)[-1].lower() if "." in token else ""
    return "/" in token or _known_extension(ext)


def paths(query: str) -> list[tuple[str, str]]:
    """File paths in ``query`` as ``(path, extension)``; extension '' for ``a/b`` paths."""
    out: dict[str, str] = {}
    for m in _PATH.finditer(query):
        ext = m.group(2).lower()
        if _known_extension(ext):
            out.setdefault(m.group(1), ext)
    for m in _SLASH_PATH.finditer(query):
        p = m.group(1).rstrip(".")
        if not p.startswith(("http:", "https:")) and p not in out:
            ext = p.rsplit(".", 1)[-1].lower() if "." in p.rsplit("/", 1)[-1] else ""
            out[p] = ext
    return list(out.items())


# -- what a bug report quotes: traceback frames and file paths ------------------------------
_EXT = "|".join(sorted(CODE_EXTENSIONS | DOC_EXTENSIONS, key=len, reverse=True))
_FILE = rf"(?:[A-Za-z]:)?[\w.~@+-]*(?:[/\\][\w.~@+-]+)*\.(?:{_EXT})"
# File "/home/x/proj/pkg/mod.py", line 85, in load
_PY_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)(?:, in ([\w.<>]+))?')
# at load (/srv/app/lib/mod.js:10:5)   at Router.handle (lib/router.js:10)   at /x/y.js:3:1
_JS_FRAME = re.compile(
    r"\bat (?:(?:async |new )?([\w$.<>\[\] ]+?) \()?(?:file://)?"
    rf"({_FILE}):(\d+)(?::\d+)?\)?"
)
# pkg/mod.py:85, pkg/mod.py line 85, pkg/mod.py, line 85, pkg/mod.py#L85
_PATH_LINE = re.compile(rf"(?<![\w/.\\])({_FILE})(?::|#L|,? (?:at )?line )(\d+)\b")
# https://github.com/o/r/blob/main/pkg/mod.py#L85 (also GitLab's /-/blob/)
_BLOB_URL = re.compile(r"https?://\S+?/blob/[^/\s]+/([^\s#?]+)#L(\d+)")
_NAMED_PATH = re.compile(rf"(?<![\w.])({_FILE})(?![\w/\\])")


@dataclass(frozen=True)
class Frame:
    """One traceback frame or ``path:line`` the query quotes, as written."""

    path: str
    line: int
    function: str = ""


def clean_path(path: str) -> str:
    path = path.strip().strip("'\"`()[]<>,;").replace("\\", "/")
    path = re.sub(r"^[A-Za-z]:/", "/", path).removeprefix("file://")
    return path.removeprefix("./")


def _function(name: str | None) -> str:
    """A frame's function as a definition name: ``Router.handle`` → ``Router.handle``;
    ``<module>``, ``Object.<anonymous>``, ``new Foo`` parts that name nothing dropped."""
    if not name:
        return ""
    name = name.strip().removeprefix("async ").removeprefix("new ")
    parts = [p for p in name.split(".") if re.fullmatch(r"[A-Za-z_$][\w$]*", p)]
    return ".".join(parts) if parts and "<" not in name else ""


def frames(text: str) -> list[Frame]:
    """The frames in ``text``, in order of appearance, de-duplicated: Python traceback
    lines, JavaScript stack lines, ``path:line``, ``path line N`` and blob URLs (``#L85``)."""
    found: list[tuple[int, Frame]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, path: str, line: str, function: str | None) -> None:
        if any(s <= start < e for s, e in taken):
            return
        taken.append((start, end))
        found.append((start, Frame(clean_path(path), int(line), _function(function))))

    for m in _PY_FRAME.finditer(text):
        add(m.start(), m.end(), m.group(1), m.group(2), m.group(3))
    for m in _JS_FRAME.finditer(text):
        add(m.start(), m.end(), m.group(2), m.group(3), m.group(1))
    for m in _BLOB_URL.finditer(text):
        add(m.start(), m.end(), m.group(1), m.group(2), None)
    for m in _PATH_LINE.finditer(text):
        add(m.start(), m.end(), m.group(1), m.group(2), None)
    found.sort(key=lambda f: f[0])
    return list(dict.fromkeys(f for _, f in found))


def named_paths(text: str) -> list[str]:
    """File paths in ``text`` (with a code or doc extension), cleaned, in order."""
    out = [clean_path(m.group(1)) for m in _NAMED_PATH.finditer(text)]
    return list(dict.fromkeys(p for p in out if p and not p.startswith(("http:", "https:"))))


IDENTIFIERS = 8  # what a stage reads of a query's identifiers (the strongest first)


@dataclass(frozen=True)
class ParsedQuery:
    """A query's text read once (``parse``): what in it names code, for every stage."""

    text: str
    all_identifiers: tuple[Identifier, ...]  # every one, strongest first
    lookup_name: str  # the name a lookup asks for ("class Schema"), or ''
    pasted_messages: tuple[str, ...]  # program output quoted, to find verbatim in code
    paths: tuple[tuple[str, str], ...]  # (path, extension) as ``paths`` gives them
    frames: tuple[Frame, ...]  # traceback frames and ``path:line`` quoted (``frames``)
    named_paths: tuple[str, ...]  # file paths with a code or doc extension, cleaned

    @property
    def identifiers(self) -> tuple[Identifier, ...]:
        """The first ``IDENTIFIERS`` (``identifiers(text)``)."""
        return self.all_identifiers[:IDENTIFIERS]


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> ParsedQuery:
    """``text`` read once; later calls with the same text return the same record."""
    name = lookup_name(text)
    return ParsedQuery(
        text=text,
        all_identifiers=tuple(identifiers(text, limit=10**9, looked_up=name)),
        lookup_name=name,
        pasted_messages=tuple(pasted_messages(text)),
        paths=tuple(paths(text)),
        frames=tuple(frames(text)),
        named_paths=tuple(named_paths(text)),
    )


def word_groups(
    query: str, stem: Callable[[str], list[str]] | None = None, limit: int = 24
) -> tuple[tuple[str, ...], ...]:
    """The query's content words for snippets and highlighting: for each word, the
    lowercase prefixes that count as a match (the word itself and its stems)."""
    groups: dict[str, tuple[str, ...]] = {}
    for token in code_tokens(query):
        word = token.lower()
        if word in STOPWORDS or len(word) < 2 or word in groups or "/" in word:
            continue
        forms = [word]
        if stem is not None:
            forms += [s for s in stem(word) if s and len(s) >= 2]
        groups[word] = tuple(dict.fromkeys(forms))
        if len(groups) >= limit:
            break
    return tuple(groups.values())


__all__ = [
    "CODE_EXTENSIONS",
    "CONFIG_EXTENSIONS",
    "DATA_EXTENSIONS",
    "DOC_EXTENSIONS",
    "STOPWORDS",
    "A_LOOKUP",
    "LOOKUP_WORDS",
    "IDENTIFIERS",
    "Frame",
    "Identifier",
    "ParsedQuery",
    "clean_path",
    "clean_query",
    "collapse",
    "frames",
    "identifiers",
    "lookup_name",
    "named_paths",
    "normalize_query",
    "pasted_messages",
    "parse",
    "paths",
    "symbol_lookups",
    "word_groups",
]
