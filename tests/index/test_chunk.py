"""chunk_file on real snippets with real tree-sitter grammars (no mocks).

Every chunk goes through ``chunk()``, which checks the exactness invariant: a span's text
is exactly lines start_line..end_line of the file.
"""

from __future__ import annotations

import os
import random
import threading

import pytest

from llmc.config import IndexConfig
from llmc.index.chunk import chunk_file, split_lines
from llmc.types import CODE, DOC, Span

CFG = IndexConfig()


def chunk(path: str, text: str, lang: str | None, category: str | None = CODE, cfg=CFG):
    spans = chunk_file(path, text, lang, category, cfg)
    lines = split_lines(text)
    for s in spans:
        assert isinstance(s, Span)
        assert 1 <= s.start_line <= s.end_line <= len(lines), s
        assert s.text == "\n".join(lines[s.start_line - 1 : s.end_line]), s
        assert s.path == path
        assert s.header.startswith(path)
        assert s.category in (CODE, DOC)
        assert s.symbol and s.qualname
    return spans


def shape(spans: list[Span]) -> list[tuple[str, str, str, int, int]]:
    return [(s.kind, s.symbol, s.qualname, s.start_line, s.end_line) for s in spans]


def by_qualname(spans: list[Span], qualname: str) -> Span:
    (found,) = [s for s in spans if s.qualname == qualname and s.part == 0]
    return found


# ----------------------------------------------------------------------- the 12 languages

PYTHON_SRC = '''\
"""Module doc."""
import os

X = 1


class Outer:
    """Outer doc."""

    class Inner:
        def method(self):
            return 1

    @property
    def value(self):
        # not a doc
        return 2


@decorator
def top(a, b=2):
    """Top doc."""
    def nested():
        pass
    return a


if __name__ == "__main__":
    top(1)
'''

PYTHON_SPANS = [
    ("block", "sample", "sample", 1, 4),
    ("class", "Outer", "Outer", 7, 17),
    ("class", "Inner", "Outer.Inner", 10, 12),
    ("method", "method", "Outer.Inner.method", 11, 12),
    ("method", "value", "Outer.value", 14, 17),
    ("function", "top", "top", 20, 25),
    ("block", "sample", "sample", 28, 29),
]

JAVASCRIPT_SRC = """\
import fs from "fs";

/** A greeter. */
export class Greeter {
  constructor(name) {
    this.name = name;
  }

  // Say hello.
  greet() {
    return `hi ${this.name}`;
  }
}

export function helper(a, b) {
  return a + b;
}

const arrow = (x) => x * 2;
const obj = { m() { return 1; } };
"""

JAVASCRIPT_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("class", "Greeter", "Greeter", 3, 13),
    ("method", "constructor", "Greeter.constructor", 5, 7),
    ("method", "greet", "Greeter.greet", 9, 12),
    ("function", "helper", "helper", 15, 17),
    ("function", "arrow", "arrow", 19, 19),
    ("function", "m", "m", 20, 20),  # an object literal's method
]

TYPESCRIPT_SRC = """\
import { x } from "./x";

interface Shape {
  area(): number;
}

export abstract class Base<T> implements Shape {
  private v: T;
  @log()
  area(): number {
    return 0;
  }
}

export function make(n: number): Base<number> {
  return null as any;
}
enum Color { Red, Green }
type Alias = string;
namespace NS { export function inner() {} }
"""

TYPESCRIPT_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("class", "Shape", "Shape", 3, 5),
    ("class", "Base", "Base", 7, 13),
    ("method", "area", "Base.area", 9, 12),
    ("function", "make", "make", 15, 17),
    ("class", "Color", "Color", 18, 18),
    ("block", "sample", "sample", 19, 19),
    ("function", "inner", "inner", 20, 20),
]

TSX_SRC = """\
import { x } from "./x";

interface Shape {
  area(): number;
}

export abstract class Base<T> implements Shape {
  private v: T;
  @log()
  area(): number {
    return 0;
  }
}

export function make(n: number): Base<number> {
  return null as any;
}
enum Color { Red, Green }
type Alias = string;
namespace NS { export function inner() {} }

export const App = () => <div className="x">hi</div>;
function Comp(props: P) { return <span/>; }
"""

