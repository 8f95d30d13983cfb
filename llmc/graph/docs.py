"""Doc extraction: sections (Markdown / reStructuredText headings) and their mentions of code.

A mention is inline code (```Store.files```), a Sphinx role (``:func:`pkg.f```), an autodoc
or mkdocstrings directive (``.. autoclass:: pkg.C``, ``::: pkg.C``), a link target or a bare
repository path. Extraction only records the text; ``resolve.py`` decides what it names.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from llmc.graph.model import Def, FileFacts, Mention

_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

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


def _sections_markdown(lines: list[str]) -> tuple[list[tuple[int, str, int]], set[int]]:
    """Headings as (level, title, line) and the set of lines inside fenced code."""
    heads: list[tuple[int, str, int]] = []
    fenced: set[int] = set()
    fence = ""
    for i, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if fence:
            fenced.add(i)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            continue
        if m:
            fence = m.group(1)
            fenced.add(i)
            continue
        atx = _ATX.match(line)
        if atx:
            heads.append((len(atx.group(1)), atx.group(2).strip(), i))
            continue
        if (
            i >= 2
            and _SETEXT.match(line)
            and lines[i - 2].strip()
            and (i - 1) not in fenced
            and not _ATX.match(lines[i - 2])
            and not (heads and heads[-1][2] == i - 1)
        ):
            heads.append((1 if line.strip()[0] == "=" else 2, lines[i - 2].strip(), i - 1))
    return heads, fenced


def _sections_rst(lines: list[str]) -> list[tuple[int, str, int]]:
    heads: list[tuple[int, str, int]] = []
    styles: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines) - 1:
        title, under = lines[i], lines[i + 1]
        over = i > 0 and bool(_RST_UNDERLINE.match(lines[i - 1]))
        if (
            title.strip()
            and not _RST_UNDERLINE.match(title)
            and _RST_UNDERLINE.match(under)
            and len(under.rstrip()) >= len(title.rstrip())
        ):
            style = (under.strip()[0], over)
            if style not in styles:
                styles.append(style)
            heads.append((styles.index(style) + 1, title.strip(), i + 1))
            i += 2
            continue
        i += 1
    return heads


def _build_sections(heads: list[tuple[int, str, int]], n_lines: int) -> list[tuple[Def, int]]:
    """Nest headings into sections with qualified names ``A > B`` and line ranges."""
    out: list[tuple[Def, int]] = []
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for idx, (level, title, line) in enumerate(heads):
        end = n_lines
        for level2, _, line2 in heads[idx + 1 :]:
            if level2 <= level:
                end = line2 - 1
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
    if rst:
        heads, skip = _sections_rst(lines), set()
    elif PurePosixPath(path).suffix.lower() == ".txt":
        heads, skip = [], set()
    else:
        heads, skip = _sections_markdown(lines)
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
