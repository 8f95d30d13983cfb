"""Patching a kept resolver per file (``llmc.graph.patch``): after every random edit of a
polyglot repository, the updated graph (from the resolver kept in memory, and from the
one rebuilt from the cache on disk) equals a full build of the same store.

The edits aim at what patching must get right: Go methods and Rust impl blocks attached
to a type defined in another file (and the type moving, renamed or removed), bases
declared across files, definitions removed and renamed, imports renamed (``as``),
Java packages and TypeScript aliases, a test file whose targets change, and names shared
by several files (name-only edges and their ``?name`` nodes)."""

from __future__ import annotations

import random
import shutil

import pytest
from graph_helpers import filler_factory, touch_later
from test_graph_warm import _body, _full_build_elsewhere

from llmc.graph import update_graph, warm
from llmc.graph.cache import JOURNAL
from llmc.graph.model import FACTS_FILE

filler = pytest.fixture(name="filler")(filler_factory)

NAMES = ["get", "put", "load", "save"]
TYPES = ["Store", "Cache"]


def _pick(rng: random.Random, pool: list[str], low: int = 0) -> list[str]:
    return sorted(rng.sample(pool, rng.randint(low, len(pool))))


def _go_types(rng):
    types = _pick(rng, TYPES, 1)
    out = ["package svc", ""]
    for t in types:
        embed = "\n\tStore" if t == "Cache" and "Store" in types and rng.random() < 0.5 else ""
        out += [f"type {t} struct {{{embed}\n}}", ""]
    out += ["func New() *Store {", "\treturn &Store{}", "}"] if rng.random() < 0.8 else []
    return "\n".join(out) + "\n"


def _go_methods(rng):
    out = ["package svc", ""]
    for name in _pick(rng, NAMES):
        t = rng.choice(TYPES)
        other = rng.choice(NAMES).capitalize()
        out += [f"func (s *{t}) {name.capitalize()}() int {{", f"\treturn s.{other}()", "}", ""]
    return "\n".join(out)


def _go_main(rng):
    call = rng.choice(NAMES).capitalize()
    alias = rng.choice(["", "store "])
    pkg = alias.strip() or "svc"
    return (
        f'package main\n\nimport {alias}"example.com/shop/svc"\n\n'
        f"func main() {{\n\ts := {pkg}.New()\n\ts.{call}()\n}}\n"
    )


def _rust_model(rng):
    out = []
    for t in _pick(rng, TYPES, 1):
        out += [f"pub struct {t} {{}}", ""]
    if rng.random() < 0.7:
        out += ["pub trait Named {", "    fn name(&self) -> String;", "}", ""]
    return "\n".join(out)


def _rust_service(rng):
    t = rng.choice(TYPES)
    alias = rng.choice(["", " as Thing"])
    local = "Thing" if alias else t
    out = [f"use crate::model::{{{t}{alias}, Named}};", ""]
    if rng.random() < 0.7:
        out += [f"impl Named for {local} {{", '    fn name(&self) -> String { "x".into() }', "}"]
    methods = _pick(rng, NAMES)
    if methods:
        out += [f"impl {local} {{"]
        out += [f"    pub fn {m}(&self) -> usize {{ self.name().len() }}" for m in methods]
        out += ["}"]
    call = rng.choice(NAMES)
    out += ["", f"pub fn run(x: &{local}) -> usize {{", f"    x.{call}()", "}"]
    return "\n".join(out) + "\n"


def _java_base(rng):
    name = rng.choice(["Base", "Root"])
    methods = "".join(f"    public int {m}() {{ return 1; }}\n" for m in _pick(rng, NAMES))
    return f"package shop;\n\npublic class {name} {{\n{methods}}}\n"


def _java_order(rng):
    base = rng.choice(["Base", "Root", ""])
    ext = f" extends {base}" if base else ""
    call = rng.choice(NAMES)
    return (
        f"package shop;\n\npublic class Order{ext} {{\n    int total() {{ return {call}(); }}\n}}\n"
    )


def _java_app(rng):
    imp = rng.choice(["import shop.Order;", "import shop.*;"])
    return (
        f"package app;\n\n{imp}\n\npublic class App {{\n"
        "    int run() { return new Order().total(); }\n}\n"
    )


def _ts_lib(rng):
    out = [f"export function {n}() {{ return 1; }}" for n in _pick(rng, NAMES, 1)]
    if rng.random() < 0.5:
        out.append("export class Store { get() { return 2; } }")
    return "\n".join(out) + "\n"


def _ts_use(rng):
    name = rng.choice(NAMES)
    alias = rng.choice(["", " as picked"])
    local = "picked" if alias else name
    return (
        f'import {{ {name}{alias} }} from "./lib";\n'
        f"export class Shop {{ run() {{ return {local}(); }} }}\n"
    )


def _py_base(rng):
    out = []
    for t in _pick(rng, TYPES, 1):
        out += [f"class {t}:"]
        out += [f"    def {m}(self):\n        return 1\n" for m in _pick(rng, NAMES)] or [
            "    pass\n"
        ]
    for n in _pick(rng, NAMES):
        out += [f"def {n}():\n    return 2\n"]
    return "\n".join(out)


