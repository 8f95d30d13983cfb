"""Per-file extraction: definitions, calls, imports, bindings, docs; robustness."""

from __future__ import annotations

import pytest

from llmc.graph.docs import extract_doc
from llmc.graph.extract import LITERAL, MAX_REFS, extract_file, type_head
from llmc.graph.model import FileFacts


def _defs(f: FileFacts) -> dict[str, str]:
    return {d.qualname: d.kind for d in f.defs if d.kind != "impl"}


def _calls(f: FileFacts) -> set[tuple[str, str, str]]:
    return {(c.scope, c.receiver, c.name) for c in f.calls}


PY = """\
import os.path as osp
from . import sibling
from ..pkg.mod import (a as b, c)
from .star import *


class Base:
    pass


class Thing(Base, mixins.Loud):
    size: int = 3

    def __init__(self, store: "Store", n: int = 0):
        super().__init__()
        self.store = store
        self.items = []
        self.helper = Helper()

    @property
    def name(self) -> str:
        return osp.basename(self.store.path)

    @name.setter
    def name(self, value):
        self.rename(value)

    def run(self):
        def inner():
            return helper()
        x = Factory.make()
        x.go()
        "".join(self.items)
        return inner()
"""


def test_python_definitions_are_nested_and_merged():
    f = extract_file("pkg/thing.py", PY, "python", "code")
    assert _defs(f) == {
        "Base": "class",
        "Thing": "class",
        "Thing.__init__": "method",
        "Thing.name": "method",  # property getter and setter: one node
        "Thing.run": "method",
        "Thing.run.inner": "function",
    }
    name = next(d for d in f.defs if d.qualname == "Thing.name")
    assert (name.start_line, name.end_line) == (21, 26)
    assert name.returns == "str"
    assert not f.test and not f.error


def test_python_calls_carry_scope_and_receiver():
    f = extract_file("pkg/thing.py", PY, "python", "code")
    calls = _calls(f)
    assert ("Thing.__init__", "super()", "__init__") in calls
    assert ("Thing.__init__", "", "Helper") in calls
    assert ("Thing.name", "osp", "basename") in calls
    assert ("Thing.run.inner", "", "helper") in calls
    assert ("Thing.run", "Factory", "make") in calls
    assert ("Thing.run", "x", "go") in calls
    assert ("Thing.run", '""', "join") in calls
    assert {(i.scope, i.base) for i in f.inherits} == {("Thing", "Base"), ("Thing", "mixins.Loud")}


def test_python_imports():
    f = extract_file("pkg/thing.py", PY, "python", "code")
    got = [(i.module, i.level, i.alias, [tuple(n) for n in i.names]) for i in f.imports]
    assert got == [
        ("os.path", 0, "osp", []),
        ("", 1, "", [("sibling", "sibling")]),
        ("pkg.mod", 2, "", [("a", "b"), ("c", "c")]),
        ("star", 1, "", [("*", "")]),
    ]


def test_python_bindings_feed_type_inference():
    f = extract_file("pkg/thing.py", PY, "python", "code")
    b = {(x.scope, x.name): x for x in f.bindings}
    types = {(x.scope, x.name, x.type) for x in f.bindings}
    assert ("Thing", "size", "int") in types  # class-level annotation: an attribute
    assert b[("Thing.__init__", "store")].type == "Store"  # quoted annotation
    assert b[("Thing", "store")].value == "store"  # self.store = store: class attribute
    assert b[("Thing", "items")].type == LITERAL
    assert b[("Thing", "helper")].call == "Helper"
    assert b[("Thing.run", "x")].call == "Factory.make"


def test_test_files_and_functions_are_marked():
    src = "def test_a():\n    run()\n\ndef helper():\n    pass\n\nclass TestX:\n    def test_b(self):\n        pass\n"
    f = extract_file("tests/test_mod.py", src, "python", "code")
    assert f.test
    assert {d.qualname for d in f.defs if d.test} == {"test_a", "TestX", "TestX.test_b"}
    g = extract_file("pkg/mod.py", src, "python", "code")
    assert not g.test and not any(d.test for d in g.defs)


TS = """\
import Default, { a as b, c } from './mod';
import * as ns from "../lib/index.js";
export { x as y } from './x';
export * from './all';
const { p1, p2: q } = require('./p');
const P = require('./pp');

export interface Shape { area(): number; }

export default class Square extends Base implements Shape {
  constructor(private readonly side: number, public svc: Service) { super(); }
  area(): number { return this.svc.mul(this.side, this.side); }
}

export const make = (n: number): Square => new Square(n, new Service());
"""


