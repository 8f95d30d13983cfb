"""More kinds of training queries for the learned ranker (issue 28), mined from a train
project's indexed spans and labelled by construction; pure functions (spans in, ``DocQuery``
out), so each is testable on crafted spans.

- ``test-name``: a test function of the project (``test_*`` in a test file) as a user's
  question: its docstring's first sentence when it has one (from the original source: the
  corpus is stripped), else its first comment, else its name in words
  (``test_parse_version_with_epoch`` → "parse version with epoch", sometimes in a seeded
  question template). The answer is the non-test definitions the test calls, resolved by
  name within the project (a name defined at most ``MAX_DEFINITIONS`` times), kept only
  when the called name shares a content word with the test's name (``test_retry_on_timeout``
  calling ``retry_call`` and ``make_client``: ``retry_call`` only), at most
  ``MAX_TARGETS`` of them; a test whose calls resolve to none is skipped. The test itself
  stays in the corpus (a span that shares the words, and is not the answer).
- ``readme-sentence`` / ``guide-sentence``: the last prose sentence before a code example
  in a README section (``readme-``) or another docs section (``guide-``), which introduces
  the example, named identifier or not ("To stop after five attempts, combine the stop
  conditions:") → the definitions the example calls (resolved as above, at most
  ``MAX_TARGETS``) and the section; the sentence is cut out of the corpus
  (``docs_queries.Cut``), as ``doc-mention`` sentences are, so no span holds it word for word.

Each project gives at most ``limit`` of each kind, chosen with a seeded shuffle.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterable, Mapping, Sequence

from lab.train.docs_queries import (
    Cut,
    DocQuery,
    Target,
    paragraphs,
    sections,
    sentence_query,
    split_sentences,
)
from llmc.docstrings import _queries_allowed, clean_markup, first_sentence
from llmc.search.router import is_test_path
from llmc.types import CODE, Span

TEST_NAME = "test-name"
README_SENTENCE = "readme-sentence"
GUIDE_SENTENCE = "guide-sentence"
KINDS = (TEST_NAME, README_SENTENCE, GUIDE_SENTENCE)
MAX_DEFINITIONS = 2  # a name defined more often than this is ambiguous
MAX_TARGETS = 3
MIN_NAME_CHARS = 4
MIN_TEST_WORDS = 2  # words of a test's name (after "test")
MIN_COMMENT_WORDS = 4
TEST_TEMPLATES = (
    "{words}",
    "{words}",
    "how does it {words}",
    "where is {words} handled",
    "what happens when {words}",
    "code that handles {words}",
)
_CALL = re.compile(r"(?<![\w$])(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\s*\(")
_DECORATOR = re.compile(r"^\s*@(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)", re.MULTILINE)
_COMMENT = re.compile(r"^\s*#\s*(.+?)\s*$", re.MULTILINE)
_NOT_COMMENT = re.compile(r"(?i)^(?:noqa|type:|pragma|pylint|fmt:|todo|fixme|xxx|-\*-|!)")
_TEST_OPENING = re.compile(
    r"(?i)^(?:tests?|checks?|ensures?|verif(?:y|ies)|asserts?|make sure)\s+(?:that\s+)?"
)
_WORDS = re.compile(r"[A-Za-z][a-z0-9]*|[A-Z]+(?![a-z])|[0-9]+")
_STOP = frozenset(
    "a an the of to in on for with and or is are be by at as it its from that this when "
    "not no should can does do get set test tests".split()
)


def name_words(name: str) -> list[str]:
    """Lower-case words of an identifier (``parseVersion_with2`` → parse version with 2)."""
    return [w.lower() for w in _WORDS.findall(name)]


def name_phrase(name: str) -> str:
    """A test function's name in words, the ``test`` prefix dropped
    (``test_parse_version_with_epoch`` → ``parse version with epoch``); "" when too short."""
    words = [w for w in name_words(name) if not w.isdigit()]
    if words and words[0] == "test":
        words = words[1:]
    return " ".join(words) if len(words) >= MIN_TEST_WORDS else ""


def content(words: Iterable[str]) -> set[str]:
    return {w for w in words if len(w) > 2 and w not in _STOP}


def called_names(code: str) -> list[str]:
    """Names a piece of code calls or decorates with, in first-seen order (``a.b.run(x)``
    → ``run``; ``@retry(...)`` → ``retry``)."""
    found = sorted(
        (m.start(1), m.group(1)) for m in (*_DECORATOR.finditer(code), *_CALL.finditer(code))
    )
    return list(dict.fromkeys(name for _, name in found))


def docstrings_of_tests(source: str) -> dict[str, str]:
    """Test function name → its docstring's first sentence, for a Python test file's text
    (the corpus is stripped, so they come from the original); {} when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            doc = ast.get_docstring(node)
            if doc and node.name not in out:
                out[node.name] = first_sentence(doc)
    return out


def as_question(text: str) -> str:
    """A test docstring or comment as a question-like query: its opening ("Test that",
    "Ensure") dropped, markup cleaned, end punctuation trimmed; "" when too short."""
    q = _TEST_OPENING.sub("", clean_markup(text).strip())
    q = re.sub(r"[\s.:;!]+$", "", q)
    words = q.split()
    if len(words) < MIN_COMMENT_WORDS or len(q) > 300:
        return ""
    return q[0].lower() + q[1:] if q[:1].isupper() and not q[1:2].isupper() else q


def first_comment(code: str) -> str:
    """The first ``#`` comment of a function's body that reads as prose, else ""."""
    for m in _COMMENT.finditer(code):
        text = m.group(1)
        if not _NOT_COMMENT.match(text) and len(text.split()) >= MIN_COMMENT_WORDS:
            return text
    return ""