TSX_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("class", "Shape", "Shape", 3, 5),
    ("class", "Base", "Base", 7, 13),
    ("method", "area", "Base.area", 9, 12),
    ("function", "make", "make", 15, 17),
    ("class", "Color", "Color", 18, 18),
    ("block", "sample", "sample", 19, 19),
    ("function", "inner", "inner", 20, 20),
    ("function", "App", "App", 22, 22),
    ("function", "Comp", "Comp", 23, 23),
]

GO_SRC = """\
package server

import "fmt"

// Server serves.
type Server struct {
	addr string
}

// Handle handles a request.
func (s *Server) Handle(req string) error {
	fmt.Println(req)
	return nil
}

func (s Box[T]) Get() T { return s.v }

func New(addr string) *Server {
	return &Server{addr: addr}
}
"""

GO_SPANS = [
    ("block", "sample", "sample", 1, 3),
    ("class", "Server", "Server", 5, 8),
    ("method", "Handle", "Server.Handle", 10, 14),
    ("method", "Get", "Box.Get", 16, 16),
    ("function", "New", "New", 18, 20),
]

RUST_SRC = """\
use std::fmt;

/// A point.
#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl Point {
    /// Make one.
    pub fn new(x: i32) -> Self {
        Point { x }
    }
}

impl<T> fmt::Display for Wrapper<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        Ok(())
    }
}

trait Shape { fn area(&self) -> f64 { 0.0 } fn name(&self); }

pub fn distance(a: &Point) -> i32 {
    a.x
}
mod tests { fn t() {} }
"""

RUST_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("class", "Point", "Point", 3, 7),
    ("class", "Point", "Point", 9, 14),
    ("method", "new", "Point.new", 10, 13),
    ("class", "Wrapper", "Wrapper", 16, 20),
    ("method", "fmt", "Wrapper.fmt", 17, 19),
    ("class", "Shape", "Shape", 22, 22),
    ("method", "area", "Shape.area", 22, 22),
    ("function", "distance", "distance", 24, 26),
    ("function", "t", "t", 27, 27),
]

JAVA_SRC = """\
package com.example;

import java.util.List;

/**
 * A repository.
 */
public class UserRepo {
    private final List<String> users;

    public UserRepo(List<String> users) {
        this.users = users;
    }

    // Find one.
    @Override
    public String find(int id) {
        return users.get(id);
    }

    static class Inner { void run() {} }
}
interface Svc { void go(); }
enum E { A, B }
"""

JAVA_SPANS = [
    ("block", "sample", "sample", 1, 3),
    ("class", "UserRepo", "UserRepo", 5, 22),
    ("method", "UserRepo", "UserRepo.UserRepo", 11, 13),
    ("method", "find", "UserRepo.find", 15, 19),
    ("class", "Inner", "UserRepo.Inner", 21, 21),
    ("method", "run", "UserRepo.Inner.run", 21, 21),
    ("class", "Svc", "Svc", 23, 23),
    ("method", "go", "Svc.go", 23, 23),
    ("class", "E", "E", 24, 24),
]

C_SRC = """\
#include <stdio.h>

/* A node. */
struct node {
    int value;
};

typedef struct { int a; } pair_t;

// Add two ints.
static int add(int a, int b) {
    return a + b;
}

char *name(void) { return "x"; }
char **names(void) { return 0; }
"""

C_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("class", "node", "node", 3, 6),
    ("class", "pair_t", "pair_t", 8, 8),
    ("function", "add", "add", 10, 13),
    ("function", "name", "name", 15, 15),
    ("function", "names", "names", 16, 16),
]

CPP_SRC = """\
#include <string>

namespace app {

class Widget {
public:
    Widget();
    int size() const { return n_; }
private:
    int n_;
};

// Build it.
Widget::Widget() : n_(0) {}

template <typename T>
T twice(T x) { return x * 2; }

std::string& ns::Foo::bar(int x) { static std::string s; return s; }
Widget::~Widget() {}
bool Widget::operator==(const Widget& o) const { return true; }
struct S { void m() {} };
}
"""