def test_typescript_imports_exports_and_defs():
    f = extract_file("src/square.ts", TS, "typescript", "code")
    imports = [(i.module, i.kind, i.alias, [tuple(n) for n in i.names]) for i in f.imports]
    assert imports == [
        ("./mod", "import", "", [("default", "Default"), ("a", "b"), ("c", "c")]),
        ("../lib/index.js", "import", "ns", []),
        ("./x", "reexport", "", [("x", "y")]),
        ("./all", "reexport", "", [("*", "")]),
        ("./p", "require", "", [("p1", "p1"), ("p2", "q")]),
        ("./pp", "require", "P", []),
    ]
    assert f.default_export == "Square"
    assert _defs(f) == {
        "Shape": "interface",
        "Shape.area": "method",
        "Square": "class",
        "Square.constructor": "method",
        "Square.area": "method",
        "make": "function",
    }
    assert next(d for d in f.defs if d.qualname == "make").returns == "Square"
    assert ("Square.area", "this.svc", "mul") in _calls(f)
    assert {(c.name, c.new) for c in f.calls if c.scope == "make"} == {
        ("Square", True),
        ("Service", True),
    }
    b = {(x.scope, x.name): x for x in f.bindings}
    assert b[("Square", "svc")].type == "Service"  # constructor parameter property
    assert {i.base for i in f.inherits} == {"Base", "Shape"}


GO = """\
package store

import (
\t"fmt"
\tdb "example.com/m/internal/db"
)

type Server struct {
\tBase
\tconn *db.Conn
}

func New(c *db.Conn) *Server { return &Server{conn: c} }

func (s *Server) Start() error { s.conn.Open(); fmt.Println("x"); return nil }
"""


def test_go_methods_are_qualified_by_receiver():
    f = extract_file("internal/store/server.go", GO, "go", "code")
    assert f.module == "store"
    assert _defs(f) == {"Server": "class", "New": "function", "Server.Start": "method"}
    assert [(i.module, i.alias) for i in f.imports] == [
        ("fmt", ""),
        ("example.com/m/internal/db", "db"),
    ]
    assert ("Server.Start", "s.conn", "Open") in _calls(f)
    b = {(x.scope, x.name): x.type for x in f.bindings}
    assert b[("Server.Start", "s")] == "Server"
    assert b[("Server", "conn")] == "db.Conn"
    assert [(i.scope, i.base) for i in f.inherits] == [("Server", "Base")]


RUST = """\
mod store;
use crate::a::{b, c as d, e::*};
use super::x;

pub struct Foo { conn: Conn }

impl Foo {
    pub fn new() -> Self { Foo { conn: Conn::open() } }
}

impl Tr for Foo {
    fn go(&self) { self.helper(); }
}

#[cfg(test)]
mod tests {
    #[test]
    fn builds() { super::Foo::new(); }
}
"""


def test_rust_impl_methods_use_trees_and_tests():
    f = extract_file("src/foo.rs", RUST, "rust", "code")
    defs = _defs(f)
    assert defs["Foo"] == "class"
    assert defs["Foo.new"] == "method" and defs["Foo.go"] == "method"
    assert defs["tests"] == "module" and defs["tests.builds"] == "function"
    assert next(d for d in f.defs if d.qualname == "tests.builds").test
    imports = [(i.module, i.kind, [tuple(n) for n in i.names]) for i in f.imports]
    assert imports == [
        ("store", "mod", []),
        ("crate::a", "import", [("b", "b")]),
        ("crate::a", "import", [("c", "d")]),
        ("crate::a::e", "import", [("*", "")]),
        ("super", "import", [("x", "x")]),
    ]
    assert [(i.scope, i.base) for i in f.inherits] == [("Foo", "Tr")]
    assert ("tests.builds", "super::Foo", "new") in _calls(f)


JAVA = """\
package com.ex.app;
import com.ex.util.Helper;
import com.ex.model.*;
import static com.ex.util.Strings.join;
public class Svc extends Base implements Runnable {
  private final Repo repo;
  public Svc(Repo r) { this.repo = r; }
  @Override public void run() { repo.save(); new Helper().go(); join("a"); }
}
"""


def test_java_package_imports_and_calls():
    f = extract_file("src/main/java/com/ex/app/Svc.java", JAVA, "java", "code")
    assert f.module == "com.ex.app"
    assert [(i.module, i.kind, [tuple(n) for n in i.names]) for i in f.imports] == [
        ("com.ex.util", "import", [("Helper", "Helper")]),
        ("com.ex.model", "import", [("*", "")]),
        ("com.ex.util.Strings", "static", [("join", "join")]),
    ]
    assert _defs(f) == {"Svc": "class", "Svc.Svc": "method", "Svc.run": "method"}
    calls = _calls(f)
    assert ("Svc.run", "repo", "save") in calls and ("Svc.run", "", "join") in calls
    assert ("Svc.run", "", "Helper") in calls
    assert {(x.scope, x.name, x.type) for x in f.bindings} >= {("Svc", "repo", "Repo")}


MD = """\
# Guide

Use `Store.files()` and `llmc.graph.build.update_graph`; see [build](../llmc/graph/build.py#L10).

```python
not_a_mention()  # `inside a fence`
```

## Setup
Setup
-----
Edit llmc/config.py then run `pip install`.
"""


