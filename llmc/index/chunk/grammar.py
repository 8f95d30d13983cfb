"""The grammars the code chunker parses with, and its per-language queries.

One tree-sitter parser per language and thread (``parse``); the definitions query of a
language, ``queries/<lang>.scm`` (``definitions_query``); its comment node kinds and their
query; and the combined query that finds definitions, comments and another query's
matches (the graph's tags) in one walk of the tree (``defs_query``). Guards first: a file
nested deeper than a grammar's scanner survives (``too_deep_for_grammar``) is never handed
to it. ``chunk.code`` turns what these find into spans.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.languages import grammar_name

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Tree

log = logging.getLogger(__name__)

QUERY_DIR = Path(__file__).parent.parent / "queries"  # llmc/index/queries/*.scm
_local = threading.local()


# tree-sitter-yaml's scanner crashes the process (SIGSEGV, not an exception) on blocks
# nested some hundreds deep: measured, block mappings or sequences 300 levels deep crash it,
# 250 do not (its indent stack outgrows the scanner's 1 KB state buffer). tomlkit's TOML
# test suite has a 2 KB "- - - - ..." file and a 1 MB mapping nested 1,000 deep. Such a file
# is data, not something to find definitions in: it is cut into line windows.
_YAML_MAX_DEPTH = 128
# Compact block indicators at a line's start open a level each: "- - x" (sequences),
# "? ? x" (complex keys) and ": : x" (their values); 300 of any on one line crash it too.
_YAML_COMPACT = re.compile(r"(?:[-?:][ \t]+)+")


def yaml_too_deep(text: str, limit: int = _YAML_MAX_DEPTH) -> bool:
    """True when the YAML's block nesting (indentation levels, plus the compact ``- - x``,
    ``? ? x`` and ``: : x`` indicators that open a level each on one line) exceeds
    ``limit``."""
    stack: list[int] = []
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        indent = len(line) - len(body)
        while stack and stack[-1] >= indent:
            stack.pop()
        stack.append(indent)
        compact = _YAML_COMPACT.match(body)
        opened = len(compact.group().split()) if compact else 0
        if len(stack) + opened > limit:
            return True
    return False


# Other grammars whose external scanners crash on deep nesting, found by feeding every
# grammar llmc parses pathological texts (3,000 levels of brackets, braces, tags, indents,
# string interpolation) in a child process: Perl segfaults at 80-90 nested interpolations
# ("${"${"... ), Kotlin aborts between 1,000 and 3,000. Both nest through braces; a file
# whose braces nest deeper than this (no hand-written code does) is cut into windows.
_BRACE_LIMITS = {"perl": 48, "kotlin": 400}


def braces_too_deep(text: str, limit: int) -> bool:
    """True when ``{`` nests deeper than ``limit`` anywhere (strings and comments count:
    the crashes are in string interpolation)."""
    if text.count("{") <= limit:
        return False
    depth = 0
    for ch in re.findall(r"[{}]", text):
        depth = depth + 1 if ch == "{" else max(0, depth - 1)
        if depth > limit:
            return True
    return False


def too_deep_for_grammar(lang: str, text: str) -> bool:
    """A file whose nesting is known to crash ``lang``'s grammar (SIGSEGV, not an error)."""
    if lang == "yaml":
        return yaml_too_deep(text)
    limit = _BRACE_LIMITS.get(lang)
    return limit is not None and braces_too_deep(text, limit)


@cache
def _language(lang: str) -> Any:
    import tree_sitter_language_pack as tslp

    return tslp.get_language(grammar_name(lang))  # type: ignore[arg-type]


def parse(lang: str, text: str) -> tuple[Tree, bytes]:
    import tree_sitter

    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(lang)
    if parser is None:
        parser = parsers[lang] = tree_sitter.Parser(_language(lang))
    src = text.encode("utf-8", "surrogatepass")
    return parser.parse(src), src


@cache
def definitions_query(lang: str) -> Any:
    """The compiled definitions query for ``lang``, or None when it has no .scm file."""
    path = QUERY_DIR / f"{lang}.scm"
    if not path.is_file():
        return None
    import tree_sitter

    try:
        return tree_sitter.Query(_language(lang), path.read_text(encoding="utf-8"))
    except Exception as e:
        log.warning("%s: bad tree-sitter query, using top-level blocks: %s", path, e)
        return None


@cache
def comment_kinds(lang: str) -> tuple[str, ...]:
    """The grammar's comment node kinds that a query can name."""
    import tree_sitter

    language = _language(lang)
    kinds = set()
    for i in range(language.node_kind_count):
        name = language.node_kind_for_id(i) or ""
        if not (language.node_kind_is_named(i) and language.node_kind_is_visible(i)):
            continue
        if (name == "comment" or name.endswith("_comment")) and not name.startswith("keyword"):
            kinds.add(name)
    good = []
    for kind in sorted(kinds):
        try:
            tree_sitter.Query(language, f"({kind}) @c")
            good.append(kind)
        except Exception:
            continue
    return tuple(good)


def comment_pattern(lang: str, capture: str) -> str:
    return "[" + " ".join(f"({k})" for k in comment_kinds(lang)) + "] @" + capture


@cache
def comment_query(lang: str) -> Any:
    if not comment_kinds(lang):
        return None
    import tree_sitter

    return tree_sitter.Query(_language(lang), comment_pattern(lang, "c"))


COMMENT = "llmc.comment"  # the comment capture of ``defs_query``


@cache
def defs_query(lang: str, also: str = "") -> tuple[Any, int] | None:
    """(``also``'s patterns, then ``lang``'s definitions query, then the comment pattern, in
    one query; how many patterns ``also`` has), so that one walk of the tree finds them
    all: each query walks the whole tree, which costs more than matching these few more
    patterns. None when there is no definitions query or they do not compile together
    (they then run apart). Appended patterns do not change the order in which the ones
    before them match, and the ones after keep their order among themselves."""
    path = QUERY_DIR / f"{lang}.scm"
    if definitions_query(lang) is None or not comment_kinds(lang):
        return None
    import tree_sitter

    source = path.read_text(encoding="utf-8") + "\n" + comment_pattern(lang, COMMENT)
    try:
        query = tree_sitter.Query(_language(lang), f"{also}\n{source}\n")
    except Exception as e:  # noqa: BLE001 - the queries apart still work
        log.debug("%s: definitions, comments and tags do not combine (%s)", lang, e)
        return None
    end = len(also.encode("utf-8"))  # ``also``'s patterns are the ones that start in it
    first = sum(1 for i in range(query.pattern_count) if query.start_byte_for_pattern(i) < end)
    return query, first


__all__ = [
    "COMMENT",
    "QUERY_DIR",
    "braces_too_deep",
    "comment_query",
    "defs_query",
    "definitions_query",
    "parse",
    "too_deep_for_grammar",
    "yaml_too_deep",
]
