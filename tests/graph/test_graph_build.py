"""Building and incrementally updating .llmc/rag_graph.json from a real store."""

from __future__ import annotations

import json
import shutil

import pytest
from graph_helpers import (
    FIXTURES,
    copy_project,
    filler_factory,
    touch_later,
    write_hundred_modules,
)

import llmc.graph.build as build
import llmc.graph.gather as gather
from llmc.config import GraphConfig
from llmc.graph import load_graph, update_graph
from llmc.graph.model import FACTS_FILE, GRAPH_FILE, SCHEMA, SCHEMA_VERSION
from llmc.index.chunk.pool import ChunkPool

filler = pytest.fixture(name="filler")(filler_factory)


def _index(root, filler, cfg=None):
    f = filler(root)
    changed = f.put()
    gen = f.bump()
    return f, update_graph(root, f.store, changed, [], gen, cfg)


def test_full_build_writes_versioned_node_link_json(tmp_path, filler):
    import networkx as nx

    root = copy_project(tmp_path, "pyshop")
    f, stats = _index(root, filler)
    assert stats.rebuilt and stats.files == stats.files_extracted == len(f.store.files())
    assert stats.nodes > 50 and stats.edges_by_type["calls"] >= 35
    assert stats.resolution["calls"]["rate"] >= 0.9
    assert stats.resolution["imports"]["rate"] >= 0.95
    data = json.loads((root / ".llmc" / GRAPH_FILE).read_text())
    meta = data["graph"]
    assert (meta["schema"], meta["version"], meta["generation"]) == (
        SCHEMA,
        SCHEMA_VERSION,
        f.store.generation,
    )
    g = nx.node_link_graph(data, edges="edges")  # plain networkx reads it as it is
    assert g.is_directed() and g.is_multigraph()
    assert g.has_edge("shop/cli.py::main", "shop/service.py::create_service", key="calls")
    assert g.nodes["shop/service.py::OrderService.place"]["kind"] == "method"
    assert not list((root / ".llmc").glob("*.tmp"))


def test_nodes_carry_the_span_that_defines_them(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f, _ = _index(root, filler)
    graph = load_graph(root)
    checked = 0
    for nid, a in graph.g.nodes(data=True):
        if a["kind"] in ("function", "method", "class", "section"):
            assert a.get("span_id") is not None, nid
            span = f.store.spans_by_ids([a["span_id"]])[a["span_id"]].span
            assert span.path == a["path"]
            if a["kind"] != "function" or "." not in a["qualname"]:  # closures share a span
                assert span.qualname == a["qualname"], nid
            assert graph.node_for_span(a["span_id"]) in (nid, nid.rsplit(".", 1)[0])
            checked += 1
    assert checked > 40
    place = graph.node("shop/service.py::OrderService.place")
    spans = graph.spans_for_node(place.id, f.store)
    assert [s.id for s in spans] == [place.span_id]


def test_incremental_update_reparses_only_changed_files(tmp_path, filler, monkeypatch):
    root = copy_project(tmp_path, "pyshop")
    f, first = _index(root, filler)
    parsed: list[str] = []
    real = gather.extract_file
    monkeypatch.setattr(gather, "extract_file", lambda p, *a: parsed.append(p) or real(p, *a))

    # rename util.note: its callers in unchanged files must see the change
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text().replace("def note(", "def notify("))
    changed = f.put(["shop/util.py"])
    stats = update_graph(root, f.store, changed, [], f.bump())
    assert parsed == ["shop/util.py"]
    assert (stats.files_extracted, stats.files_cached) == (1, first.files - 1)
    assert not stats.rebuilt
    graph = load_graph(root)
    assert "shop/util.py::notify" in graph and "shop/util.py::note" not in graph
    callers = {e.other for e in graph.neighbors("shop/util.py::notify", ["calls"], "in")}
    assert callers == set()  # service.py and memory.py still call note(), which is gone
    place = {e.other for e in graph.neighbors("shop/service.py::OrderService.place", ["calls"])}
    assert "shop/util.py::round2" in place

    # nothing changed: nothing parsed, same graph, new generation
    parsed.clear()
    again = update_graph(root, f.store, [], [], f.bump())
    assert parsed == [] and again.files_extracted == 0 and again.nodes == stats.nodes
    assert load_graph(root).generation == f.store.generation

    # delete a file
    (root / "shop" / "events.py").unlink()
    f.remove(["shop/events.py"])
    gone = update_graph(root, f.store, [], ["shop/events.py"], f.bump())
    assert parsed == [] and gone.files == stats.files - 1
    graph = load_graph(root)
    assert "shop/events.py" not in graph and "shop/events.py::Bus" not in graph