def test_markdown_sections_and_mentions():
    f = extract_doc("docs/guide.md", MD)
    assert [(d.qualname, d.start_line, d.end_line) for d in f.defs] == [
        ("Guide", 1, 12),
        ("Guide > Setup", 9, 9),
        ("Guide > Setup (2)", 10, 12),
    ]
    got = {(m.scope, m.text, m.kind) for m in f.mentions}
    assert ("Guide", "Store.files()", "inline") in got
    assert ("Guide", "llmc.graph.build.update_graph", "inline") in got
    assert ("Guide", "../llmc/graph/build.py#L10", "link") in got
    assert ("Guide > Setup (2)", "llmc/config.py", "path") in got
    assert not any("inside" in m.text or "not_a_mention" in m.text for m in f.mentions)


RST = """\
Reference
=========

.. autoclass:: llmc.store.db.Store
   :members:

Calls :func:`~llmc.graph.load_graph` and ``RepoGraph.where_used``.

Details
-------
See `the docs <docs/graph.md>`_.
"""


def test_rst_headings_autodoc_roles_and_links():
    f = extract_doc("docs/ref.rst", RST)
    assert [(d.qualname, d.start_line) for d in f.defs] == [
        ("Reference", 1),
        ("Reference > Details", 9),
    ]
    got = {(m.scope, m.text, m.kind) for m in f.mentions}
    assert ("Reference", "llmc.store.db.Store", "autodoc") in got
    assert ("Reference", "llmc.graph.load_graph", "role") in got
    assert ("Reference", "RepoGraph.where_used", "inline") in got
    assert ("Reference > Details", "docs/graph.md", "link") in got


@pytest.mark.parametrize(
    "text,head",
    [
        ('Optional["Foo"]', "Foo"),
        ("&mut Foo<T>", "Foo"),
        ("*db.Conn", "db.Conn"),
        ("Foo | None", "Foo"),
        ("list[Foo]", "list"),
        ("Box<dyn Tr>", "Tr"),
        ("crate::a::B<T>", "crate.a.B"),
        ("[]string", ""),
    ],
)
def test_type_head(text, head):
    assert type_head(text) == head


def test_syntax_errors_give_partial_facts():
    src = (
        "def ok():\n    return helper()\n\ndef broken(:\n    return (((\n\nclass Later:\n    pass\n"
    )
    f = extract_file("bad.py", src, "python", "code")
    assert f.error.startswith("syntax errors")
    assert "ok" in _defs(f)
    assert ("ok", "", "helper") in _calls(f)


def test_deep_nesting_does_not_recurse():
    deep = "x = " + "(" * 3000 + "1" + ")" * 3000 + "\n"
    nested = "".join("    " * i + f"def f{i}():\n" for i in range(400)) + "    " * 400 + "pass\n"
    for src in (deep, nested, "[" * 20000):
        f = extract_file("deep.py", src, "python", "code")
        assert isinstance(f, FileFacts)
    f = extract_file("nested.py", nested, "python", "code")
    assert len(f.defs) == 400
    assert f.defs[-1].qualname.count(".") == 399


def test_huge_reference_counts_are_capped():
    src = "def f():\n" + "    g()\n" * (MAX_REFS + 10)
    f = extract_file("gen.py", src, "python", "code")
    assert len(f.calls) == MAX_REFS


def test_unknown_language_and_bad_text_do_not_raise():
    assert extract_file("x.zig", "const x = 1;", "zig", "code").defs == []
    assert extract_file("x.py", "\ud800 = 1\n", "python", "code").path == "x.py"
    assert extract_file("x.md", "# T\n\n`\x00`", "markdown", "doc").defs[0].name == "T"


def test_tags_matches_from_the_chunkers_walk_equal_a_walk_of_their_own():
    """The chunk workers run the graph's tags query in the chunker's walk of the tree
    (``tags_walk``): the spans and the facts are the same as with every query walking the
    tree on its own, for every language with a tags query (the graph fixtures), and the
    shared walk is really taken."""
    from llmc.config import IndexConfig
    from llmc.graph.codec import decode_facts
    from llmc.graph.extract import tags_walk
    from llmc.graph.facts import span_rows, with_span_defs
    from llmc.index.chunk import chunk_file
    from llmc.index.chunk.pool import chunk_one
    from llmc.languages import detect_language
    from tests.graph.graph_helpers import FIXTURES

    cfg = IndexConfig()
    shared = set()
    for project in ("pyshop", "tsapp", "goshop", "javashop", "rskv"):
        for path in sorted((FIXTURES / project).rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(FIXTURES).as_posix()
            text = path.read_text(encoding="utf-8")
            got = chunk_one(rel, text, cfg, graph=True)
            assert not isinstance(got, str), (rel, got)
            lang, category, spans, _, facts = got
            alone = chunk_file(rel, text, lang, category, cfg)
            assert spans == alone, rel
            own = with_span_defs(extract_file(rel, text, lang, category), span_rows(alone))
            assert decode_facts(facts, rel) == own, rel
            also = tags_walk(rel, lang, category)
            if also is not None and lang is not None:
                trees: dict = {}
                chunk_file(rel, text, lang, category, cfg, trees, also=also)
                if also.key in trees:
                    shared.add(detect_language(rel, "")[0])
    assert {"python", "typescript", "javascript", "go", "java", "rust"} <= shared
