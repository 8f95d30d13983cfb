"""Language detection and grammar lookup (real tree-sitter-language-pack, no mocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmc.languages import (
    category_of,
    detect_language,
    grammar_name,
    has_grammar,
    known_languages,
)
from llmc.types import CODE, DOC

EXTENSIONS = {
    "python": ["a.py", "stubs/a.pyi"],
    "javascript": ["a.js", "a.mjs", "a.cjs", "a.jsx"],
    "typescript": ["a.ts", "a.mts", "a.cts"],
    "tsx": ["a.tsx"],
    "go": ["a.go"],
    "rust": ["a.rs"],
    "java": ["A.java"],
    "c": ["a.c", "a.h"],
    "cpp": ["a.cc", "a.cpp", "a.cxx", "a.hpp", "a.hh", "a.hxx"],
    "csharp": ["A.cs"],
    "ruby": ["a.rb"],
    "php": ["a.php"],
    "kotlin": ["A.kt", "build.gradle.kts"],
    "swift": ["a.swift"],
    "scala": ["a.scala"],
    "lua": ["a.lua"],
    "bash": ["a.sh", "a.bash"],
    "sql": ["a.sql"],
    "yaml": ["a.yaml", "a.yml"],
    "toml": ["a.toml"],
    "json": ["a.json"],
    "html": ["a.html", "a.htm"],
    "css": ["a.css"],
}
DOCS = {
    "markdown": ["README.md", "docs/a.markdown"],
    "rst": ["docs/index.rst"],
    "text": ["notes.txt", "README", "CHANGELOG", "LICENSE", "docs/AUTHORS"],
}


@pytest.mark.parametrize(
    "lang,path", [(lang, p) for lang, paths in EXTENSIONS.items() for p in paths]
)
def test_code_extensions(lang, path):
    assert detect_language(path) == (lang, CODE)


@pytest.mark.parametrize("lang,path", [(lang, p) for lang, paths in DOCS.items() for p in paths])
def test_doc_files(lang, path):
    assert detect_language(path) == (lang, DOC)


def test_extension_is_case_insensitive_and_path_aware():
    assert detect_language("src/Main.PY") == ("python", CODE)
    assert detect_language("a/b.c/readme.MD") == ("markdown", DOC)
    assert detect_language("src\\win\\x.go") == ("go", CODE)


@pytest.mark.parametrize(
    "first_line,lang",
    [
        ("#!/bin/bash", "bash"),
        ("#!/bin/sh -e", "bash"),
        ("#!/usr/bin/env bash", "bash"),
        ("#!/usr/bin/env python3", "python"),
        ("#!/usr/bin/python3.11", "python"),
        ("#!/usr/bin/env -S node --flag", "javascript"),
        ("#! /usr/bin/ruby", "ruby"),
    ],
)
def test_shebang(first_line, lang):
    assert detect_language("bin/tool", first_line) == (lang, CODE)


def test_extension_beats_shebang_and_unknown_is_none():
    assert detect_language("x.rb", "#!/bin/bash") == ("ruby", CODE)
    assert detect_language("bin/tool", "#!/usr/bin/weird") == (None, None)
    assert detect_language("bin/tool") == (None, None)
    assert detect_language("data.xyz") == (None, None)
    assert detect_language("image.png") == (None, None)


def test_special_file_names():
    assert detect_language("CMakeLists.txt")[0] == "cmake"
    assert detect_language("Makefile")[0] == "make"
    assert detect_language("Dockerfile")[0] == "dockerfile"
    assert detect_language("Gemfile")[0] == "ruby"
    assert detect_language("LICENSE-MIT") == ("text", DOC)


def test_category_of():
    assert category_of("python") == CODE
    assert category_of("markdown") == DOC
    assert category_of(None) is None


def test_grammar_name():
    assert grammar_name("python") == "python"
    assert grammar_name("csharp") == "csharp"
    assert grammar_name("tsx") == "tsx"
    assert grammar_name("text") is None
    assert grammar_name("markdown") is None  # chunked by llmc's heading scanner
    assert grammar_name(None) is None


@pytest.mark.parametrize(
    "lang",
    ["python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "csharp",
     "ruby", "php", "kotlin", "swift", "scala", "lua", "bash", "sql", "yaml", "toml", "json",
     "html", "css"],
)  # fmt: skip
def test_has_grammar_for_every_code_language(lang):
    assert has_grammar(lang)


def test_has_grammar_false_and_cached():
    assert not has_grammar("text")
    assert not has_grammar("no-such-language")
    assert not has_grammar(None)
    assert has_grammar.cache_info().currsize > 0


def test_known_languages_cover_the_map():
    langs = known_languages()
    assert langs == sorted(langs)
    for lang in [*EXTENSIONS, *DOCS]:
        assert lang in langs


QUERY_LANGS = ["python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp",
               "csharp", "ruby", "php"]  # fmt: skip


@pytest.mark.parametrize("lang", QUERY_LANGS)
def test_query_file_exists_and_compiles(lang):
    import tree_sitter
    import tree_sitter_language_pack as tslp

    path = Path(__file__).parents[1] / "llmc" / "index" / "queries" / f"{lang}.scm"
    query = tree_sitter.Query(tslp.get_language(grammar_name(lang)), path.read_text())
    names = {query.capture_name(i) for i in range(query.capture_count)}
    assert "name" in names
    assert any(n.startswith("definition.") for n in names)
