"""Doc extraction: sections (Markdown / reStructuredText headings, ``llmc/headings.py``, the
parser doc spans use) and their mentions of code.

A mention is inline code (```Store.files```), a Sphinx role (``:func:`pkg.f```), an autodoc
or mkdocstrings directive (``.. autoclass:: pkg.C``, ``::: pkg.C``), a link target or a bare
repository path. Extraction only records the text; ``resolve.py`` decides what it names.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from llmc.graph.model import Def, FileFacts, Mention
from llmc.headings import Heading, rst_headings, scan_markdown

_INLINE = re.compile(r"(?<!`)(`{1,2})([^`\n]{1,200}?)\1(?!`)")
_ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|obj|exc|data|const|type):`~?!?([^`<>]+?)`"
)
_AUTODOC = re.compile(
    r"^\s*\.\.\s+(?:auto(?:function|class|method|module|data|attribute|exception|"
    r"decorator|property)|(?:py:)?(?:function|class|method|module|exception|data)|"
    r"literalinclude|include)::\s*(\S+)"
)
_MKDOCSTRINGS = re.compile(r"^\s*:::\s+([\w.]+)")
_MD_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_RST_LINK = re.compile(r"`[^`<\n]*<([^>`\n]+)>`_")
_PATH = re.compile(
    r"(?<![\w/.:-])((?:[\w.-]+/)+[\w.-]+\.(?:py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|md|rst|toml|"
    r"json|ya?ml|cfg|ini|txt|scm|sh))(?![\w/])"
)


def _build_sections(heads: list[Heading], n_lines: int) -> list[tuple[Def, int]]:
    """Nest headings into sections with qualified names ``A > B`` and 1-based line ranges
    (from the heading's first row, as the doc span of the section starts)."""
    out: list[tuple[Def, int]] = []
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for idx, h in enumerate(heads):
        level, title, line = h.level, h.title, h.start + 1
        end = n_lines
        for later in heads[idx + 1 :]:
            if later.level <= level:
                end = later.start
                break
        while stack and stack[-1][0] >= level:
            stack.pop()
        title = re.sub(r"\s+", " ", title.replace("`", "")).strip() or "(untitled)"
        qual = " > ".join([s[1] for s in stack] + [title])
        seen[qual] = seen.get(qual, 0) + 1
        if seen[qual] > 1:
            qual = f"{qual} ({seen[qual]})"
        stack.append((level, qual.rsplit(" > ", 1)[-1]))
        out.append((Def(title, qual, "section", line, max(line, end)), level))
    return out


def extract_doc(path: str, text: str) -> FileFacts:
    facts = FileFacts(path=path, lang="doc", category="doc")
    lines = text.splitlines()
    facts.end_line = len(lines)
    rst = PurePosixPath(path).suffix.lower() == ".rst"
    skip: set[int] = set()  # 1-based lines inside fenced code
    if rst:
        heads = rst_headings(lines)
    elif PurePosixPath(path).suffix.lower() == ".txt":
        heads = []
    else:
        heads, fenced = scan_markdown(lines)
        skip = {row + 1 for row in fenced}
    sections = _build_sections(heads, len(lines))
    facts.defs = [d for d, _ in sections]

    def scope_of(line: int) -> str:
        best = ""
        best_len = None
        for d in facts.defs:
            if d.start_line <= line <= d.end_line:
                size = d.end_line - d.start_line
                if best_len is None or size <= best_len:
                    best, best_len = d.qualname, size
        return best

    mentions: list[Mention] = []
    for i, line in enumerate(lines, 1):
        if i in skip or len(line) > 2000:
            continue
        found: list[tuple[str, str]] = []
        m = _AUTODOC.match(line) or _MKDOCSTRINGS.match(line)
        if m:
            kind = "path" if ("include::" in line) else "autodoc"
            found.append((m.group(1), kind))
        for m in _ROLE.finditer(line):
            found.append((m.group(1).strip(), "role"))
        stripped = _ROLE.sub(" ", line)
        for m in _INLINE.finditer(stripped):
            found.append((m.group(2).strip(), "inline"))
        for m in (_RST_LINK if rst else _MD_LINK).finditer(line):
            found.append((m.group(1).strip(), "link"))
        for m in _PATH.finditer((_RST_LINK if rst else _MD_LINK).sub(" ", _INLINE.sub(" ", line))):
            found.append((m.group(1), "path"))
        if found:
            scope = scope_of(i)
            for value, kind in found:
                if value:
                    mentions.append(Mention(scope, value, kind, i))
    facts.mentions = mentions
    return facts


__all__ = ["extract_doc"]