CPP_SPANS = [
    ("block", "sample", "sample", 1, 3),
    ("class", "Widget", "Widget", 5, 11),
    ("method", "size", "Widget.size", 8, 8),
    ("method", "Widget", "Widget.Widget", 13, 14),
    ("function", "twice", "twice", 16, 17),
    ("method", "bar", "ns.Foo.bar", 19, 19),
    ("method", "~Widget", "Widget.~Widget", 20, 20),
    ("method", "operator==", "Widget.operator==", 21, 21),
    ("class", "S", "S", 22, 22),
    ("method", "m", "S.m", 22, 22),
]

CSHARP_SRC = """\
using System;

namespace App.Services
{
    /// <summary>Users.</summary>
    public class UserService
    {
        private int count;

        public UserService(int c) { count = c; }

        /// <summary>Get one.</summary>
        [Obsolete]
        public string GetUser(int id)
        {
            return id.ToString();
        }
        public int Prop { get; set; }
    }
    interface IFoo { void Bar(); }
    struct P { void M() {} }
    record R(int X);
    enum E { A }
}
"""

CSHARP_SPANS = [
    ("block", "sample", "sample", 1, 4),
    ("class", "UserService", "UserService", 5, 19),
    ("method", "UserService", "UserService.UserService", 10, 10),
    ("method", "GetUser", "UserService.GetUser", 12, 17),
    ("class", "IFoo", "IFoo", 20, 20),
    ("method", "Bar", "IFoo.Bar", 20, 20),
    ("class", "P", "P", 21, 21),
    ("method", "M", "P.M", 21, 21),
    ("class", "R", "R", 22, 22),
    ("class", "E", "E", 23, 23),
]

RUBY_SRC = """\
require "json"

module Shop
  # A cart.
  class Cart
    attr_reader :items

    def initialize
      @items = []
    end

    # Total price.
    def total
      @items.sum
    end

    def self.build
      new
    end
  end
end

def helper(x)
  x * 2
end
"""

RUBY_SPANS = [
    ("block", "sample", "sample", 1, 1),
    ("module", "Shop", "Shop", 3, 21),
    ("class", "Cart", "Shop.Cart", 4, 20),
    ("method", "initialize", "Shop.Cart.initialize", 8, 10),
    ("method", "total", "Shop.Cart.total", 12, 15),
    ("method", "build", "Shop.Cart.build", 17, 19),
    ("function", "helper", "helper", 23, 25),
]

PHP_SRC = """\
<?php

namespace App;

use Foo\\Bar;

/**
 * A controller.
 */
class UserController extends Base
{
    private $repo;

    public function show($id)
    {
        return $this->repo->find($id);
    }
}

interface I { public function f(); }
trait T { function g() {} }

function helper($x) {
    return $x;
}
"""

PHP_SPANS = [
    ("block", "sample", "sample", 1, 5),
    ("class", "UserController", "UserController", 7, 18),
    ("method", "show", "UserController.show", 14, 17),
    ("class", "I", "I", 20, 20),
    ("method", "f", "I.f", 20, 20),
    ("class", "T", "T", 21, 21),
    ("method", "g", "T.g", 21, 21),
    ("function", "helper", "helper", 23, 25),
]

CASES = {
    "python": ("src/sample.py", PYTHON_SRC, PYTHON_SPANS),
    "javascript": ("src/sample.js", JAVASCRIPT_SRC, JAVASCRIPT_SPANS),
    "typescript": ("src/sample.ts", TYPESCRIPT_SRC, TYPESCRIPT_SPANS),
    "tsx": ("src/sample.tsx", TSX_SRC, TSX_SPANS),
    "go": ("src/sample.go", GO_SRC, GO_SPANS),
    "rust": ("src/sample.rs", RUST_SRC, RUST_SPANS),
    "java": ("src/sample.java", JAVA_SRC, JAVA_SPANS),
    "c": ("src/sample.c", C_SRC, C_SPANS),
    "cpp": ("src/sample.cpp", CPP_SRC, CPP_SPANS),
    "csharp": ("src/sample.cs", CSHARP_SRC, CSHARP_SPANS),
    "ruby": ("src/sample.rb", RUBY_SRC, RUBY_SPANS),
    "php": ("src/sample.php", PHP_SRC, PHP_SPANS),
}