def _py_mod(rng):
    t = rng.choice(TYPES)
    alias = rng.choice(["", " as B"])
    local = "B" if alias else t
    base = local if rng.random() < 0.7 else ""
    call = rng.choice(NAMES)
    return (
        f"from pkg.base import {t}{alias}\n\n\n"
        f"class Order({base}):\n    def total(self):\n        return self.{call}()\n\n\n"
        f"def make():\n    return {call}()\n"
    )


def _py_test(rng):
    target = rng.choice(["Order", "make"])
    call = "Order().total()" if target == "Order" else "make()"
    body = f"def test_it():\n    assert {call}\n" if rng.random() < 0.8 else "X = 1\n"
    return f"from pkg.mod import {target}\n\n\n{body}"


FILES = {
    "go.mod": lambda rng: "module example.com/shop\n\ngo 1.21\n",
    "svc/types.go": _go_types,
    "svc/methods.go": _go_methods,
    "cmd/app/main.go": _go_main,
    "src/lib.rs": lambda rng: "mod model;\nmod service;\n",
    "src/model.rs": _rust_model,
    "src/service.rs": _rust_service,
    "java/shop/Base.java": _java_base,
    "java/shop/Order.java": _java_order,
    "java/app/App.java": _java_app,
    "web/lib.ts": _ts_lib,
    "web/use.ts": _ts_use,
    "pkg/__init__.py": lambda rng: "",
    "pkg/base.py": _py_base,
    "pkg/mod.py": _py_mod,
    "tests/test_mod.py": _py_test,
}
EDITABLE = [p for p in FILES if p not in ("go.mod", "src/lib.rs", "pkg/__init__.py")]


def _write(root, rng, paths):
    changed = []
    for rel in paths:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = FILES[rel](rng)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            touch_later(path, text)
            changed.append(rel)
    return changed


@pytest.mark.parametrize(
    ("seed", "kept"), [(1, True), (2, True), (3, True), (4, False), (5, False)]
)
def test_random_polyglot_edits_patch_to_the_full_build(tmp_path, filler, seed, kept):
    rng = random.Random(seed)
    root = tmp_path / f"poly{seed}"
    root.mkdir()
    _write(root, rng, list(FILES))
    warm.enable(kept)
    try:
        f = filler(root)
        update_graph(root, f.store, f.put(), [], f.bump())
        partial = 0
        for step in range(12):
            edited = rng.sample(EDITABLE, rng.choice([1, 1, 2]))
            put = f.put([p for p in _write(root, rng, edited) if (root / p).stat().st_size])
            stats = update_graph(root, f.store, put, [], f.bump())
            assert _body(root) == _full_build_elsewhere(root, f, tmp_path), (
                f"seed {seed} step {step}: {edited}"
            )
            partial += 0 < stats.files_resolved < stats.files
        assert partial  # the files were patched, not all resolved again
    finally:
        warm.enable(False)
        shutil.rmtree(tmp_path / "scratch", ignore_errors=True)


def _polyglot(tmp_path, filler, seed):
    rng = random.Random(seed)
    root = tmp_path / f"poly{seed}"
    root.mkdir()
    _write(root, rng, list(FILES))
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    return root, rng, f


def _step(root, rng, f, paths=("pkg/base.py", "svc/types.go")):
    put = f.put([p for p in _write(root, rng, list(paths)) if (root / p).stat().st_size])
    return update_graph(root, f.store, put, [], f.bump())


def test_a_kept_update_appends_a_delta_that_a_fresh_process_replays(tmp_path, filler):
    warm.enable()
    try:
        root, rng, f = _polyglot(tmp_path, filler, 7)
        facts = root / ".llmc" / FACTS_FILE
        journal = root / ".llmc" / JOURNAL
        base = facts.read_bytes()  # written whole by the first build
        for _ in range(3):
            _step(root, rng, f)
        assert facts.read_bytes() == base  # the cache is not rewritten ...
        assert journal.stat().st_size > 0  # ... its deltas are appended
    finally:
        warm.enable(False)  # a fresh process: nothing kept
    stats = _step(root, rng, f, EDITABLE)
    assert not stats.rebuilt and stats.files_resolved < stats.files  # cache + journal used
    assert _body(root) == _full_build_elsewhere(root, f, tmp_path)
    assert not journal.exists()  # written whole again by an update that kept nothing


def test_a_torn_journal_makes_the_cache_stale_never_wrong(tmp_path, filler):
    warm.enable()
    try:
        root, rng, f = _polyglot(tmp_path, filler, 8)
        for _ in range(3):
            _step(root, rng, f)
        journal = root / ".llmc" / JOURNAL
        raw = journal.read_bytes()
        journal.write_bytes(raw[:-7])  # killed while appending the last delta
    finally:
        warm.enable(False)
    stats = _step(root, rng, f, EDITABLE)
    assert stats.rebuilt  # the graph's token is past the cache's: everything again
    assert _body(root) == _full_build_elsewhere(root, f, tmp_path)