def test_an_update_for_the_generation_the_graph_was_written_for_reads_and_writes_nothing(
    tmp_path, filler, monkeypatch
):
    """A no-op run (the store's generation unchanged) leaves ``rag_graph.json`` as it is,
    without reading it back; one that ends short of how it is written is written again."""
    import llmc.graph.build as build_module

    root = copy_project(tmp_path, "pyshop")
    f, first = _index(root, filler)
    graph_file = root / ".llmc" / GRAPH_FILE
    before = graph_file.stat()
    reads: list[object] = []
    real_read = build_module.read_json
    monkeypatch.setattr(build_module, "read_json", lambda p: reads.append(p) or real_read(p))
    same = update_graph(root, f.store, [], [], f.store.generation)
    after = graph_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert reads == [] and not same.rebuilt and same.files_extracted == 0
    assert (same.nodes, same.edges, same.files) == (first.nodes, first.edges, first.files)
    assert same.files_cached == first.files
    assert load_graph(root).generation == f.store.generation

    graph_file.write_bytes(graph_file.read_bytes()[:-1])  # cut short
    again = update_graph(root, f.store, [], [], f.store.generation)
    assert (again.nodes, again.edges) == (first.nodes, first.edges)
    assert graph_file.read_bytes().endswith(b"]}") and len(reads) == 1
    assert load_graph(root).node("shop/service.py::OrderService.place") is not None