@pytest.mark.parametrize("lang", sorted(CASES))
def test_language_definitions(lang):
    path, src, expected = CASES[lang]
    spans = chunk(path, src, lang)
    assert shape(spans) == expected
    assert all(s.lang == lang and s.category == CODE and s.part == 0 for s in spans)


@pytest.mark.parametrize("lang", sorted(CASES))
def test_language_crlf_gives_same_spans(lang):
    path, src, expected = CASES[lang]
    spans = chunk(path, src.replace("\n", "\r\n"), lang)
    assert shape(spans) == expected
    assert not any("\r" in s.text for s in spans)


def test_python_headers_signatures_docstrings():
    spans = chunk("src/sample.py", PYTHON_SRC, "python")
    top = by_qualname(spans, "top")
    assert top.start_line == 20 and top.text.startswith("@decorator\ndef top")  # decorator in
    assert top.signature == "def top(a, b=2)"
    assert top.docstring == "Top doc."
    assert top.header == "src/sample.py\nin module sample\ndef top(a, b=2)\nTop doc."
    method = by_qualname(spans, "Outer.Inner.method")
    assert method.header.splitlines()[:3] == ["src/sample.py", "in Outer.Inner", "def method(self)"]
    value = by_qualname(spans, "Outer.value")
    assert value.signature == "def value(self)"  # the comment in the body is not part of it
    assert value.docstring == ""
    outer = by_qualname(spans, "Outer")
    assert outer.docstring == "Outer doc." and outer.signature == "class Outer"
    assert not [s for s in spans if s.symbol == "nested"]  # stays inside top()


def test_leading_comments_are_docstrings_and_part_of_the_span():
    go = chunk("src/sample.go", GO_SRC, "go")
    handle = by_qualname(go, "Server.Handle")
    assert handle.text.startswith("// Handle handles a request.\nfunc (s *Server) Handle")
    assert handle.docstring == "Handle handles a request."
    assert handle.signature == "func (s *Server) Handle(req string) error"
    assert handle.header.splitlines()[1] == "in Server"
    rust = chunk("src/sample.rs", RUST_SRC, "rust")
    point = rust[1]
    assert point.text.startswith("/// A point.\n#[derive(Debug)]\npub struct Point")
    assert point.docstring == "A point."
    assert by_qualname(rust, "Point.new").docstring == "Make one."
    java = chunk("src/sample.java", JAVA_SRC, "java")
    assert by_qualname(java, "UserRepo").docstring == "A repository."
    assert by_qualname(java, "UserRepo.find").signature == "@Override public String find(int id)"
    cs = chunk("src/sample.cs", CSHARP_SRC, "csharp")
    assert by_qualname(cs, "UserService.GetUser").docstring == "Get one."
    php = chunk("src/sample.php", PHP_SRC, "php")
    assert by_qualname(php, "UserController").docstring == "A controller."
    ruby = chunk("src/sample.rb", RUBY_SRC, "ruby")
    assert by_qualname(ruby, "Shop.Cart.total").docstring == "Total price."
    assert by_qualname(ruby, "Shop").signature == "module Shop"


def test_python_comment_before_dedented_def():
    src = """\
class A:
    def f(self):
        x = 1
    # about g
    def g(self):
        pass
# about h
def h():
    pass
"""
    spans = chunk("c.py", src, "python")
    assert shape(spans) == [
        ("class", "A", "A", 1, 6),
        ("method", "f", "A.f", 2, 3),
        ("method", "g", "A.g", 4, 6),
        ("function", "h", "h", 7, 9),
    ]
    assert by_qualname(spans, "h").docstring == "about h"


def test_large_class_keeps_header_and_member_gaps():
    src = """\
import os


class Big:
    \"\"\"Big doc.\"\"\"

    A = 1
    B = 2

    def one(self):
        x = 1
        x = 2
        x = 3
        return x

    C = 3

    def two(self):
        return 2
"""
    cfg = IndexConfig(max_span_lines=8, span_overlap_lines=2)
    spans = chunk("big.py", src, "python", cfg=cfg)
    assert shape(spans) == [
        ("block", "big", "big", 1, 1),
        ("class", "Big", "Big", 4, 8),
        ("method", "one", "Big.one", 10, 14),
        ("block", "Big", "Big", 16, 16),
        ("method", "two", "Big.two", 18, 19),
    ]
    assert spans[3].header == "big.py\nin Big"


