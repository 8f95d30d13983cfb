"""Generated, minified and translation files: skipped with a reason, like binaries.

A developer searching code does not want prebuilt HTML docs, minified bundles, lock files
or a hundred copies of every UI string (one ``.po`` file per locale) in the results, and
those files dominate the time to a searchable index (SQLAlchemy's sdist: 40 of its 61 MB of
span text were built Sphinx pages and minified JS). Three reasons:

- ``minified``: ``*.min.js`` / ``*.min.css`` and source maps by name; a JS/CSS/JSON file
  whose average line is longer than 110 characters (GitHub linguist's rule). On ~430 real
  JS/CSS/JSON files (the SQLAlchemy and Django sdists, this machine's site-packages and
  /usr/share) hand-written files averaged at most 66 characters a line and minified ones at
  least 125, so 110 sits in the gap. Files under 512 characters are never judged minified:
  a one-line config is not a bundle.
- ``generated``: lock files (``package-lock.json``, ``Cargo.lock``, ``uv.lock``...); files
  under a ``_build/`` directory; Sphinx HTML output (a directory holding ``searchindex.js``
  next to ``_static/``, ``objects.inv`` or ``.buildinfo``: its pages, scripts, styles and
  ``_static``/``_sources``/``_modules``/``_images`` copies, never its ``.rst``/``.py``); HTML
  that names a documentation or site generator (``<meta name="generator">``, Doxygen's
  and javadoc's comments, Sphinx's scripts and footer); a header comment in the first 40
  lines that says the file is generated and not to be edited (``// Code generated ... DO NOT
  EDIT.``, ``@generated``, protoc, Thrift, Cython, pip-compile...); JS/CSS compiled from a
  source that the tree also holds: one of its last two lines is a ``sourceMappingURL``
  comment (linguist's sign of compiled output), and the map's ``sources`` (inline
  ``data:`` maps are decoded; a ``.map`` file in the tree is read) or, when there is no
  readable map, a file of the same name with a source extension (``.ts``, ``.coffee``,
  ``.scss``...) is in the tree. Compiled output whose source is not in the tree is the only
  copy of that code (an npm package's ``lib/`` built by Babel, shipped without ``src/``)
  and is indexed; the map comment does not count toward its line lengths either.
- ``translation``: gettext catalogues (``.po``, ``.pot``, ``.mo``) and XLIFF files. Each
  ``msgid`` repeats a string that is already indexed where the code uses it (the catalogue
  even points there with ``#: path:line``), once per locale, so a query with a UI word in it
  would get pages of catalogue hits; the ``msgstr`` side does not match English queries.
  Django's sdist has 1,272 of them (8.8 MB, a fifth of its bytes).

These are hand-written heuristics: no package on PyPI does this for Python (``enry``, the
go-enry binding, is a 2020 stub that does not build; ``identify`` names file types only).
GitHub linguist's ``lib/linguist/generated.rb`` and ``vendor.yml`` are the reference; the
rules here are a subset of its rules plus Sphinx output and translations.

Cost: path rules need no I/O (the walk); content rules look at the head (first 40 lines,
4 KiB; 8 KiB for HTML), the last two lines (4 KiB for HTML) of the text the indexer has
already read to hash it, and count its newlines, so no file is read twice; only a compiled
file whose map is a separate ``.map`` file in the tree costs one more read (of that map).
The verdict on compiled output is taken when the file is read: deleting its source later
does not bring back an unchanged compiled file until the rules or the file change. ``index.skip_generated`` and
``index.skip_translations`` switch the rules off; a file named literally in
``index.include``, or re-included with a ``!pattern`` in ``index.exclude`` (gitignore and
ripgrep's whitelist syntax), is never skipped by them.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pathspec

from llmc.config import IndexConfig

# Reasons, as counted in the `llmc index` summary.
GENERATED = "generated"
MINIFIED = "minified"
TRANSLATION = "translation"
REASONS = (GENERATED, MINIFIED, TRANSLATION)

# Bump when a rule changes: an index built under other rules (or switches) reads every file
# once more (unchanged text is not re-chunked), so a newly generated file leaves the index
# and a newly wanted one comes back. The indexer keeps ``Detector.policy`` under this key.
RULES_VERSION = 2  # 2: compiled JS/CSS is skipped only when its source is in the tree
SKIP_POLICY_KEY = "index.skip_policy"

MINIFIED_AVG_LINE = 110  # linguist's threshold; measured gap 66..125 (module docstring)
MINIFIED_MIN_CHARS = 512
ONE_LINE_CHARS = 1000  # a line this long holding half the file: a one-line dump
HEAD_LINES = 40
HEAD_CHARS = 4096
HTML_HEAD_CHARS = 8192
HTML_TAIL_CHARS = 4096

_JS_CSS = frozenset({".js", ".mjs", ".cjs", ".css"})
_JSON = frozenset({".json", ".map", ".geojson", ".topojson"})
_HTML = frozenset({".html", ".htm", ".xhtml"})
_TRANSLATION_EXT = frozenset({".po", ".pot", ".mo", ".xlf", ".xliff"})

LOCK_FILES = frozenset(
    {
        "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
        "bun.lock", "bun.lockb", "deno.lock", "cargo.lock", "poetry.lock", "pdm.lock",
        "uv.lock", "pipfile.lock", "pylock.toml", "composer.lock", "gemfile.lock", "go.sum",
        "gopkg.lock", "glide.lock", "mix.lock", "pubspec.lock", "podfile.lock",
        "package.resolved", "flake.lock", "packages.lock.json", "gradle.lockfile",
        "conan.lock", "cabal.project.freeze", ".terraform.lock.hcl", "shrinkwrap.yaml",
        "paket.lock", "cartfile.resolved",
    }
)  # fmt: skip
_PNP = re.compile(r"^\.pnp\.(?:c?js|loader\.mjs)$")  # Yarn Plug'n'Play
_MIN_NAME = re.compile(r"[.-]min\.(?:js|mjs|cjs|css)$")
_MAP_NAME = re.compile(r"\.(?:js|mjs|cjs|css)\.map$")

# Sphinx HTML output: what the builder writes into its output directory.
_SPHINX_DIRS = frozenset(
    {
        "_static",
        "_sources",
        "_modules",
        "_images",
        "_downloads",
        ".doctrees",
        "_sphinx_design_static",
    }
)
_SPHINX_PAGES = frozenset({".html", ".htm"})
_SPHINX_FILES = frozenset({"searchindex.js", "objects.inv", ".buildinfo"})

# Comment lines in a file's head; inside a block comment every line counts.
_LINE_COMMENT = re.compile(r"^\s*(?://|#|--|;|%|\*|REM\b|!)")
_BLOCK_OPEN = (("/*", "*/"), ("<!--", "-->"), ("{-", "-}"), ("(*", "*)"))
_DOCSTRING = (('"""', '"""'), ("'''", "'''"))
_PROLOGUE = re.compile(r"""^(?:<\?(?:php|xml|=)?|["']use strict["'];?$|@file:)""")
_GEN_WORD = r"(?:auto-?generated|automatically\s+generated|machine[- ]generated|generated|autogen)"
_NO_EDIT = (
    r"(?:do\s+not\s+(?:edit|modify|change)|don'?t\s+(?:edit|modify|change)|"
    r"(?:must|should)\s+not\s+be\s+(?:edited|modified|changed)|"
    r"not\s+(?:be\s+)?intended\s+(?:for|to\s+be)\s+(?:manual(?:ly)?\s+)?edit)"
)
_GENERATED_NO_EDIT = re.compile(
    rf"\b{_GEN_WORD}\b.{{0,160}}?\b{_NO_EDIT}|\b{_NO_EDIT}\b.{{0,160}}?\b{_GEN_WORD}\b",
    re.IGNORECASE | re.DOTALL,
)
_AT_GENERATED = re.compile(r"@generated(?![\w-])")
# Generators whose header says who made the file but not "do not edit" (linguist's list).
_KNOWN_GENERATORS = (
    "Generated by CoffeeScript",
    "Generated by PEG.js",
    "parser generated by jison",
    "generated by jison-lex",
    "Generated by the protocol buffer compiler",
    "Generated by the gRPC",
    "Autogenerated by Thrift Compiler",
    "Generated by Cython",
    "This file is automatically generated by Racc",
    "The following code was generated by JFlex",
    "Generated by roxygen2",
    "Generated by Haxe",
    "This file is generated by jOOQ",
    "it is machine generated",
    "autogenerated by go-to-protobuf",
    "autogenerated by pip-compile",
    "autogenerated by uv via",
    "Generated by pkgdown",
    "This file is machine-generated - editing it directly is not advised",  # Julia's Manifest
)

# HTML made by a documentation or site generator (linguist's generated_html?, widened to
# the generators a code repository commits output of).
_META = re.compile(r"<meta\b([^>]*)>", re.IGNORECASE)
_ATTR = re.compile(r"""\b(name|content|value)\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+)""", re.IGNORECASE)
_HTML_GENERATORS = re.compile(
    r"^\s*(?:sphinx|docutils|doxygen|javadoc|mkdocs|hugo|jekyll|gatsby|docusaurus|pdoc|"
    r"pkgdown|jsdoc|typedoc|rustdoc|epydoc|pydoctor|gitbook|vuepress|vitepress|eleventy|"
    r"pelican|hexo|zola|quarto|org\s+mode|j?latex2html|groff|makeinfo|texi2html|ronn|"
    r"mandoc|asciidoctor|nbconvert|dokka|godoc|haddock|yard|rdoc)\b",
    re.IGNORECASE,
)
_HTML_COMMENT_GENERATORS = re.compile(
    r"<!--\s*(?:Generated by (?:Doxygen|javadoc|pkgdown|Haddock)|"
    r"This is an automatically generated file)",
    re.IGNORECASE,
)
_SPHINX_MARKS = re.compile(
    r"""src=["'][^"'{}]*_static/(?:documentation_options|doctools|sphinx_highlight)\.js["']|"""
    r"""(?:Created using|Powered by) <a href=["']https?://(?:www\.)?sphinx-doc\.org""",
    re.IGNORECASE,
)
_SOURCE_MAP_COMMENT = re.compile(r"\s*/[*/][#@] source(?:Mapping)?URL=\s*(\S+?)\s*(?:\*/)?\s*$")
# What JS/CSS is compiled from: a file of the same name with one of these is its source.
_SOURCE_EXTS = (
    ".ts", ".tsx", ".mts", ".cts", ".jsx", ".coffee", ".litcoffee", ".ls", ".vue",
    ".svelte", ".elm", ".res", ".re", ".purs", ".cljs", ".dart", ".civet",
    ".scss", ".sass", ".less", ".styl", ".pcss",
)  # fmt: skip
MAX_MAP_BYTES = 16 * 1024 * 1024  # a .map file read to learn its sources


@dataclass(frozen=True)
class Verdict:
    """Why a file is skipped: one of ``REASONS`` and a line for ``llmc index -v``."""

    reason: str
    detail: str


def _suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def sphinx_output_dirs(names: Iterable[str]) -> set[str]:
    """Directories (repo-relative, ``""`` for the root) that hold Sphinx HTML output: a
    ``searchindex.js`` next to ``_static/``, ``objects.inv`` or ``.buildinfo``."""
    index_dirs: set[str] = set()
    marks: set[str] = set()
    for rel in names:
        parent, _, name = rel.rstrip("/").rpartition("/")
        if name == "searchindex.js":
            index_dirs.add(parent)
        elif name in ("objects.inv", ".buildinfo"):
            marks.add(parent)
        if rel.startswith("_static/"):
            marks.add("")
        elif "/_static/" in rel:
            marks.add(rel.split("/_static/", 1)[0])
    return index_dirs & marks


class Detector:
    """The generated / minified / translation rules under one ``IndexConfig``.

    ``by_path`` needs no I/O (the walker asks it); ``by_content`` looks at text already read
    (the indexer asks it); both return None for a file to index.
    """

    def __init__(self, cfg: IndexConfig, names: Iterable[str] = (), root: Path | None = None):
        """``names``: every path the walk saw (repo-relative; ``dir/`` for a directory not
        walked), so that compiled output can be told from the only copy of its code;
        ``root``: where to read a ``.map`` file that a compiled file points to."""
        self.generated = bool(cfg.skip_generated)
        self.translations = bool(cfg.skip_translations)
        names = list(names) if self.generated else []
        self._outputs = sphinx_output_dirs(names) if self.generated else set()
        self._tree = frozenset(n for n in names if not n.endswith("/"))
        self._root = root
        self._stems: dict[str, list[str]] | None = None
        literal = [p for p in cfg.include if _is_literal(p)]
        keep = [p[1:] for p in cfg.exclude if p.startswith("!") and len(p) > 1]
        self._literal = {p.strip("/") for p in literal}
        self._keep = pathspec.GitIgnoreSpec.from_lines(keep) if keep else None
        self.policy = (
            f"v{RULES_VERSION};generated={int(self.generated)};"
            f"translations={int(self.translations)};keep={sorted(self._literal)}{sorted(keep)}"
        )

    @property
    def active(self) -> bool:
        return self.generated or self.translations

    def exempt(self, rel: str) -> bool:
        """Named literally in ``index.include``, or re-included by ``!pattern`` in
        ``index.exclude``: the user asked for this file, so no heuristic skips it."""
        if rel in self._literal or rel.rsplit("/", 1)[-1] in self._literal:
            return True
        return self._keep is not None and self._keep.match_file(rel)

    def by_path(self, rel: str) -> Verdict | None:
        if not self.active or self.exempt(rel):
            return None
        parent, _, name = rel.rpartition("/")
        low = name.lower()
        ext = _suffix(low)
        if self.translations and ext in _TRANSLATION_EXT:
            return Verdict(TRANSLATION, f"{ext} translation catalogue")
        if not self.generated:
            return None
        if low in LOCK_FILES or _PNP.match(low):
            return Verdict(GENERATED, "lock file")
        if _MIN_NAME.search(low):
            return Verdict(MINIFIED, "named *.min" + ext)
        if _MAP_NAME.search(low):
            return Verdict(MINIFIED, "source map")
        parts = rel.split("/")
        if "_build" in parts[:-1]:
            return Verdict(GENERATED, "under a _build/ output directory (Sphinx, dune, mix)")
        root = self._output_root(parent)
        if root is not None:
            inner = (rel[len(root) + 1 :] if root else rel).split("/")
            if "_templates" not in inner and (
                inner[0] in _SPHINX_DIRS
                or ext in _SPHINX_PAGES
                or (len(inner) == 1 and low in _SPHINX_FILES)
            ):
                return Verdict(GENERATED, f"Sphinx HTML output in {root or '.'}/")
        return None

    def _output_root(self, parent: str) -> str | None:
        if not self._outputs:
            return None
        d = parent
        while True:
            if d in self._outputs:
                return d
            if not d:
                return None
            d = d.rpartition("/")[0]

    def _source_in_tree(self, rel: str, map_url: str) -> str | None:
        """A file of the tree that ``rel`` (ending with a source map comment) was compiled
        from: one of its map's ``sources``, else a file of the same name with a source
        extension; None when the tree does not hold its source."""
        found = _map_sources(map_url, posixpath.dirname(rel), self._read_map)
        if found is not None:
            map_dir, source_root, sources = found
            for src in sources:
                for path in _source_paths(map_dir, source_root, src):
                    if path != rel and path in self._tree:
                        return path
            if sources:
                return None  # the map names its sources and none is here
        return self._same_name_source(rel)

    def _read_map(self, rel: str) -> bytes | None:
        if self._root is None or rel not in self._tree:
            return None
        from llmc.safe_read import read_inside

        try:
            data = read_inside(self._root, rel, MAX_MAP_BYTES)  # never through a symlink out
        except OSError:
            return None
        return None if len(data) > MAX_MAP_BYTES else data

    def _same_name_source(self, rel: str) -> str | None:
        if self._stems is None:
            self._stems = {}
            for name in self._tree:
                stem, ext = posixpath.splitext(posixpath.basename(name))
                if ext.lower() in _SOURCE_EXTS:
                    self._stems.setdefault(stem, []).append(name)
        stem = posixpath.splitext(posixpath.basename(rel))[0]
        candidates = self._stems.get(stem)
        return min(candidates) if candidates else None

    def by_content(self, rel: str, text: str) -> Verdict | None:
        """Judge ``text`` (the whole file, already in memory) from its head, its tail and
        its newline count."""
        if not self.generated or self.exempt(rel):
            return None
        ext = _suffix(rel)
        if ext == ".map" and text.lstrip().startswith('{"version":'):
            return Verdict(MINIFIED, "source map")
        if (ext in _JS_CSS or ext in _JSON) and len(text) >= MINIFIED_MIN_CHARS:
            body, map_url = _split_source_map(text) if ext in _JS_CSS else (text, None)
            why = _minified(ext, body) if len(body) >= MINIFIED_MIN_CHARS else None
            if why:
                return Verdict(MINIFIED, why)
            if map_url is not None:
                source = self._source_in_tree(rel, map_url)
                if source is not None:
                    return Verdict(GENERATED, f"compiled from {source} (sourceMappingURL)")
        if ext in _HTML:
            why = _html_generator(text)
            if why:
                return Verdict(GENERATED, why)
        why = _generated_header(text)
        if why:
            return Verdict(GENERATED, why)
        return None


def _split_source_map(text: str) -> tuple[str, str | None]:
    """``text`` without a source map comment in its last two lines, and the comment's URL
    (None when there is none). Only the file's end is looked at, so an inline ``data:``
    map of any length costs one reverse scan."""
    end = len(text.rstrip())
    cut = end
    for _ in range(2):
        start = text.rfind("\n", 0, cut) + 1
        m = _SOURCE_MAP_COMMENT.match(text, start, cut)
        if m is not None:
            return text[:start], m.group(1)
        if start == 0:
            break
        cut = start - 1
    return text, None


INLINE_MAP_PLACEHOLDER = "data:…"  # what an inline source map's payload becomes in the index


def drop_inline_source_map(rel: str, text: str) -> str:
    """``text`` with the payload of an inline ``data:`` source map comment (in its last two
    lines, JS/CSS only) replaced by ``data:…``. The map is base64 noise to BM25 and the
    embedder (one Babel-built file's map was 71-82% of its characters) and to a reader of a
    snippet; the comment line stays, so every line keeps its number."""
    if _suffix(rel) not in _JS_CSS or "URL=data:" not in text:
        return text
    body, url = _split_source_map(text)
    if url is None or not url.startswith("data:"):
        return text
    at = text.find(url, len(body))
    return text[:at] + INLINE_MAP_PLACEHOLDER + text[at + len(url) :]


def _map_sources(
    url: str, folder: str, read: Callable[[str], bytes | None]
) -> tuple[str, str, list[str]] | None:
    """(the folder the map lies in, its ``sourceRoot``, its ``sources``), for an inline
    ``data:`` map or a ``.map`` file of the tree; None when no map can be read."""
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        try:
            raw = (
                base64.b64decode(payload)
                if header.endswith(";base64")
                else unquote(payload).encode()
            )
        except (ValueError, binascii.Error):
            return None
        map_dir = folder
    elif "://" in url or url.startswith("/"):
        return None
    else:
        map_rel = _inside(posixpath.join(folder, unquote(url.split("?", 1)[0].split("#", 1)[0])))
        raw = read(map_rel) if map_rel is not None else None
        if raw is None:
            return None
        map_dir = posixpath.dirname(map_rel or "")
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("sources"), list):
        return None
    root = doc.get("sourceRoot")
    sources = [s for s in doc["sources"] if isinstance(s, str)]
    return map_dir, root if isinstance(root, str) else "", sources


def _source_paths(map_dir: str, source_root: str, source: str) -> list[str]:
    """Where ``source`` (an entry of a map in ``map_dir``) may lie in the tree: relative to
    the map and its ``sourceRoot``; a bundler URL (``webpack://pkg/./src/a.ts``) without
    its scheme and namespace, from the top of the tree or from the map."""
    if "://" not in source:
        path = _inside(posixpath.join(map_dir, source_root, source))
        return [path] if path is not None else []
    rest = source.split("://", 1)[1]
    rest = rest.split("/", 1)[1] if "/" in rest else rest
    found = (_inside(rest), _inside(posixpath.join(map_dir, rest)))
    return [p for p in found if p is not None]


def _inside(path: str) -> str | None:
    """``path`` normalised, or None when it leaves the tree."""
    path = posixpath.normpath(path)
    if path == ".." or path.startswith("../") or path.startswith("/"):
        return None
    return path


def _is_literal(pattern: str) -> bool:
    """An include pattern that names one file: no wildcard, no negation, not a directory."""
    return bool(pattern) and not pattern.endswith("/") and not any(c in pattern for c in "*?[!")


def _average_line(text: str) -> float:
    newlines = text.count("\n")
    lines = newlines + (0 if text.endswith("\n") else 1)
    return (len(text) - newlines) / max(1, lines)


def _minified(ext: str, text: str) -> str | None:
    """Why ``text`` (JS, CSS or JSON of at least ``MINIFIED_MIN_CHARS``) is minified."""
    if ext in _JS_CSS:
        avg = _average_line(text)
        if avg > MINIFIED_AVG_LINE:
            return f"average line {avg:.0f} chars > {MINIFIED_AVG_LINE}"
    longest = max(map(len, text.split("\n")))
    if longest >= ONE_LINE_CHARS and 2 * longest >= len(text):
        return f"one line holds {100 * longest // len(text)}% of the file ({longest:,} chars)"
    return None


def _header_blocks(head: str) -> list[list[str]]:
    """The comment blocks that open ``head``, each as its stripped lines: line comments,
    block comments and a leading docstring, up to the first line of code (a ``#!``, an
    ``<?php``/``<?xml`` or a ``"use strict"`` line before them is passed over). As in Go's
    rule, a marker counts only before the code: a generator script that holds a header
    template in a string is not generated itself."""
    blocks: list[list[str]] = []
    current: list[str] = []
    closer: str | None = None
    for line in head.splitlines()[:HEAD_LINES]:
        stripped = line.strip()
        if closer is not None:
            current.append(stripped)
            if closer in stripped:
                closer = None
            continue
        pair = next((oc for oc in (*_BLOCK_OPEN, *_DOCSTRING) if stripped.startswith(oc[0])), None)
        if pair is not None:
            current.append(stripped)
            if pair[1] not in stripped[len(pair[0]) :]:
                closer = pair[1]
            continue
        if _LINE_COMMENT.match(line):
            current.append(stripped)
            continue
        if current:
            blocks.append(current)
            current = []
        if stripped and not _PROLOGUE.match(stripped):
            break
    if current:
        blocks.append(current)
    return blocks


def _generated_header(text: str) -> str | None:
    """Why the head's comments mark the file generated, or None."""
    head = text[:HEAD_CHARS]
    if "enerat" not in head and "ENERAT" not in head:
        return None  # the common case: one substring test, no line splitting
    for lines in _header_blocks(head):
        block = _unquoted(" ".join(lines))
        low = block.lower()
        if (
            _AT_GENERATED.search(block)
            or _GENERATED_NO_EDIT.search(block)
            or any(phrase.lower() in low for phrase in _KNOWN_GENERATORS)
        ):
            line = next((x for x in lines if "generat" in x.lower()), lines[0])
            return f"header: {_shorten(line)}"
    return None


_QUOTED = re.compile(r"(`+)[^`]+\1|\"[^\"]*\"|(?<!\w)'[^'\n]*'(?!\w)")


def _unquoted(block: str) -> str:
    """``block`` without its quoted spans: a docstring that quotes ``// Code generated ...
    DO NOT EDIT.`` describes the convention; a header that follows it has it unquoted (a
    quoted command or path inside, as in stringer's, goes and the rest still matches)."""
    return _QUOTED.sub(" ", block.replace('"""', " ").replace("'''", " "))


def _html_generator(text: str) -> str | None:
    head = text[:HTML_HEAD_CHARS]
    for m in _META.finditer(head):
        attrs = {k.lower(): v.strip("\"'") for k, v in _ATTR.findall(m.group(1))}
        if attrs.get("name", "").lower() != "generator":
            continue
        value = attrs.get("content") or attrs.get("value") or ""
        if _HTML_GENERATORS.match(value):
            return f"HTML generated by {_shorten(value.split(':')[0])}"
    m = _HTML_COMMENT_GENERATORS.search(head)
    if m:
        return f"HTML: {_shorten(m.group(0).lstrip('<!- '))}"
    if _SPHINX_MARKS.search(head) or _SPHINX_MARKS.search(text[-HTML_TAIL_CHARS:]):
        return "HTML generated by Sphinx"
    return None


def _shorten(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


__all__ = [
    "GENERATED",
    "MINIFIED",
    "REASONS",
    "SKIP_POLICY_KEY",
    "TRANSLATION",
    "Detector",
    "Verdict",
    "drop_inline_source_map",
    "sphinx_output_dirs",
]
