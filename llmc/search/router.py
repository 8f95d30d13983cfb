"""Intent routing: does a query ask for code, for docs, or for both?

A heuristic, not a model: each cue in the query adds evidence (a log-odds step) for code
or for docs, and names itself as a reason. ``p_code`` is the logistic of the sum; a query
without clear cues lands near 0.5 and is routed ``mixed``. The disfavoured route keeps a
weight (``1 - confidence**2``, at least ``min_weight``) and is dropped only when the
router is at least ``drop_confidence`` sure. Test files get ``test_weight`` unless the
query asks about tests. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from llmc.config import SearchConfig
from llmc.errors import LlmcError
from llmc.search.query import (
    CODE_EXTENSIONS,
    CONFIG_EXTENSIONS,
    DOC_EXTENSIONS,
    PASCAL_CASE,
    STOPWORDS,
    parse,
)
from llmc.search.types import (
    CODE_ROUTE,
    DOCS_ROUTE,
    INTENTS,
    MIXED_ROUTE,
    TESTS,
    RouteDecision,
)

CODE_INTENT_P = 0.65  # p_code at or above: intent code
DOCS_INTENT_P = 0.35  # p_code at or below: intent docs

# (phrase regex, log-odds step, reason); phrases are matched on lowercase text.
_NEGATIONS: tuple[tuple[str, float, str], ...] = (
    (
        r"\b(?:not|no|without|skip|ignore|exclude)\s+(?:the\s+|any\s+)?(?:docs?|documentation|"
        r"readme|markdown|guides?|tutorials?)\b",
        3.0,
        "asks to leave out the docs",
    ),
    (
        r"\b(?:not|no|without|skip|ignore|exclude)\s+(?:the\s+|any\s+)?(?:code|source|"
        r"implementation|sources)\b",
        -3.0,
        "asks to leave out the code",
    ),
    (
        r"\b(?:only|just)\s+(?:the\s+)?(?:code|source|implementation)\b|\bcode\s+only\b",
        3.0,
        "asks for code only",
    ),
    (
        r"\b(?:only|just)\s+(?:the\s+)?(?:docs?|documentation|readme)\b|\bdocs?\s+only\b",
        -3.0,
        "asks for docs only",
    ),
    (r"\bin\s+the\s+(?:source|code|implementation)\b", 1.5, "asks about the source"),
    (r"\bin\s+the\s+(?:docs?|documentation|readme|manual|guide)\b", -1.5, "asks about the docs"),
)
# Phrases that ask for the source itself. Generic nouns (function, class, argument...)
# are not here: docs use them as much as code does.
_CODE_CUES = (
    "implemented", "implementation", "implements", "defined", "definition", "defines",
    "declared", "declaration", "calls", "caller", "callers", "callee", "invoked", "invokes",
    "returns", "return value", "return type", "raises", "throws", "traceback", "stack trace",
    "signature", "source code", "code for", "code that", "where is", "where are", "where does",
    "where do", "which function", "which class", "which method", "which file",
    "who calls", "what calls", "type hint", "unit test", "test for",
)  # fmt: skip
_DOCS_CUES = (
    "how do i",
    "how do you",
    "how to",
    "how can i",
    "how should i",
    "configure",
    "configuration",
    "install",
    "installation",
    "installing",
    "set up",
    "setup",
    "getting started",
    "example",
    "examples",
    "guide",
    "tutorial",
    "what is",
    "what are",
    "what does llmc",
    "best practice",
    "best practices",
    "documentation",
    "docs",
    "doc",
    "readme",
    "overview",
    "introduction",
    "usage",
    "explain",
    "explained",
    "why",
    "faq",
    "changelog",
    "release notes",
    "license",
    "contributing",
    "recommended",
    "recommend",
    "tips",
    "concepts",
    "architecture",
    "design",
    "quickstart",
    "quick start",
    "walkthrough",
    "manual",
    "options",
    "settings",
)
# An imperative first word describes an operation, as code is named and documented.
_ACTION_VERBS = frozenset(
    """read write parse split list drop skip check coerce compute calculate build load save
    store convert validate serialize deserialize encode decode render format sort filter merge
    fetch send retry hash open close create delete remove update insert find lookup resolve walk
    scan tokenize normalize match compare count generate emit handle register apply wrap strip
    join map select copy move rename lock unlock spawn kill wait start stop call extract
    detect chunk embed rank fuse score reload rebuild refresh flush commit rollback
    migrate""".split()
)
_CODE_SYNTAX = re.compile(r"->|::|=>|==|!=|\+=|&&|\|\||[{};]|\bself\.|\bthis\.|#include|\w\[\w*\]")
_TEST_CUE = re.compile(r"\b(?:tests?|testing|tested|unittest|pytest|spec|specs|fixtures?|mocks?)\b")
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "e2e"})
_TEST_FILE = re.compile(
    r"^(?:test_.*|.*_tests?\.\w+|.*\.(?:test|spec)\.\w+|.*tests?\.(?:java|kt|cs|scala)|"
    r"conftest\.py)$"
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|my|me|we|our|us)\b")
_TERSE_WORDS = 4
_MAX_CUES = 2  # per direction: more of the same kind of cue adds nothing


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _cue_regex(cues: Sequence[str]) -> re.Pattern[str]:
    alternatives = sorted((re.escape(c) for c in cues), key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b")


_CODE_RE = _cue_regex(_CODE_CUES)
_DOCS_RE = _cue_regex(_DOCS_CUES)


def evidence(query: str, defined_symbols: Sequence[str] = ()) -> list[tuple[float, str]]:
    """Every cue found in ``query``: (log-odds step, reason). Positive favours code."""
    out: list[tuple[float, str]] = []
    low = query.lower()
    for pattern, step, reason in _NEGATIONS:
        if re.search(pattern, low):
            out.append((step, reason))
            low = re.sub(pattern, " ", low)  # "not the docs" is no docs cue
    words = re.findall(r"\w+", low)
    # In a sentence an identifier is the topic more than a request for code: half weight.
    sentence = len(words) > _TERSE_WORDS
    idents = [i for i in parse(query).identifiers if i.code_shaped]
    for ident in idents[:_MAX_CUES]:
        step = 0.75 if ident.why == PASCAL_CASE or sentence else 1.5
        out.append((step, f"identifier `{ident.name}` ({ident.why})"))
    for name in list(dict.fromkeys(defined_symbols))[:_MAX_CUES]:
        out.append((1.5, f"names a defined symbol `{name}`"))
    for path, ext in parse(query).paths[:_MAX_CUES]:
        if ext in DOC_EXTENSIONS or path.lower().startswith(("readme", "docs/", "doc/")):
            out.append((-1.5, f"names a doc file `{path}`"))
        elif ext in CODE_EXTENSIONS and ext not in CONFIG_EXTENSIONS:
            out.append((1.5, f"names a code file `{path}`"))
        else:
            out.append((0.5, f"names a path `{path}`"))
    if _CODE_SYNTAX.search(query):
        out.append((1.0, "contains code syntax"))
    code_cues = list(dict.fromkeys(m.group(0) for m in _CODE_RE.finditer(low)))
    for cue in code_cues[:_MAX_CUES]:
        out.append((1.0, f"code cue '{cue}'"))
    docs_cues = list(dict.fromkeys(m.group(0) for m in _DOCS_RE.finditer(low)))
    for cue in docs_cues[:_MAX_CUES]:
        out.append((-1.0, f"docs cue '{cue}'"))
    if _FIRST_PERSON.search(low):
        out.append((-0.75, "asked as a user (I, my, we)"))
    if words and words[0] in _ACTION_VERBS and not docs_cues:
        out.append((0.75, f"starts with '{words[0]}': describes what code does"))
    content = [w for w in words if w not in STOPWORDS]
    if 0 < len(words) <= 2 and len(content) == len(words) and not docs_cues:
        out.append((0.5, "terse keyword query"))
    return out


def route_query(
    query: str,
    defined_symbols: Sequence[str] = (),
    drop_confidence: float = 0.8,
    min_weight: float = 0.5,
    test_weight: float = 1.0,
) -> RouteDecision:
    """Route ``query`` by its cues; see the module docstring for the rule."""
    found = evidence(query, defined_symbols)
    p_code = _sigmoid(sum(step for step, _ in found))
    confidence = abs(2.0 * p_code - 1.0)
    if p_code >= CODE_INTENT_P:
        intent = CODE_ROUTE
    elif p_code <= DOCS_INTENT_P:
        intent = DOCS_ROUTE
    else:
        intent = MIXED_ROUTE
    favoured, other = (CODE_ROUTE, DOCS_ROUTE) if p_code >= 0.5 else (DOCS_ROUTE, CODE_ROUTE)
    soft = max(min_weight, 1.0 - confidence**2)
    other_weight = 0.0 if confidence >= drop_confidence else soft
    reasons = tuple(f"{'+' if s > 0 else '-'}{abs(s):g} {r}" for s, r in found)
    if not reasons:
        reasons = ("no code or docs cues: search both",)
    if other_weight == 0.0:
        reasons += (f"confidence {confidence:.2f} >= {drop_confidence:g}: {other} route dropped",)
    tests = test_weight
    if test_weight < 1.0:
        if _TEST_CUE.search(query.lower()):
            tests = 1.0
            reasons += ("asks about tests: test files keep full weight",)
        else:
            reasons += (f"test files weighted {test_weight:g} (the query names no tests)",)
    return RouteDecision(
        intent=intent,
        p_code=p_code,
        weights={favoured: 1.0, other: other_weight, TESTS: tests},
        confidence=confidence,
        reasons=reasons,
    )


def is_test_path(path: str) -> bool:
    """Whether ``path`` (relative, posix) looks like a test file or lives in a test dir."""
    parts = path.lower().split("/")
    if any(p in _TEST_DIRS for p in parts[:-1]):
        return True
    return bool(_TEST_FILE.search(parts[-1]))


def fixed_route(route: str, source: str) -> RouteDecision:
    """A route the user chose (``--route``, ``search.route``) or routing switched off."""
    if route not in INTENTS:
        raise LlmcError(f"unknown route {route!r} (expected one of: auto, {', '.join(INTENTS)})")
    if route == MIXED_ROUTE:
        weights, p_code, confidence = {CODE_ROUTE: 1.0, DOCS_ROUTE: 1.0}, 0.5, 0.0
    elif route == CODE_ROUTE:
        weights, p_code, confidence = {CODE_ROUTE: 1.0, DOCS_ROUTE: 0.0}, 1.0, 1.0
    else:
        weights, p_code, confidence = {DOCS_ROUTE: 1.0, CODE_ROUTE: 0.0}, 0.0, 1.0
    weights[TESTS] = 1.0
    reason = "routing is off: search both" if source == "off" else f"route {route} set by {source}"
    return RouteDecision(route, p_code, weights, confidence, (reason,), source=source)


def choose_route(
    text: str,
    flag: str | None,
    defined: Sequence[str],
    scfg: SearchConfig,
    refine: Callable[[str, Sequence[str], RouteDecision], RouteDecision] | None = None,
) -> RouteDecision:
    """The route of one query: ``--route`` (flag), else ``search.route``, else the router
    (when ``search.routing`` is on), whose decision ``refine`` may replace (the learned
    intent model of `llmc tune`)."""
    chosen = flag if flag is not None else scfg.route
    if chosen != "auto":
        return fixed_route(chosen, "flag" if flag is not None else "config")
    if not scfg.routing:
        return fixed_route("mixed", "off")
    decision = route_query(
        text, defined, scfg.route_drop_confidence, scfg.min_route_weight, scfg.test_weight
    )
    return refine(text, defined, decision) if refine is not None else decision


_QUESTION_WORDS = frozenset(
    "how what why where when which who whom whose can could does do did is are was were "
    "should will would whats hows am has have may might shall".split()
)
_FIRST_WORD = re.compile(r"([a-z]+)(?:'[a-z]+)?[,:;!?.]*")


def is_question(query: str) -> bool:
    """The query is phrased as a question: it opens with a question word ("how do I ...",
    "why does ...", "what's ...", "can I ...") or ends with ``?``. Not a docstring's or a
    commit subject's shape, which is what the learned ranker was trained on. The first
    word must be a plain word: ``is_valid`` or ``has_key`` is a name, not a question."""
    words = query.split(maxsplit=1)
    if not words:
        return False
    first = _FIRST_WORD.fullmatch(words[0].lstrip("\"'`([{<*").lower())
    return query.rstrip().endswith("?") or (first is not None and first.group(1) in _QUESTION_WORDS)


def asks_about_tests(query: str) -> bool:
    """The query names tests (``test``, ``pytest``, ``fixtures``, ...)."""
    return bool(_TEST_CUE.search(query.lower()))


__all__ = [
    "asks_about_tests",
    "choose_route",
    "evidence",
    "fixed_route",
    "is_question",
    "is_test_path",
    "route_query",
]