def test_missing_or_corrupt_files_are_rebuilt(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f, first = _index(root, filler)
    llmc = root / ".llmc"
    (llmc / GRAPH_FILE).write_text("{not json", encoding="utf-8")
    stats = update_graph(root, f.store, [], [], f.bump())
    assert stats.rebuilt and stats.nodes == first.nodes
    assert load_graph(root).generation == f.store.generation

    (llmc / FACTS_FILE).write_text("[]", encoding="utf-8")  # cache of a foreign shape
    stats = update_graph(root, f.store, [], [], f.bump())
    assert stats.rebuilt and stats.files_extracted == stats.files

    (llmc / GRAPH_FILE).unlink()
    stats = update_graph(root, f.store, [], [], f.bump())
    assert stats.rebuilt and stats.files_extracted == 0  # facts still valid by content hash


def test_store_changes_the_graph_missed_are_caught_by_content_hash(tmp_path, filler):
    """A crash between the store write and the graph update: the next update, even with
    an empty ``changed``, sees the file's new content hash and re-extracts it."""
    root = copy_project(tmp_path, "pyshop")
    f, _ = _index(root, filler)
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef extra() -> None:\n    note('x')\n")
    f.put(["shop/util.py"])
    stats = update_graph(root, f.store, [], [], f.bump())
    assert stats.files_extracted == 1
    assert "shop/util.py::extra" in load_graph(root)


def test_disabled_graph_writes_nothing(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    _, stats = _index(root, filler, GraphConfig(enabled=False))
    assert stats.nodes == 0
    assert not (root / ".llmc" / GRAPH_FILE).exists()


HOSTILE = {
    "pkg/__init__.py": "from .a import f\n",
    "pkg/a.py": "from .b import g\n\ndef f():\n    return g()\n",
    "pkg/b.py": "from .a import f\n\ndef g():\n    return f()\n",  # import cycle
    "pkg/cycle.py": (
        "class A(B):\n    def m(self):\n        return self.nope()\n\n"
        "class B(A):\n    pass\n\n"
        "class C(C):\n    pass\n\n"
        "def rec(n):\n    x = x.next()\n    y = y\n    return rec(n - 1) + x.go() + y.go()\n"
    ),
    "pkg/reexport.py": "from .reexport import thing\nfrom .reexport import *\n\nthing()\n",
    "pkg/broken.py": "def ok():\n    return helper(\n\ndef (:\n  ]]]\n",
    "pkg/big.py": "".join(f"def fn_{i}(x):\n    return fn_{i + 1}(x)\n\n" for i in range(3000)),
    "src/native.c": "int add(int a, int b) { return a + b; }\nint twice(int x) { return add(x, x); }\n",
    "docs/odd.md": "# A\n## B\n### C\n`" + "x" * 300 + "`\n[bad](http://)\n[](../../..)\n",
}


def test_hostile_repositories_never_crash_the_build(tmp_path, filler):
    root = tmp_path / "hostile"
    for rel, text in HOSTILE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = GraphConfig(max_file_size=20_000)  # pkg/big.py is larger: definitions only
    f, stats = _index(root, filler, cfg)
    graph = load_graph(root)
    assert stats.files == len(HOSTILE)
    # the import cycle resolves both ways
    assert graph.neighbors("pkg/a.py::f", ["calls"]) and graph.neighbors("pkg/b.py::g", ["calls"])
    # the huge file still has its definitions, from the index's spans, but no calls
    assert "pkg/big.py::fn_10" in graph
    assert graph.neighbors("pkg/big.py::fn_10", ["calls"]) == []
    # a language without a graph query: definitions from spans
    assert "src/native.c::add" in graph
    # inheritance cycles and self-referential bindings terminate
    assert "pkg/cycle.py::C" in graph
    assert graph.stats.files_failed == 0
    # and a rebuild from scratch gives the same graph
    (root / ".llmc" / GRAPH_FILE).unlink()
    (root / ".llmc" / FACTS_FILE).unlink()
    again = update_graph(root, f.store, [], [], f.bump(), cfg)
    assert (again.nodes, again.edges) == (stats.nodes, stats.edges)


def test_a_file_gone_from_disk_is_a_message_not_a_crash(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    changed = f.put()
    (root / "shop" / "cli.py").unlink()  # indexed, then deleted before the graph update
    stats = update_graph(root, f.store, changed, [], f.bump())
    assert stats.files_failed == 1
    assert "shop/cli.py" in load_graph(root)


def test_a_failed_write_leaves_the_old_graph(tmp_path, filler, monkeypatch):
    root = copy_project(tmp_path, "pyshop")
    f, _ = _index(root, filler)
    before = (root / ".llmc" / GRAPH_FILE).read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)  # every temp file is written, none lands
    with pytest.raises(OSError):
        update_graph(root, f.store, [], [], f.bump())
    assert (root / ".llmc" / GRAPH_FILE).read_bytes() == before
    assert not list((root / ".llmc").glob(".*.tmp"))


def test_build_of_a_hundred_file_repo_resolves_every_call(tmp_path, filler):
    """~100 Python files with cross-file calls, every one resolved (the cold-build time is
    measured by benchmarks/bench_guards.py, not asserted here)."""
    root = write_hundred_modules(tmp_path / "hundred")
    f = filler(root)
    changed = f.put()
    stats = update_graph(root, f.store, changed, [], f.bump())
    assert stats.files == 100 and stats.resolution["calls"]["rate"] == 1.0


def test_parts_of_a_split_definition_map_to_it(tmp_path, filler):
    root = tmp_path / "long"
    root.mkdir()
    body = "".join(f"    x{i} = helper({i})\n" for i in range(300))
    (root / "long.py").write_text(f"def helper(n):\n    return n\n\n\ndef long():\n{body}")
    f, _ = _index(root, filler)
    graph = load_graph(root)
    parts = [s for s in f.store.spans_for_path("long.py") if s.span.qualname == "long"]
    assert len(parts) > 1
    assert {graph.node_for_span(s.id) for s in parts} == {"long.py::long"}
    assert graph.neighbors("long.py::long", ["calls"])[0].count == 300


def _graph_body(root):
    data = json.loads((root / ".llmc" / GRAPH_FILE).read_text())
    return data["nodes"], data["edges"], data["graph"]["span_nodes"]


def _from_scratch(root, f):
    """The graph a full build makes from the same store; the incremental files are kept."""
    llmc = root / ".llmc"
    saved = {p: p.read_bytes() for p in (llmc / GRAPH_FILE, llmc / FACTS_FILE) if p.exists()}
    for p in saved:
        p.unlink()
    stats = update_graph(root, f.store, sorted(f.store.files()), [], f.store.generation)
    assert stats.rebuilt
    body = _graph_body(root)
    for p, data in saved.items():
        p.write_bytes(data)
    return body


def test_incremental_updates_equal_a_full_build_after_each_edit(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f, _ = _index(root, filler)
    shop = root / "shop"
    util = (shop / "util.py").read_text()
    service = (shop / "service.py").read_text()

    def step(edit, removed=()):
        paths = edit()
        f.remove(list(removed))
        changed = f.put(paths)
        update_graph(root, f.store, changed, list(removed), f.bump())
        assert _graph_body(root) == _from_scratch(root, f)

    def add_function():
        touch_later(shop / "util.py", util + "\n\ndef added_helper(x):\n    return note(x)\n")
        return ["shop/util.py"]

    def remove_function():
        touch_later(shop / "util.py", util.replace("def note(", "def _gone_note("))
        return ["shop/util.py"]

    def change_import():
        touch_later(shop / "service.py", "from shop.util import *\n" + service)
        return ["shop/service.py"]

    def rename_module():
        (shop / "helpers.py").write_text((shop / "util.py").read_text(), encoding="utf-8")
        (shop / "util.py").unlink()
        return ["shop/helpers.py"]

    def delete_file():
        (shop / "helpers.py").unlink()
        return []

    step(add_function)
    step(remove_function)
    step(change_import)
    step(rename_module, removed=["shop/util.py"])
    step(delete_file, removed=["shop/helpers.py"])
    step(lambda: [])  # a no-op run keeps the graph as it is


class _Project:
    """A small Python + TypeScript + Markdown repository drawn from a seeded RNG, kept as
    a model (definitions, imports, calls per module) so edits stay meaningful: functions
    and classes added, removed and renamed, imports changed, files deleted and added."""

    NAMES = ["alpha", "beta", "gamma", "delta", "omega"]  # shared pool: names collide
    CLASSES = ["Store", "Engine", "Base", "Cache"]

    def __init__(self, root, rng):
        self.root, self.rng = root, rng
        self.py: dict[str, dict] = {}  # module -> {"funcs", "classes", "imports"}
        self.ts: dict[str, dict] = {}
        for i in range(4):
            self.py[f"m{i}"] = self._new_module()
        for i in range(3):
            self.ts[f"t{i}"] = self._new_module()

    def _new_module(self) -> dict:
        rng = self.rng
        funcs = {n: [] for n in rng.sample(self.NAMES, rng.randint(1, 3))}
        classes = {c: rng.choice(["", *self.CLASSES]) for c in rng.sample(self.CLASSES, 1)}
        mod = {"funcs": funcs, "classes": classes, "imports": []}
        for f in funcs:
            funcs[f] = [rng.choice(self.NAMES) for _ in range(rng.randint(0, 3))]
        return mod

    # -- rendering ----------------------------------------------------------------------
    def _py_text(self, name: str, m: dict) -> str:
        lines = []
        for other, sym in m["imports"]:
            if sym == "*":
                lines.append(f"from pkg.{other} import *")
            elif sym:
                lines.append(f"from pkg.{other} import {sym}")
            else:
                lines.append(f"from pkg import {other}")
        for cls, base in m["classes"].items():
            lines += [f"\n\nclass {cls}({base}):" if base else f"\n\nclass {cls}:"]
            lines += ["    def run(self):", "        return self.step() + super().run()"]
            lines += ["", "    def step(self):", f"        return {cls}()"]
        for fn, calls in m["funcs"].items():
            lines += [f"\n\ndef {fn}(x=None):"]
            body = []
            for c in calls:
                mods = [o for o, s in m["imports"] if not s]
                if mods and self.rng.random() < 0.4:
                    body.append(f"    {self.rng.choice(mods)}.{c}()")
                else:
                    body.append(f"    {c}()")
            lines += body or ["    return x"]
        return "\n".join(lines) + "\n"

    def _ts_text(self, name: str, m: dict) -> str:
        lines = [f'import {{ {sym} }} from "./{other}";' for other, sym in m["imports"] if sym]
        for cls, base in m["classes"].items():
            ext = f" extends {base}" if base else ""
            lines += [f"export class {cls}{ext} {{", "  run() { return this.step(); }"]
            lines += ["  step() { return 1; }", "}"]
        for fn, calls in m["funcs"].items():
            body = " ".join(f"{c}();" for c in calls)
            lines.append(f"export function {fn}() {{ {body} }}")
        return "\n".join(lines) + "\n"

    def _doc_text(self) -> str:
        refs = [f"`pkg.{m}.{f}`" for m, mod in sorted(self.py.items()) for f in mod["funcs"]]
        return "# Guide\n\nSee " + ", ".join(refs[:6]) + " and `Engine.run`.\n"

    def paths(self) -> dict[str, str]:
        out = {"pkg/__init__.py": "", "docs/guide.md": self._doc_text()}
        out["pkg/__init__.py"] = "from .m0 import *\n" if "m0" in self.py else "X = 1\n"
        for name, m in self.py.items():
            out[f"pkg/{name}.py"] = self._py_text(name, m)
        for name, m in self.ts.items():
            out[f"web/{name}.ts"] = self._ts_text(name, m)
        return out

    def write(self) -> tuple[list[str], list[str]]:
        """Write the model to disk: (changed paths, removed paths)."""
        want = self.paths()
        have = {
            p.relative_to(self.root).as_posix()
            for p in self.root.rglob("*")
            if p.is_file() and ".llmc" not in p.parts
        }
        changed = []
        for rel, text in sorted(want.items()):
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                touch_later(path, text)
                changed.append(rel)
        removed = sorted(have - set(want))
        for rel in removed:
            (self.root / rel).unlink()
        return changed, removed

    # -- edits --------------------------------------------------------------------------
    def edit(self) -> str:
        rng = self.rng
        lang = rng.choice([self.py, self.py, self.ts])
        name = rng.choice(sorted(lang))
        m = lang[name]
        op = rng.choice(
            ["add_func", "remove_func", "rename", "add_class", "remove_class", "imports",
             "imports", "body", "delete_file", "add_file"]
        )  # fmt: skip
        if op == "add_func":
            m["funcs"][rng.choice(self.NAMES)] = [rng.choice(self.NAMES)]
        elif op == "remove_func" and m["funcs"]:
            del m["funcs"][rng.choice(sorted(m["funcs"]))]
        elif op == "rename" and (m["funcs"] or m["classes"]):
            table = m["funcs"] if m["funcs"] and rng.random() < 0.6 else m["classes"]
            if table:
                old = rng.choice(sorted(table))
                pool = self.NAMES if table is m["funcs"] else self.CLASSES
                table[rng.choice(pool)] = table.pop(old)
        elif op == "add_class":
            m["classes"][rng.choice(self.CLASSES)] = rng.choice(["", *self.CLASSES])
        elif op == "remove_class" and m["classes"]:
            del m["classes"][rng.choice(sorted(m["classes"]))]
        elif op == "imports":
            others = [o for o in sorted(lang) if o != name]
            if m["imports"] and rng.random() < 0.4:
                m["imports"].pop(rng.randrange(len(m["imports"])))
            elif others:
                sym = rng.choice(["", "*", *self.NAMES, *self.CLASSES])
                if lang is self.ts and sym in ("", "*"):
                    sym = rng.choice(self.NAMES)
                m["imports"].append((rng.choice(others), sym))
        elif op == "body" and m["funcs"]:
            fn = rng.choice(sorted(m["funcs"]))
            m["funcs"][fn] = [rng.choice(self.NAMES) for _ in range(rng.randint(0, 3))]
        elif op == "delete_file" and len(lang) > 2:
            del lang[name]
        elif op == "add_file":
            prefix = "m" if lang is self.py else "t"
            lang[f"{prefix}{rng.randint(0, 9)}"] = self._new_module()
        return f"{op} {name}"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_edit_sequences_keep_incremental_equal_to_full(tmp_path, filler, seed):
    """Seeded random edits across Python, TypeScript and a doc: after every step the
    incrementally updated graph equals a full build of the same store."""
    import random

    rng = random.Random(seed)
    root = tmp_path / f"rand{seed}"
    root.mkdir()
    project = _Project(root, rng)
    project.write()
    f, _ = _index(root, filler)
    partial = 0
    for step in range(14):
        what = project.edit()
        changed, removed = project.write()
        f.remove(removed)
        put = f.put([p for p in changed if (root / p).read_text(encoding="utf-8").strip()])
        stats = update_graph(root, f.store, put, removed, f.bump())
        assert _graph_body(root) == _from_scratch(root, f), f"seed {seed} step {step}: {what}"
        partial += 0 < stats.files_resolved < stats.files
    assert partial  # some steps re-resolved only part of the repository


def _worker_facts(root, paths):
    """The facts (JSON) the indexer's chunk workers hand to ``update_graph``."""
    from llmc.config import IndexConfig
    from llmc.index.chunk.pool import chunk_one

    out = {}
    for rel in paths:
        got = chunk_one(rel, (root / rel).read_text(encoding="utf-8"), IndexConfig(), graph=True)
        assert not isinstance(got, str) and got[4] is not None, (rel, got)
        out[rel] = got[4]
    return out


def _mixed_project(tmp_path):
    """Python, TypeScript, JavaScript and docs (pyshop + tsapp), a C file (no tags query:
    definitions from spans) and a file with a syntax error."""
    root = copy_project(tmp_path, "pyshop")
    shutil.copytree(FIXTURES / "tsapp", root / "web")
    (root / "web" / "legacy.js").write_text(
        "const { open } = require('./src/db/pool');\n"
        "class Legacy extends Base { run() { return open(this.url); } }\n"
        "function start() { return new Legacy().run(); }\n"
        "module.exports = start;\n",
        encoding="utf-8",
    )
    (root / "native.c").write_text(
        "static int twice(int x) {\n  return 2 * x;\n}\n\nint main(void) {\n"
        "  return twice(1);\n}\n",
        encoding="utf-8",
    )
    (root / "shop" / "broken.py").write_text(
        "def ok():\n    return note(1)\n\ndef bad(:\n    pass\n", encoding="utf-8"
    )
    return root


def test_worker_facts_build_the_same_graph_as_reading_the_files(tmp_path, filler):
    """The indexer passes the facts its chunk workers extracted from their own parse; the
    graph equals the one ``update_graph`` builds by reading and parsing every file, for a
    first build and for an incremental one."""
    root = _mixed_project(tmp_path)
    f = filler(root)
    changed = f.put()
    assert {"web/src/index.ts", "web/legacy.js", "native.c", "docs/usage.md"} <= set(changed)
    stats = update_graph(root, f.store, changed, [], f.bump(), facts=_worker_facts(root, changed))
    assert stats.rebuilt and stats.files_extracted == len(changed)
    body = _graph_body(root)
    assert body == _from_scratch(root, f)
    nodes = {n["id"] for n in body[0]}
    assert {"native.c::twice", "web/legacy.js::Legacy.run", "shop/broken.py::ok"} <= nodes

    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    put = f.put(["shop/util.py", "web/legacy.js"])
    stats = update_graph(root, f.store, put, [], f.bump(), facts=_worker_facts(root, put))
    assert (stats.files_extracted, stats.rebuilt) == (2, False)
    assert _graph_body(root) == _from_scratch(root, f)


def test_worker_facts_mean_no_file_is_read_again(tmp_path, filler, monkeypatch):
    root = _mixed_project(tmp_path)
    f = filler(root)
    changed = f.put()
    given = _worker_facts(root, changed)
    parsed: list[str] = []
    real = gather.extract_file
    monkeypatch.setattr(gather, "extract_file", lambda p, *a: parsed.append(p) or real(p, *a))
    update_graph(root, f.store, changed, [], f.bump(), facts=given)
    assert parsed == []
    # facts that do not decode are no loss: that file is read and parsed instead
    given = {"shop/util.py": b"not json"}
    update_graph(root, f.store, ["shop/util.py"], [], f.bump(), facts=given)
    assert parsed == ["shop/util.py"]


def test_an_index_run_builds_the_graph_from_its_chunk_workers(tmp_path, monkeypatch):
    """`llmc index` with real worker processes: the graph is updated in one of them (beside
    the lexical update), parses no file itself and equals a full build that reads every
    file, after the first run and after an edit."""
    from types import SimpleNamespace

    import llmc.index.chunk.pool as chunk_pool
    import llmc.index.indexer as indexer_module
    from llmc.config import load_config
    from llmc.index.indexer import Indexer
    from llmc.paths import db_path
    from llmc.store.db import Store

    root = _mixed_project(tmp_path)
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(chunk_pool.ChunkPool, "__init__", _two_workers)
    monkeypatch.setattr(indexer_module, "GRAPH_BESIDE_MIN_FILES", 1)
    parsed: list[str] = []
    real = gather.extract_file
    monkeypatch.setattr(gather, "extract_file", lambda p, *a: parsed.append(p) or real(p, *a))
    here: list[int] = []  # updates run in this process
    real_update = build.update_graph
    monkeypatch.setattr(
        build, "update_graph", lambda *a, **k: here.append(1) or real_update(*a, **k)
    )

    def run_and_compare() -> None:
        Indexer(root, load_config(root)).run(vectors=False)
        assert parsed == [] and here == []
        store = Store(db_path(root))
        try:
            assert _graph_body(root) == _from_scratch(root, SimpleNamespace(store=store))
        finally:
            store.close()
        parsed.clear()

    run_and_compare()
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    touch_later(root / "web" / "legacy.js", "function start() { return 1; }\n")
    run_and_compare()


def test_a_small_edit_updates_the_graph_here_with_the_workers_facts(tmp_path, monkeypatch):
    """Fewer changed files than GRAPH_BESIDE_MIN_FILES: the graph is updated in this process
    (where the daemon keeps its warm state), from the facts the workers extracted (no file
    parsed again), and equals a full build."""
    from types import SimpleNamespace

    import llmc.index.chunk.pool as chunk_pool
    import llmc.index.indexer as indexer_module
    from llmc.config import load_config
    from llmc.index.indexer import Indexer
    from llmc.paths import db_path
    from llmc.store.db import Store

    root = _mixed_project(tmp_path)
    monkeypatch.setattr(chunk_pool, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(chunk_pool.ChunkPool, "__init__", _two_workers)
    Indexer(root, load_config(root)).run(vectors=False)
    monkeypatch.setattr(indexer_module, "GRAPH_BESIDE_MIN_FILES", 3)
    parsed: list[str] = []
    real = gather.extract_file
    monkeypatch.setattr(gather, "extract_file", lambda p, *a: parsed.append(p) or real(p, *a))
    here: list[int] = []
    real_update = build.update_graph
    monkeypatch.setattr(
        build, "update_graph", lambda *a, **k: here.append(1) or real_update(*a, **k)
    )
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    touch_later(root / "web" / "legacy.js", "function start() { return 1; }\n")
    Indexer(root, load_config(root)).run(vectors=False)
    assert here == [1] and parsed == []
    store = Store(db_path(root))
    try:
        assert _graph_body(root) == _from_scratch(root, SimpleNamespace(store=store))
    finally:
        store.close()


def _two_workers(self, files_expected: int, *args, **kwargs) -> None:
    """``ChunkPool.__init__`` that uses worker processes even on one core."""
    _REAL_POOL_INIT(self, files_expected, *args, **kwargs)
    self.workers, self.parallel = 2, files_expected > 1


_REAL_POOL_INIT = ChunkPool.__init__


CYCLE = {  # wildcard imports in a cycle, with a second source for the same name each
    "a.py": "from b import *\nfrom d import *\n",
    "b.py": "from a import *\nfrom c import *\n",
    "c.py": "def x():\n    return 1\n",
    "d.py": "def x():\n    return 2\n",
    "use_a.py": "from a import x\n\ndef go():\n    return x()\n",
    "use_b.py": "from b import x\n\ndef go():\n    return x()\n",
}


def test_resolution_does_not_depend_on_the_order_files_are_resolved_in(tmp_path):
    """A lookup cut short by an import cycle is not cached: asked first from ``use_b``,
    ``a.x`` would otherwise be answered through ``d`` for every later file."""
    from graph_helpers import facts_of

    from llmc.graph.resolve import Resolver

    for rel, text in CYCLE.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    facts = facts_of(tmp_path)

    def each_file(order):
        r = Resolver(facts, tmp_path)
        return {p: r.resolve_file(p, facts[p]).phases for p in order}

    forward = each_file(sorted(facts))
    assert each_file(sorted(facts, reverse=True)) == forward

    def calls(path):
        return {e[:2] for phase in forward[path] for e in phase if e[2] == "calls"}

    assert calls("use_a.py") == {("use_a.py::go", "c.py::x")}  # a → b → (a: cut) → c
    assert calls("use_b.py") == {("use_b.py::go", "d.py::x")}  # b → a → (b: cut) → d


@pytest.mark.parametrize("nul", [False, True])
def test_node_link_edges_are_ordered_by_source_type_and_target(nul):
    """Prefixes, separators and case sort as the (source, type, target) tuple does; a NUL
    inside an id (never seen, but possible in a name) too."""
    from itertools import product

    from llmc.graph.build import to_node_link
    from llmc.graph.model import GraphStats

    ids = ["a", "a/b", "a.b", "a::f", "a::f.g", "A", "?f", "b", "a ", "ä"]
    if nul:
        ids += ["a\0b", "a\0"]
    edges = [
        (s, d, t, {"line": i})
        for i, (s, d, t) in enumerate(product(ids, ids[::-1], ["imports", "calls", "call"]))
    ]
    got = to_node_link({}, edges, 1, GraphStats())["edges"]
    want = sorted(edges, key=lambda e: (e[0], e[2], e[1]))
    assert [(e["source"], e["key"], e["target"], e["line"]) for e in got] == [
        (s, t, d, a["line"]) for s, d, t, a in want
    ]
