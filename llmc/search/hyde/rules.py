"""The pure parts of adaptive HyDE (``llmc.search.hyde`` runs the stage): the gate that
says whether a query is vague enough, the prompts, the check and clean-up of what the LLM
wrote, the threshold ladder of the hypotheses' dense search, and the stage's records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from llmc.config import Config
from llmc.errors import ConfigError
from llmc.search.hyde.diagnostics import HydeReport
from llmc.search.query import PASCAL_CASE, STOPWORDS, parse
from llmc.search.types import (
    CODE_ROUTE,
    DOCS_ROUTE,
    INTENTS,
    MIXED_ROUTE,
    RankedList,
    RouteDecision,
)

PROMPT_VERSION = "hyde-1"  # change it with the prompts: cached hypotheses then go unused
MODES = ("auto", "always")
MIN_TOKENS = 32  # the length cap never goes below this, however short the spans
CHARS_PER_TOKEN = 3.5
COOLDOWN_S = 30.0  # after the LLM was unavailable, HyDE rests this long (not after a timeout)
_LONG_QUERY_WORDS = 7  # from this many words, a named identifier no longer blocks HyDE

SYSTEM = {
    CODE_ROUTE: "You are an expert {lang} programmer. Reply with {lang} code only, no prose.",
    DOCS_ROUTE: "You write the documentation of a software project. Reply with the "
    "documentation text only.",
}
PROMPT = {
    CODE_ROUTE: "Write the {lang} code, about {lines} lines, that answers this question "
    "about a code base:\n{query}",
    DOCS_ROUTE: "Write the documentation section, about {lines} lines, that answers this "
    "question about a {lang} project:\n{query}",
}
LANG_NAMES = {
    "python": "Python", "javascript": "JavaScript", "typescript": "TypeScript", "go": "Go",
    "rust": "Rust", "java": "Java", "c": "C", "cpp": "C++", "c_sharp": "C#", "csharp": "C#",
    "ruby": "Ruby", "php": "PHP", "kotlin": "Kotlin", "swift": "Swift", "scala": "Scala",
    "bash": "shell", "lua": "Lua", "tsx": "TypeScript",
}  # fmt: skip
NOT_PROGRAMS = frozenset({"toml", "yaml", "json", "ini", "text", "markdown", "rst", "csv"})

_ERROR_CODE = re.compile(
    r"\b(?:[A-Z]{1,5}-?\d{3,6}|0x[0-9A-Fa-f]{4,}|HTTP\s?[1-5]\d\d|(?:errno|exit code|"
    r"status|error)\s*#?\d{2,})\b|\bE(?:NOENT|ACCES|PERM|INVAL|EXIST|AGAIN|PIPE|NOSPC|BADF|"
    r"NOMEM|ISDIR|NOTDIR|MFILE|CONNREFUSED|CONNRESET|TIMEDOUT|ADDRINUSE)\b",
    re.IGNORECASE,
)
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning|Panic)\b")
_QUOTED = re.compile(r"""^\s*(["'`]).+\1\s*$""")
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9']*")
_FENCE = re.compile(r"^\s*```")
# "Sure! Here's an example of the code:" and the like, before the answer proper.
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|certainly|of course)\b[^\n:]*?[.!,]\s*)?here(?:'s| is| are)\b[^\n:]*:\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Gate:
    """Whether a query gets HyDE, and why (for the trace)."""

    use: bool
    reason: str


def gate(query: str) -> Gate:
    """HyDE helps vague natural-language questions; exact lookups are better served by
    BM25 and the exact-symbol path, and a hypothesis would only blur them."""
    parsed = parse(query)  # a traceback: its frames, as the evidence stage reads them
    traceback = bool(parsed.frames) or "Traceback (most recent" in query
    if traceback or _ERROR_CODE.search(query):
        return Gate(False, "error-code-shaped query")
    exc = _EXCEPTION.search(query)
    if exc:
        return Gate(False, f"names the error `{exc.group(0)}`")
    if _QUOTED.match(query):
        return Gate(False, "quoted exact lookup")
    named = parsed.paths
    if named:
        return Gate(False, f"names a path `{named[0][0]}`")
    words = [w for w in (t.strip(".,;:!?()[]{}'\"`") for t in query.split()) if w]
    for ident in parsed.identifiers:
        if not ident.code_shaped:
            continue
        if ident.why == PASCAL_CASE and len(words) > 4:
            continue  # a product name (SQLite, GitHub) in a sentence
        if len(words) < _LONG_QUERY_WORDS:
            return Gate(False, f"identifier-shaped: `{ident.name}` ({ident.why})")
    content = [w for w in words if w.lower() not in STOPWORDS]
    if len(words) < 3 or len(content) < 2:
        return Gate(False, "short exact lookup")
    return Gate(True, "vague natural-language query")


def thresholds(initial: float, step: float, minimum: float) -> list[float]:
    """The thresholds tried, highest first: 0.7, 0.1, 0.3 → [0.7, 0.6, 0.5, 0.4, 0.3]."""
    if minimum > initial:
        raise ConfigError(
            f"hyde.min_threshold ({minimum}) must not exceed hyde.initial_threshold ({initial})"
        )
    if step <= 0:
        return [round(initial, 6)]
    out: list[float] = []
    i = 0
    while True:
        t = round(initial - i * step, 6)
        if t < minimum - 1e-9:
            return out
        out.append(t)
        i += 1


def step_down(best: float | None, ladder: Sequence[float]) -> tuple[float | None, int]:
    """``(effective threshold, steps down taken)`` for the best similarity found: the first
    threshold ``best`` reaches; ``(None, len(ladder) - 1)`` when it reaches none."""
    for steps, t in enumerate(ladder):
        if best is not None and best >= t - 1e-9:
            return t, steps
    return None, max(len(ladder) - 1, 0)


def garbage(text: str) -> str | None:
    """Why a (cleaned) hypothesis is unusable, or None: empty, too short, no words, or a
    loop of the same few tokens."""
    tokens = _WORDS.findall(text)
    if not text.strip():
        return "empty answer"
    if len(tokens) < 3:
        return "too short"
    letters = sum(ch.isalpha() for ch in text)
    if letters < 0.3 * len("".join(text.split())):
        return "hardly any words"
    if len(tokens) >= 20 and len({t.lower() for t in tokens}) < 0.15 * len(tokens):
        return "repeats itself"
    return None


def clean(text: str) -> str:
    """A hypothesis as embedded: a "Here is ...:" preamble, code fences and repeated lines
    (small models loop) gone."""
    out: list[str] = []
    seen: set[str] = set()
    text = _PREAMBLE.sub("", text.replace("\r\n", "\n"), count=1)
    for line in text.split("\n"):
        if _FENCE.match(line):
            continue
        key = line.strip()
        if key and key in seen:
            continue
        seen.add(key)
        out.append(line.rstrip())
    return "\n".join(out).strip()


def plan(decision: RouteDecision, n: int) -> list[str]:
    """The route of each hypothesis: the favoured route's; for a mixed query they
    alternate, favoured first, between the routes the decision searches."""
    favoured, other = (
        (CODE_ROUTE, DOCS_ROUTE) if decision.p_code >= 0.5 else (DOCS_ROUTE, CODE_ROUTE)
    )
    if decision.weight(favoured) <= 0:
        favoured, other = other, favoured
    routes = [favoured]
    if decision.intent == MIXED_ROUTE and decision.weight(other) > 0:
        routes.append(other)
    return [routes[i % len(routes)] for i in range(max(0, n))]


def check(cfg: Config) -> None:
    """ConfigError for settings HyDE cannot work with."""
    h = cfg.hyde
    if h.mode not in MODES:
        raise ConfigError(f"hyde.mode must be one of {', '.join(MODES)}, got {h.mode!r}")
    bad = [i for i in h.intents if i not in INTENTS]
    if bad:
        raise ConfigError(f"hyde.intents: unknown intent(s) {bad} (known: {', '.join(INTENTS)})")
    if h.n < 1:
        raise ConfigError(f"hyde.n must be at least 1, got {h.n}")
    if h.max_tokens < 1:
        raise ConfigError(f"hyde.max_tokens must be at least 1, got {h.max_tokens}")
    thresholds(h.initial_threshold, h.threshold_step, h.min_threshold)


@dataclass(frozen=True)
class Outcome:
    """The stage's answer: the lists to fuse, the report, warnings and trace notes."""

    lists: list[RankedList]
    report: HydeReport
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Corpus:
    """What the stage needs to know of the index: the main programming language and each
    category's length cap (tokens) for hypotheses."""

    lang: str
    span_tokens: dict[str, int]


__all__ = [
    "CHARS_PER_TOKEN",
    "COOLDOWN_S",
    "LANG_NAMES",
    "MIN_TOKENS",
    "MODES",
    "NOT_PROGRAMS",
    "PROMPT",
    "PROMPT_VERSION",
    "SYSTEM",
    "Corpus",
    "Gate",
    "Outcome",
    "check",
    "clean",
    "garbage",
    "gate",
    "plan",
    "step_down",
    "thresholds",
]