def code_definitions(spans: Iterable[Span]) -> dict[str, list[Target]]:
    """Non-test code definitions (functions, methods, classes) by plain name."""
    out: dict[str, list[Target]] = {}
    for s in spans:
        if s.category != CODE or s.kind not in ("function", "method", "class") or s.part:
            continue
        if is_test_path(s.path) or not _queries_allowed(s.path) or not s.symbol:
            continue
        out.setdefault(s.symbol, []).append(Target(s.path, s.start_line, s.end_line))
    return out


def resolve(
    names: Sequence[str], defs: Mapping[str, list[Target]], words: set[str] | None = None
) -> list[Target]:
    """The definitions of ``names`` (unambiguous ones, at most ``MAX_TARGETS``); with
    ``words``, only names sharing a content word with them."""
    out: list[Target] = []
    for name in names:
        found = defs.get(name)
        if not found or len(found) > MAX_DEFINITIONS or len(name) < MIN_NAME_CHARS:
            continue
        if name.startswith("__") or (words is not None and not content(name_words(name)) & words):
            continue
        for t in found:
            if t not in out:
                out.append(t)
        if len(out) >= MAX_TARGETS:
            break
    return out[:MAX_TARGETS]


def mine_test_names(
    spans: Sequence[Span],
    project: str,
    limit: int,
    seed: int,
    docstrings: Mapping[str, Mapping[str, str]] | None = None,
) -> list[DocQuery]:
    """``test-name`` queries of one project (see the module's docstring); ``docstrings``:
    per test file, ``docstrings_of_tests`` of its original text."""
    rng = random.Random(f"{seed}:{project}:test-name")
    defs = code_definitions(spans)
    tests = [
        s for s in spans
        if s.category == CODE and s.kind in ("function", "method") and not s.part
        and s.symbol.startswith("test") and is_test_path(s.path)
    ]  # fmt: skip
    tests.sort(key=lambda s: (s.path, s.start_line))
    rng.shuffle(tests)
    out: list[DocQuery] = []
    seen: set[str] = set()
    for s in tests:
        if len(out) >= limit:
            break
        phrase = name_phrase(s.symbol)
        if not phrase:
            continue
        targets = resolve(called_names(s.text), defs, content(phrase.split()))
        if not targets:
            continue
        doc = (docstrings or {}).get(s.path, {}).get(s.symbol, "")
        query = as_question(doc) if doc else ""
        if not query and rng.random() < 0.5:
            query = as_question(first_comment(s.text))
        if not query:
            query = rng.choice(TEST_TEMPLATES).format(words=phrase)
        if query.lower() in seen:
            continue
        seen.add(query.lower())
        out.append(DocQuery(TEST_NAME, query, tuple(targets)))
    return out


def _example_after(lines: Sequence[str], row: int) -> str:
    """The code example that starts within two lines after ``row`` (0-based, in a
    section's text): a fenced block, a ``.. code-block`` / ``::`` literal block (indented),
    or ``>>>`` lines; "" when none does."""
    i = row + 1
    while i < len(lines) and i <= row + 2 and not lines[i].strip():
        i += 1
    if i >= len(lines) or i > row + 2:
        return ""
    head = lines[i].strip()
    if head.startswith(("```", "~~~")):
        block = []
        for line in lines[i + 1 :]:
            if line.strip().startswith(head[:3]):
                break
            block.append(line)
        return "\n".join(block)
    literal = lines[row].rstrip().endswith("::") or head.startswith(".. code")
    if head.startswith(".. code"):
        i += 1
    block = []
    for line in lines[i:]:
        text = line.strip()
        if not text or line[:1] in " \t" or text.startswith((">>>", "...")):
            block.append(line)
        else:
            break
    code = "\n".join(block)
    if literal or ">>>" in code:
        return code
    return ""


def example_sentence_queries(
    spans: Sequence[Span], project: str, limit: int, seed: int
) -> list[DocQuery]:
    """``readme-sentence`` and ``guide-sentence`` queries, ``limit`` of each at most (see
    the module's docstring); one per section."""
    rng = random.Random(f"{seed}:{project}:example-sentence")
    defs = code_definitions(spans)
    secs = sections(spans)
    order = list(range(len(secs)))
    rng.shuffle(order)
    got: dict[str, list[DocQuery]] = {README_SENTENCE: [], GUIDE_SENTENCE: []}
    seen: set[str] = set()
    for i in order:
        span = secs[i].span
        kind = (
            README_SENTENCE
            if span.path.lower().rsplit("/", 1)[-1].startswith("readme")
            else (GUIDE_SENTENCE)
        )
        if len(got[kind]) >= limit:
            if all(len(v) >= limit for v in got.values()):
                break
            continue
        lines = span.text.split("\n")
        section = Target(span.path, span.start_line, secs[i].end_line)
        for para in paragraphs(span):
            row = para.last - span.start_line
            example = _example_after(lines, row)
            if not example:
                continue
            targets = resolve(called_names(example), defs)
            sentences = split_sentences(para)
            if not targets or not sentences:
                continue
            at, n, raw = sentences[-1]
            q = sentence_query(raw)
            if not q or q.lower() in seen:
                continue
            seen.add(q.lower())
            cut = Cut(span.path, para.first, para.last, at, n)
            got[kind].append(DocQuery(kind, q, (section, *targets), cut))
            break
    return got[README_SENTENCE] + got[GUIDE_SENTENCE]


__all__ = [
    "GUIDE_SENTENCE",
    "KINDS",
    "README_SENTENCE",
    "TEST_NAME",
    "called_names",
    "code_definitions",
    "example_sentence_queries",
    "first_comment",
    "name_words",
    "resolve",
    "docstrings_of_tests",
    "mine_test_names",
    "name_phrase",
    "as_question",
]