def test_large_class_closing_brace_is_not_a_block():
    src = "class Big {\n    int a;\n\n    void one() {\n        return;\n    }\n}\n"
    spans = chunk("Big.java", src, "java", cfg=IndexConfig(max_span_lines=4, span_overlap_lines=1))
    assert shape(spans) == [("class", "Big", "Big", 1, 2), ("method", "one", "Big.one", 4, 6)]


def test_long_function_is_split_with_overlap():
    body = "".join(f"    x{i} = {i}\n" for i in range(29))
    src = "def long():\n" + body
    cfg = IndexConfig(max_span_lines=10, span_overlap_lines=3)
    spans = chunk("long.py", src, "python", cfg=cfg)
    assert [(s.start_line, s.end_line, s.part) for s in spans] == [
        (1, 10, 0),
        (8, 17, 1),
        (15, 24, 2),
        (22, 30, 3),
    ]
    assert {(s.kind, s.symbol, s.qualname, s.header) for s in spans} == {
        ("function", "long", "long", "long.py\nin module long\ndef long()")
    }


def test_long_module_block_is_split():
    src = "".join(f"X{i} = {i}\n" for i in range(25))
    cfg = IndexConfig(max_span_lines=10, span_overlap_lines=0)
    spans = chunk("consts.py", src, "python", cfg=cfg)
    assert [(s.kind, s.start_line, s.end_line, s.part) for s in spans] == [
        ("block", 1, 10, 0),
        ("block", 11, 20, 1),
        ("block", 21, 25, 2),
    ]


# ----------------------------------------------------------------------- other code paths


KOTLIN_SRC = """\
package demo

import kotlin.math.max

class Box(val v: Int) {
    fun get(): Int = v
}

fun top(a: Int): Int {
    return a
}
"""

LUA_SRC = """\
local M = {}

-- Add two numbers.
function M.add(a, b)
  return a + b
end

local function helper(x)
  return x
end

return M
"""


def test_grammar_without_query_gives_top_level_blocks():
    kt = chunk("src/Box.kt", KOTLIN_SRC, "kotlin")
    assert shape(kt) == [
        ("block", "Box", "Box", 1, 3),
        ("block", "Box", "Box", 5, 7),
        ("block", "top", "top", 9, 11),
    ]
    assert kt[1].signature == "class Box(val v: Int)"
    lua = chunk("src/m.lua", LUA_SRC, "lua")
    assert shape(lua) == [
        ("block", "m", "m", 1, 1),
        ("block", "add", "M.add", 3, 6),
        ("block", "helper", "helper", 8, 10),
        ("block", "m", "m", 12, 12),
    ]
    assert lua[1].docstring == "Add two numbers."


def test_unknown_language_gives_overlapping_windows():
    src = "".join(f"line {i}\n" for i in range(1, 131))
    spans = chunk("data.xyz", src, None, None)
    assert [(s.kind, s.start_line, s.end_line, s.part) for s in spans] == [
        ("window", 1, 60, 0),
        ("window", 51, 110, 1),
        ("window", 101, 130, 2),
    ]
    assert {(s.lang, s.category, s.symbol) for s in spans} == {("text", CODE, "data")}


def test_language_without_grammar_gives_windows():
    spans = chunk("x.weird", "a\nb\n", "no-such-language", CODE)
    assert shape(spans) == [("window", "x", "x", 1, 2)]


def test_empty_and_blank_files_give_no_spans():
    for lang, cat in [("python", CODE), ("markdown", DOC), ("text", DOC), (None, None)]:
        assert chunk("e.x", "", lang, cat) == []
        assert chunk("e.x", "\n \n\t\n", lang, cat) == []


def test_comment_only_file():
    spans = chunk("c.py", "# one\n# two\n", "python")
    assert shape(spans) == [("block", "c", "c", 1, 2)]
    spans = chunk("c.go", "// one\n/* two\n   three */\n", "go")
    assert shape(spans) == [("block", "c", "c", 1, 3)]


