"""Task (a) of the protocol: a docstring's or JSDoc's summary → the function it documents.

Queries come from the original project; they are searched over the stripped corpus
(``corpus.py``), where that documentation is gone. For each documented function or method:

- Python: the first sentence of the docstring, cleaned and filtered as ``llmc.docstrings``
  mines its code queries (``code_query``); the definition must keep three non-blank lines
  without its docstring;
- JavaScript/TypeScript: the JSDoc description (the text before the first ``@tag``;
  ``{@link X}`` becomes ``X``), first sentence, same filter; the line after the block
  must start a function (declaration, method, ``x.y = function``, arrow function).

The judgment is grade 3 at the definition: its ``symbol`` (the qualified name llmc's
chunker gives it; the runner anchors it to the stripped index's lines) and, for
JavaScript, whose lines the stripping keeps, its line range too. Intent ``code``. A query
text found twice in a project is dropped (it would have two right answers). No queries
come from tests, changelogs, vendored code, build output, ``.pyi`` or ``.d.ts`` files,
top-level ``docs/``, ``examples/`` and ``benchmarks/``, hidden directories, ``noxfile.py``
and ``setup.py``.
At most ``max_queries`` per project are kept, sampled with a seed derived from the
project's name, and written next to the corpus so a run can be repeated exactly.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lab.protocol.corpus import JS_SUFFIXES, is_build_output, source_files
from llmc.eval.queries import EvalQuery, Judgment

log = logging.getLogger(__name__)

TASK = "docstring"
TASK_VERSION = "1"
_VENDORED = re.compile(r"(?i)(^|/)(_?vendor(ed)?|third_party|extern(al)?|node_modules)(/|$)")
_NOT_LIBRARY = re.compile(
    r"(?i)^(docs?|examples?|benchmarks?)/|^(noxfile|setup|fabfile)\.py$|(^|/)\."
)
_JSDOC_AT = re.compile(r"(?m)^[ \t]*/\*\*(?!/)([\s\S]*?)\*/")
_LINK = re.compile(r"\{@(?:link|linkcode|linkplain)\s+([^}\s|]+)(?:[\s|][^}]*)?\}")
_KEYWORDS = frozenset("if for while switch catch return function with else do typeof new".split())
_JS_FUNCTION = [
    re.compile(r"^\s*(export\s+)?(default\s+)?(async\s+)?function\b"),
    re.compile(r"^\s*[\w$.\[\]'\"]+\s*=\s*(async\s+)?function\b"),
    re.compile(r"^\s*(export\s+)?(const|let|var)\s+[\w$]+\s*=\s*(async\s+)?function\b"),
    re.compile(
        r"^\s*(export\s+)?((const|let|var)\s+)?[\w$.]+\s*=\s*(async\s*)?"
        r"(\([^)]*\)|[\w$]+)\s*(:\s*[^=]+)?=>"
    ),
    re.compile(r"^\s*[\w$]+\s*:\s*(async\s+)?function\b"),
]
_JS_METHOD = re.compile(
    r"^\s*((public|private|protected|static|async|override|get|set)\s+)*[#\w$]+\s*(<[^>]*>)?\("
)


@dataclass(frozen=True)
class Documented:
    """A documented definition of the original project and the query it gives."""

    path: str
    symbol: str  # qualified name (the chunker's), "" when the chunker has none
    start_line: int  # the definition's lines in the original (JavaScript: also the corpus)
    end_line: int
    query: str


def query_path_ok(path: str, top_dirs: frozenset[str]) -> bool:
    """Whether a file may give queries: not a test, changelog, vendored, build output,
    stub or declaration file, nor from a top-level docs/, examples/ or benchmarks/, a hidden
    directory, or noxfile.py / setup.py."""
    from llmc.docstrings import _queries_allowed

    low = path.lower()
    if low.endswith((".pyi", ".d.ts", ".d.mts", ".d.cts")):
        return False
    if is_build_output(path, top_dirs) or _VENDORED.search(path) or _NOT_LIBRARY.search(path):
        return False
    if re.search(r"(^|/)(__tests__|spec|specs|test|tests)(/|$)|\.(test|spec)\.[cm]?[jt]sx?$", low):
        return False
    return _queries_allowed(path)


def jsdoc_description(block: str) -> str:
    """The description of a JSDoc block's inner text: the lines before the first ``@tag``,
    leading ``*`` removed, ``{@link X}`` as ``X``."""
    lines = []
    for raw in block.split("\n"):
        line = re.sub(r"^\s*\*+ ?", "", raw).rstrip()
        if line.lstrip().startswith("@"):
            break
        lines.append(line)
    return _LINK.sub(lambda m: m.group(1), "\n".join(lines)).strip()


def looks_like_js_function(line: str) -> bool:
    """Whether a source line starts a function: a declaration, ``x.y = function``, an arrow
    function bound to a name, an object or class method."""
    if any(p.match(line) for p in _JS_FUNCTION):
        return True
    m = _JS_METHOD.match(line)
    if not m:
        return False
    name = re.sub(r"^\s*((public|private|protected|static|async|override|get|set)\s+)*", "", line)
    name = re.split(r"[\s(<]", name, maxsplit=1)[0]
    return name not in _KEYWORDS and not line.rstrip().endswith(";")


def _substantial(code: str) -> bool:
    lines = [ln for ln in code.split("\n") if ln.strip() and not ln.strip().startswith("#")]
    return len(lines) >= 3


def python_documented(path: str, text: str) -> list[Documented]:
    """Documented functions and methods of one Python file, with their queries."""
    from llmc.config import IndexConfig
    from llmc.docstrings import code_query, strip_docstrings
    from llmc.index.chunk import chunk_file

    out = []
    for span in chunk_file(path, text, "python", "code", IndexConfig()):
        query = code_query(span)
        if query and _substantial(strip_docstrings(span.text)):
            symbol = span.qualname or span.symbol
            out.append(Documented(path, symbol, span.start_line, span.end_line, query))
    return out


def js_documented(path: str, text: str, lang: str) -> list[Documented]:
    """Functions and methods of one JavaScript/TypeScript file that follow a JSDoc block."""
    from llmc.config import IndexConfig
    from llmc.docstrings import MIN_CODE_WORDS, _good_query, first_sentence
    from llmc.index.chunk import chunk_file

    lines = text.split("\n")
    spans = [
        s
        for s in chunk_file(path, text, lang, "code", IndexConfig())
        if s.kind in ("function", "method") and s.part == 0
    ]
    out = []
    for m in _JSDOC_AT.finditer(text):
        block_start = text.count("\n", 0, m.start()) + 1
        block_end = text.count("\n", 0, m.end()) + 1
        after = text[m.end() :].split("\n", 1)[0].strip()
        def_line = block_end if after and not after.startswith(("//", "/*")) else 0
        if not def_line:
            def_line = next((i + 1 for i in range(block_end, len(lines)) if lines[i].strip()), 0)
        if not def_line or not looks_like_js_function(lines[def_line - 1]):
            continue
        query = first_sentence(jsdoc_description(m.group(1)))
        if not _good_query(query, MIN_CODE_WORDS):
            continue
        span = next((s for s in spans if s.start_line in (block_start, def_line)), None)
        if span is not None:
            body = "\n".join(lines[def_line - 1 : span.end_line])
            if not _substantial(body):
                continue
            out.append(
                Documented(path, span.qualname or span.symbol, def_line, span.end_line, query)
            )
        else:
            out.append(Documented(path, "", def_line, def_line, query))
    return out


def documented(root: Path) -> list[Documented]:
    """Every documented definition of the project at ``root`` that gives a query, in file
    order; query texts that occur more than once are dropped."""
    from llmc.index.walk import read_text
    from llmc.languages import detect_language

    top_dirs = frozenset(p.name for p in root.iterdir() if p.is_dir())
    found: list[Documented] = []
    for path in source_files(root):
        if not query_path_ok(path, top_dirs):
            continue
        lang, _category = detect_language(path)
        if lang == "python" and path.endswith(".py"):
            kind = "python"
        elif path.endswith(JS_SUFFIXES) and lang in ("javascript", "typescript", "tsx"):
            kind = "js"
        else:
            continue
        ft = read_text(root, path)
        if ft.text is None:
            continue
        if kind == "python":
            found.extend(python_documented(path, ft.text))
        else:
            found.extend(js_documented(path, ft.text, lang))
    counts = Counter(d.query.lower() for d in found)
    return [d for d in found if counts[d.query.lower()] == 1]


def to_query(d: Documented, index: int, project: str) -> EvalQuery:
    js = PurePosixPath(d.path).suffix in JS_SUFFIXES
    judgment = Judgment(
        path=d.path,
        grade=3,
        start_line=d.start_line if js or not d.symbol else None,
        end_line=d.end_line if js or not d.symbol else None,
        symbol=d.symbol,
    )
    where = d.symbol or f"line {d.start_line}"
    return EvalQuery(
        query=d.query,
        intent="code",
        relevant=(judgment,),
        id=f"{project}-{TASK}-{index}",
        note=f"docstring of {d.path}: {where}",
    )


def sample(items: list[Documented], max_queries: int, seed: int, project: str) -> list[Documented]:
    """At most ``max_queries`` of ``items``, drawn with a seed of (``seed``, project), in
    file order."""
    if max_queries <= 0 or len(items) <= max_queries:
        return list(items)
    rng = random.Random(f"{seed}:{project}")
    keep = sorted(rng.sample(range(len(items)), max_queries))
    return [items[i] for i in keep]


def docstring_queries(
    original: Path, dest_dir: Path, project: str, max_queries: int = 60, seed: int = 0
) -> tuple[list[EvalQuery], Path]:
    """The task's queries of a project (``original``: its unpacked archive), read from the
    cached JSONL in ``dest_dir`` when there, else generated and written there."""
    from llmc.eval.queries import load_queries, write_eval_queries

    path = dest_dir / f"{TASK}-v{TASK_VERSION}-n{max_queries}-s{seed}.jsonl"
    if path.is_file():
        return load_queries(path), path
    found = documented(original)
    chosen = sample(found, max_queries, seed, project)
    queries = [to_query(d, i, project) for i, d in enumerate(chosen)]
    write_eval_queries(queries, path)
    log.info("%s: %d documented definitions, %d queries kept", project, len(found), len(queries))
    return load_queries(path), path


__all__ = [
    "TASK",
    "Documented",
    "docstring_queries",
    "documented",
    "js_documented",
    "jsdoc_description",
    "looks_like_js_function",
    "python_documented",
    "query_path_ok",
    "sample",
]
