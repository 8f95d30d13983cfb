"""Which language a file is written in, and whether tree-sitter can parse it.

``detect_language(path, first_line)`` returns ``(lang, category)``:

- ``(lang, CODE)`` for source, config and markup languages (``"python"``, ``"yaml"``...);
- ``(lang, DOC)`` for prose: ``"markdown"``, ``"rst"`` and ``"text"`` (``.txt`` files and
  extension-less ``README``/``CHANGELOG``/``LICENSE``... files);
- ``(None, None)`` when the file type is unknown. The caller decides whether to index it;
  if it does, ``chunk_file`` cuts it into fixed line windows (span lang ``"text"``,
  category CODE).

Extensions win; an extension-less file is recognised by its name (``Makefile``,
``Dockerfile``, ``README``) or by a ``#!`` shebang in ``first_line``.

``grammar_name(lang)`` is the tree-sitter-language-pack name of a lang (or None when llmc
never parses that lang with tree-sitter); ``has_grammar(lang)`` says whether that grammar
actually loads here. It is probed once per lang, lazily, and cached.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import PurePosixPath

from llmc.types import CODE, DOC

log = logging.getLogger(__name__)

# extension (lower case, with dot) -> lang
_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp",
    ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby",
    ".php": "php",
    ".kt": "kotlin", ".kts": "kotlin",
    ".swift": "swift",
    ".scala": "scala", ".sc": "scala",
    ".lua": "lua",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash",
    ".sql": "sql",
    ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml",
    ".json": "json", ".jsonc": "json",
    ".html": "html", ".htm": "html",
    ".css": "css",
    ".scss": "scss",
    ".dart": "dart",
    ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hrl": "erlang",
    ".hs": "haskell",
    ".ml": "ocaml", ".mli": "ocaml_interface",
    ".jl": "julia",
    ".r": "r",
    ".pl": "perl", ".pm": "perl",
    ".zig": "zig",
    ".nim": "nim",
    ".clj": "clojure", ".cljs": "clojure", ".cljc": "clojure",
    ".el": "elisp",
    ".vue": "vue",
    ".svelte": "svelte",
    ".proto": "proto",
    ".graphql": "graphql", ".gql": "graphql",
    ".tf": "hcl", ".hcl": "hcl",
    ".cmake": "cmake",
    ".mk": "make",
    ".xml": "xml",
    ".ini": "ini", ".cfg": "ini",
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
    ".rst": "rst", ".rest": "rst",
    ".txt": "text", ".text": "text",
}  # fmt: skip

# Exact file names (lower case) that say more than their extension.
_FILENAMES: dict[str, str] = {
    "cmakelists.txt": "cmake",
    "makefile": "make", "gnumakefile": "make",
    "dockerfile": "dockerfile", "containerfile": "dockerfile",
    "gemfile": "ruby", "rakefile": "ruby", "guardfile": "ruby", "podfile": "ruby",
    "vagrantfile": "ruby",
    ".bashrc": "bash", ".bash_profile": "bash", ".profile": "bash", ".zshrc": "bash",
    "build": "starlark", "build.bazel": "starlark", "workspace": "starlark",
    "pipfile": "toml",
}  # fmt: skip

# Extension-less prose files.
_TEXT_NAMES = frozenset(
    {
        "readme", "changelog", "changes", "history", "news", "license", "licence",
        "copying", "authors", "contributors", "contributing", "notice", "todo", "install",
        "maintainers", "codeowners", "version",
    }
)  # fmt: skip

DOC_LANGS = frozenset({"markdown", "rst", "text"})

# Shebang interpreter -> lang
_INTERPRETERS: dict[str, str] = {
    "python": "python", "python2": "python", "python3": "python", "pypy": "python",
    "pypy3": "python",
    "sh": "bash", "bash": "bash", "zsh": "bash", "dash": "bash", "ksh": "bash",
    "node": "javascript", "nodejs": "javascript", "deno": "typescript", "bun": "javascript",
    "ts-node": "typescript",
    "ruby": "ruby", "php": "php", "perl": "perl", "lua": "lua",
}  # fmt: skip

# lang -> tree-sitter-language-pack name, where they differ. Prose langs are chunked by
# llmc's own line scanners, so they have no grammar here.
_GRAMMAR_ALIASES: dict[str, str | None] = {"text": None, "markdown": None, "rst": None}

_SHEBANG = re.compile(r"^#!\s*(\S+)(?:\s+(.*))?")


def _from_shebang(first_line: str) -> str | None:
    m = _SHEBANG.match(first_line.strip())
    if not m:
        return None
    prog = PurePosixPath(m.group(1)).name
    if prog == "env" and m.group(2):
        args = [a for a in m.group(2).split() if not a.startswith("-") and "=" not in a]
        if not args:
            return None
        prog = PurePosixPath(args[0]).name
    prog = prog.lower()
    if prog in _INTERPRETERS:
        return _INTERPRETERS[prog]
    base = re.sub(r"[\d.]+$", "", prog)  # python3.11 -> python
    return _INTERPRETERS.get(base)


def category_of(lang: str | None) -> str | None:
    """DOC for prose langs, CODE for every other known lang, None for None."""
    if lang is None:
        return None
    return DOC if lang in DOC_LANGS else CODE


def is_code_lang(lang: str | None) -> bool:
    """Whether ``lang`` is code: known and not prose (markdown, rst, text). What Code@3
    counts (``llmc.eval.metrics``) and what search moves into the top 3 (``results``)."""
    return category_of(lang) == CODE


def extension_language(path: str) -> str | None:
    """The lang of ``path`` by its extension alone (no file names, no shebang)."""
    return _EXTENSIONS.get(PurePosixPath(path.replace("\\", "/")).suffix.lower())


def detect_language(path: str, first_line: str = "") -> tuple[str | None, str | None]:
    """``(lang, category)`` for a repo-relative ``path``; ``(None, None)`` when unknown.

    ``first_line`` (the file's first line, optional) is used for ``#!`` shebangs when the
    name alone does not tell.
    """
    name = PurePosixPath(path.replace("\\", "/")).name
    low = name.lower()
    lang = _FILENAMES.get(low)
    if lang is None:
        suffix = PurePosixPath(low).suffix
        if suffix:
            lang = _EXTENSIONS.get(suffix)
            if lang is None and low.startswith("dockerfile."):
                lang = "dockerfile"
        if lang is None and first_line.startswith("#!"):
            lang = _from_shebang(first_line)
        if lang is None and not suffix:
            stem = low.lstrip(".")
            if stem in _TEXT_NAMES or stem.split("-")[0] in _TEXT_NAMES:
                lang = "text"
    return lang, category_of(lang)


def grammar_name(lang: str | None) -> str | None:
    """The tree-sitter-language-pack name for ``lang``, or None if llmc does not parse it."""
    if not lang:
        return None
    if lang in _GRAMMAR_ALIASES:
        return _GRAMMAR_ALIASES[lang]
    return lang


@functools.cache
def has_grammar(lang: str | None) -> bool:
    """Whether a tree-sitter grammar for ``lang`` loads here (probed once, cached)."""
    name = grammar_name(lang)
    if name is None:
        return False
    try:
        import tree_sitter_language_pack as tslp

        tslp.get_language(name)  # type: ignore[arg-type]
    except Exception as e:  # LookupError, ImportError, ABI mismatch...
        log.debug("no tree-sitter grammar for %s: %s", lang, e)
        return False
    return True


def known_languages() -> list[str]:
    """Every lang ``detect_language`` can return, sorted."""
    return sorted(
        set(_EXTENSIONS.values()) | set(_FILENAMES.values()) | set(_INTERPRETERS.values())
    )


__all__ = [
    "DOC_LANGS",
    "category_of",
    "detect_language",
    "extension_language",
    "grammar_name",
    "has_grammar",
    "is_code_lang",
    "known_languages",
]