def test_no_trailing_newline_tabs_and_unicode():
    src = "def f():\n\treturn 'héllo wörld ✓'\n\n\nclass Ü:\n\tdef g(self):\n\t\treturn '日本'"
    spans = chunk("u.py", src, "python")
    assert shape(spans) == [
        ("function", "f", "f", 1, 2),
        ("class", "Ü", "Ü", 5, 7),
        ("method", "g", "Ü.g", 6, 7),
    ]
    assert spans[-1].text.endswith("'日本'")


def test_lone_carriage_return_does_not_shift_lines():
    src = "x = '\\r'\ny = '\r'\ndef f():\n    pass\n"
    spans = chunk("r.py", src, "python")
    assert shape(spans)[-1] == ("function", "f", "f", 3, 4)


@pytest.mark.parametrize(
    "lang", ["python", "javascript", "cpp", "rust", "ruby", "kotlin", "json", None]
)
def test_garbage_never_raises(lang):
    rng = random.Random(7)
    raw = bytes(rng.randrange(256) for _ in range(6000))
    for text in (raw.decode("utf-8", "surrogateescape"), raw.decode("latin-1")):
        spans = chunk("g.bin", text, lang, CODE if lang else None)
        assert spans  # something non-blank is always covered


@pytest.mark.parametrize("lang,cat", [("markdown", DOC), ("rst", DOC), ("text", DOC)])
def test_garbage_docs_never_raise(lang, cat):
    rng = random.Random(3)
    text = bytes(rng.randrange(256) for _ in range(6000)).decode("utf-8", "replace")
    assert chunk("g.md", text, lang, cat)


def test_deep_nesting_never_raises():
    deep_list = "x = " + "[" * 5000 + "]" * 5000 + "\n"
    assert chunk("d.py", deep_list, "python")
    deep_js = "function f(){" * 2000 + "}" * 2000 + "\n"
    assert chunk("d.js", deep_js, "javascript")
    deep_classes = (
        "".join("    " * i + f"class C{i}:\n" for i in range(1200)) + "    " * 1200 + "pass\n"
    )
    assert chunk("c.py", deep_classes, "python")  # past the recursion limit: windows


def test_bad_config_values_are_clamped():
    cfg = IndexConfig(max_span_lines=0, span_overlap_lines=50, window_lines=0)
    assert chunk("a.py", "def f():\n    pass\n", "python", cfg=cfg)
    assert chunk("a.xyz", "a\nb\nc\n", None, None, cfg=cfg)


def _python_file(n_classes: int = 100) -> str:
    parts = []
    for i in range(n_classes):
        methods = "".join(
            f"    def m{j}(self, a, b):\n        # c\n        return a + b * {j}\n\n"
            for j in range(4)
        )
        parts.append(f"class K{i}:\n    '''Doc {i}.'''\n{methods}")
    parts.append("".join(f"def f{i}(x):\n    return x\n\n" for i in range(60)))
    return "\n".join(parts)


def test_two_thousand_lines_every_definition_is_a_span():
    """A 2,000-line module: each of its 460 definitions is found (how fast the chunker is
    lives in benchmarks/bench_guards.py)."""
    src = _python_file()
    assert 1900 < src.count("\n") < 2200
    spans = chunk("p.py", src, "python")
    qualnames = {s.qualname for s in spans}
    assert {f"K{i}.m{j}" for i in range(100) for j in range(4)} <= qualnames
    assert {f"f{i}" for i in range(60)} <= qualnames


def test_fifty_thousand_lines():
    src = _python_file() * 24
    spans = chunk("p.py", src, "python")
    assert len(spans) > 10_000


def test_threads_share_nothing_mutable():
    results: list[list[tuple]] = []
    errors: list[BaseException] = []

    def work():
        try:
            for lang in ("python", "go", "rust"):
                path, src, _ = CASES[lang]
                results.append(shape(chunk_file(path, src, lang, CODE, CFG)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 12
    assert results[0] == PYTHON_SPANS


# ----------------------------------------------------------------------- docs

MARKDOWN_SRC = """\
---
title: Guide
---
Intro text.

# Guide

Some text.

```python
# not a heading
x = 1
```

## Configuration

Config text.

### Sessions
Sessions text.

Setext Title
============

Body.

Sub
---
Sub body.

## Empty

# Last #
End.
"""


def test_markdown_sections():
    spans = chunk("docs/guide.md", MARKDOWN_SRC, "markdown", DOC)
    assert shape(spans) == [
        ("section", "guide.md", "guide.md", 1, 4),
        ("section", "Guide", "Guide", 6, 13),
        ("section", "Configuration", "Guide > Configuration", 15, 17),
        ("section", "Sessions", "Guide > Configuration > Sessions", 19, 20),
        ("section", "Setext Title", "Setext Title", 22, 25),
        ("section", "Sub", "Setext Title > Sub", 27, 29),
        ("section", "Last", "Last", 33, 34),
    ]
    sessions = spans[3]
    assert sessions.header == "docs/guide.md\nGuide > Configuration > Sessions"
    assert {(s.lang, s.category) for s in spans} == {("markdown", DOC)}


def test_markdown_fences_hide_headings_and_setext_needs_a_paragraph():
    src = "# A\n\n~~~~\n# no\n~~~\n## still no\n~~~~\n\n---\n\n- item\n---\n\n    # code\ntext\n"
    spans = chunk("f.md", src, "markdown", DOC)
    assert shape(spans) == [("section", "A", "A", 1, 15)]


def test_markdown_without_headings_is_one_section():
    spans = chunk("notes.md", "just\ntext\n", "markdown", DOC)
    assert shape(spans) == [("section", "notes.md", "notes.md", 1, 2)]


RST_SRC = """\
=========
 Project
=========

Intro para.

Install
=======

Run it::

    pip install x
    ---------

Details
-------

More.

Usage
=====

Use it.
"""


def test_rst_sections():
    spans = chunk("docs/index.rst", RST_SRC, "rst", DOC)
    assert shape(spans) == [
        ("section", "Project", "Project", 1, 5),
        ("section", "Install", "Project > Install", 7, 13),
        ("section", "Details", "Project > Install > Details", 15, 18),
        ("section", "Usage", "Project > Usage", 20, 23),
    ]
    assert spans[2].header == "docs/index.rst\nProject > Install > Details"


def test_rst_preamble_and_short_underline():
    src = "Preface line.\n\nTitle\n==\n\nA\n=\n\nTitle two\n=========\nbody\n"
    spans = chunk("x.rst", src, "rst", DOC)
    # "==" under "Title" is too short to be an adornment; "=" is too short too.
    assert shape(spans) == [
        ("section", "x.rst", "x.rst", 1, 7),
        ("section", "Title two", "Title two", 9, 11),
    ]


def test_plain_text_paragraphs_merge_up_to_forty_lines():
    long_para = "".join(f"line {i}\n" for i in range(50))
    src = "First para\nline 2\n\nSecond para\n\n\n" + long_para + "\nLast\n"
    spans = chunk("NOTES.txt", src, "text", DOC)
    assert shape(spans) == [
        ("paragraph", "NOTES.txt", "NOTES.txt", 1, 4),
        ("paragraph", "NOTES.txt", "NOTES.txt", 7, 56),
        ("paragraph", "NOTES.txt", "NOTES.txt", 58, 58),
    ]
    assert spans[0].header == "NOTES.txt"


def test_plain_text_readme_without_extension_and_long_paragraph_split():
    src = "".join(f"w{i}\n" for i in range(30))
    spans = chunk(
        "README", src, "text", DOC, cfg=IndexConfig(max_span_lines=12, span_overlap_lines=2)
    )
    assert [(s.kind, s.start_line, s.end_line, s.part) for s in spans] == [
        ("paragraph", 1, 12, 0),
        ("paragraph", 11, 22, 1),
        ("paragraph", 21, 30, 2),
    ]


def test_long_markdown_section_is_split():
    src = "# Big\n" + "".join(f"text {i}\n" for i in range(20))
    cfg = IndexConfig(max_span_lines=10, span_overlap_lines=2)
    spans = chunk("b.md", src, "markdown", DOC, cfg=cfg)
    assert [(s.symbol, s.start_line, s.end_line, s.part) for s in spans] == [
        ("Big", 1, 10, 0),
        ("Big", 9, 18, 1),
        ("Big", 17, 21, 2),
    ]


def test_markdown_of_headings_only_is_one_section():
    spans = chunk("t.md", "# Title\n\n## Sub\n", "markdown", DOC)
    assert shape(spans) == [("section", "Title", "Title", 1, 3)]


def test_yaml_nested_too_deep_for_the_grammar_is_windows_not_a_crash():
    # tree-sitter-yaml segfaults on this (a 2 KB file of tomlkit's TOML test suite).
    text = "key:\n  " + "- " * 1000 + "1\n"
    spans = chunk_file("tests/values/nested-1000.yaml", text, "yaml", "code", IndexConfig())
    assert [s.kind for s in spans] == ["window"]
    assert spans[0].start_line == 1 and spans[0].end_line == 2


def _nested_mapping(depth: int) -> str:
    return "".join("  " * i + "key:\n" for i in range(depth)) + "  " * depth + "value\n"


def test_yaml_nested_too_deep_is_windows_in_an_index_run(tmp_path):
    """tree-sitter-yaml segfaults on blocks ~300 deep (tomlkit's test suite has a mapping
    1,000 deep): `llmc index` must cut such a file into windows and index the rest. Run as
    its own process, so that a regression fails this test instead of killing the suite."""
    import json
    import subprocess
    import sys

    (tmp_path / "deep.yaml").write_text(_nested_mapping(400), encoding="utf-8")
    # compact complex keys open a level each on one line: "? ? ? ... x" crashes it too
    (tmp_path / "keys.yaml").write_text("key:\n  " + "? " * 400 + "x\n", encoding="utf-8")
    # nested string interpolation: Perl's scanner segfaults at ~90, Kotlin's aborts by 3,000
    interp = '"${' * 3000 + '}"' * 3000
    (tmp_path / "deep.pl").write_text(f"my $s = {interp};\n", encoding="utf-8")
    (tmp_path / "Deep.kt").write_text(f"val s = {interp}\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("def fine():\n    return 1\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "llmc", "index", str(tmp_path), "--no-vectors", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "LLMC_NO_DAEMON": "1"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["files_indexed"] == 5
    assert report["spans_by_kind"].get("window", 0) >= 4
    assert report["spans_by_kind"].get("function") == 1


def test_perl_with_ordinary_nesting_is_still_parsed():
    text = 'sub greet {\n    my ($name) = @_;\n    return "hi ${name}";\n}\n'
    spans = chunk_file("lib/Greet.pm", text, "perl", "code", IndexConfig())
    assert [s.kind for s in spans] != ["window"]


def test_yaml_nested_within_the_grammars_reach_is_still_parsed():
    text = _nested_mapping(40)
    spans = chunk_file("config/deep.yaml", text, "yaml", "code", IndexConfig())
    assert spans and "window" not in {s.kind for s in spans}


def test_javascript_functions_assigned_to_members_and_object_literal_methods_are_definitions():
    """express's `res.send = function send(...)` and koa's `module.exports = { get header()
    {...} }` are where their documented functions live: each is a span named after it."""
    src = (
        "var res = module.exports = {};\n"
        "\n"
        "res.status = function status(code) {\n"
        "  this.statusCode = code;\n"
        "  return this;\n"
        "};\n"
        "\n"
        "Router.prototype.use = function use(fn) {\n"
        "  this.stack.push(fn);\n"
        "};\n"
        "\n"
        "exports.parse = (str) => str.split(',');\n"
        "\n"
        "module.exports = {\n"
        "  get header() {\n"
        "    return this.res.getHeaders();\n"
        "  },\n"
        "  toJSON: function () {\n"
        "    return {};\n"
        "  },\n"
        "};\n"
        "\n"
        "function outer() {\n"
        "  const o = { inner() { return 2; } };\n"
        "  return o;\n"
        "}\n"
    )
    spans = chunk("lib/response.js", src, "javascript")
    named = {(s.qualname, s.start_line, s.end_line) for s in spans if s.kind != "block"}
    assert ("res.status", 3, 6) in named
    assert ("Router.use", 8, 10) in named  # `.prototype` is how JS spells a method
    assert ("exports.parse", 12, 12) in named
    assert ("header", 15, 17) in named and ("toJSON", 18, 20) in named
    assert ("outer", 23, 26) in named
    assert not any(q == "inner" for q, _, _ in named)  # inside a function: part of its span
