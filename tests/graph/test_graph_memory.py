"""What keeps a graph update's memory bounded gives the same graph as holding everything:
facts whose calls and mentions stay in their JSON (``LazyFacts``), a memo of bounded
generations, span rows mapped a few hundred files at a time, edges sorted without a key
per edge, and a cold update's facts cache read back from the spool it was given."""

from __future__ import annotations

import shutil

import orjson
import pytest
from graph_helpers import FIXTURES, copy_project, facts_of, filler_factory

from llmc.graph import spanmap, update_graph
from llmc.graph.cache import spill_files
from llmc.graph.codec import LazyFacts, decode_facts, decode_facts_lazy, encode_facts
from llmc.graph.memo import Memo
from llmc.graph.model import FACTS_FILE, GRAPH_FILE
from llmc.graph.output import to_node_link
from llmc.graph.resolve import Resolver

filler = pytest.fixture(name="filler")(filler_factory)


def _mixed(tmp_path):
    root = copy_project(tmp_path, "pyshop")
    shutil.copytree(FIXTURES / "tsapp", root / "web")
    return root


def test_lazy_facts_equal_the_decoded_ones_and_keep_no_calls(tmp_path):
    facts = facts_of(_mixed(tmp_path))
    assert any(f.calls for f in facts.values()) and any(f.mentions for f in facts.values())
    for path, ff in facts.items():
        raw = encode_facts(ff)
        for source in (raw, {path: raw}):
            lazy = decode_facts_lazy(raw, path, source)
            assert isinstance(lazy, LazyFacts)
            assert lazy == ff and ff == lazy and lazy == decode_facts(raw, path)
            assert (lazy.calls, lazy.mentions) == (ff.calls, ff.mentions)
            assert "_calls" not in vars(lazy) and "_mentions" not in vars(lazy)
            assert encode_facts(lazy) == raw
        assert decode_facts_lazy(raw, path + "x", raw) is None  # not that file's
        bad = orjson.loads(raw)
        bad["calls"] = [["scope", 1]]  # checked when decoded, not only when read
        assert decode_facts_lazy(orjson.dumps(bad), path, orjson.dumps(bad)) is None
    lazy.calls = [("set", "by", "hand", 1, False)]  # a set value is kept
    assert lazy.calls == [("set", "by", "hand", 1, False)]


def test_lazy_facts_whose_source_changed_read_as_none_not_an_error(tmp_path):
    facts = facts_of(_mixed(tmp_path))
    path, ff = next((p, f) for p, f in facts.items() if f.calls)
    raw = encode_facts(ff)
    source = {path: raw}
    lazy = decode_facts_lazy(raw, path, source)
    source[path] = b'{"path": "forged"}'
    assert lazy.calls == []
    del source[path]
    assert lazy.calls == []


def test_a_memo_of_small_generations_resolves_the_same(tmp_path):
    facts = facts_of(_mixed(tmp_path))
    full = Resolver(facts, tmp_path)
    full.memo.max_answers = 10**9
    want = full.run()
    small = Resolver(facts, tmp_path)
    small.memo.max_answers = 2
    assert small.run() == want
    assert full.results == small.results  # reads too: the incremental build relies on them
    memo = small.memo
    assert len(memo.memo) <= 2 and len(memo.old) <= 2
    assert not memo.shared or all(k is v for k, v in memo.shared.items())


def test_memo_generations_move_answers_back_and_forget_the_oldest():
    m = Memo(max_answers=2)
    asked: list[str] = []

    def answer(key: str) -> str:
        asked.append(key)
        m.read(("name", key))
        return key.upper()

    for key in ("a", "b", "c", "a", "d", "e", "b"):
        assert m.guard(key, answer, key) == key.upper()
    # a, b: young; c rotates them to old; a moves back; d, e rotate; b was dropped
    assert asked == ["a", "b", "c", "d", "e", "b"]
    assert len(m.memo) + len(m.old) <= 4
    m.reads = set()
    m.guard("b", answer, "b")
    assert m.reads == {("name", "b")}  # a kept answer still reports what it read


def test_spans_mapped_by_file_equal_mapping_them_all(tmp_path, filler):
    root = _mixed(tmp_path)
    f = filler(root)
    f.put()
    facts = facts_of(root)
    r = Resolver(facts, root)
    nodes, _, _ = r.run()
    every = {nid: dict(n) for nid, n in nodes.items()}
    rows = spanmap.read_span_rows(f.store)
    spanmap.attach_spans(every, rows)
    want = spanmap.span_nodes(every, rows)
    for sql_paths in (1, 3, 500):
        by_file = {nid: dict(n) for nid, n in nodes.items()}
        old = spanmap.SQL_PATHS
        spanmap.SQL_PATHS = sql_paths
        try:
            got = spanmap.map_all_spans(f.store, by_file, r.defs)
        finally:
            spanmap.SQL_PATHS = old
        decoded = orjson.loads(b"".join(got.chunks()))
        assert list(decoded.items()) == list(want.items())  # the header's order too
        assert len(got) == len(want)
        assert by_file == every
    assert len(want) > 50


def test_edges_from_the_table_are_written_as_from_rows():
    ids = ["a", "a/b", "a.b", "a::f", "a::f.g", "A", "?f", "b", "ä"]
    table = {
        (s, d, t): {"line": i}
        for i, (s, d, t) in enumerate(
            (s, d, t) for s in ids for d in ids[::-1] for t in ("imports", "calls", "call")
        )
    }
    rows = [(s, d, t, a) for (s, d, t), a in table.items()]
    from llmc.graph.model import GraphStats

    by_rows = to_node_link({}, rows, 1, GraphStats())
    by_table = to_node_link({}, table, 1, GraphStats())
    assert by_rows["edges"] == by_table["edges"]
    assert [(e["source"], e["key"], e["target"]) for e in by_table["edges"]] == sorted(
        (s, t, d) for s, d, t in table
    )


def test_a_cold_update_writes_the_given_facts_to_its_cache(tmp_path, filler):
    """The facts cache of an update given the workers' facts holds those very bytes
    (read again from what was given, not kept), and the next run reads them back."""
    root = _mixed(tmp_path)
    f = filler(root)
    changed = f.put()
    given = {p: encode_facts(ff) for p, ff in facts_of(root).items()}
    reads: list[str] = []

    class Spool(dict):
        def __getitem__(self, key):
            reads.append(key)
            return dict.__getitem__(self, key)

    update_graph(root, f.store, changed, [], f.bump(), facts=Spool(given))
    lines = (root / ".llmc" / FACTS_FILE).read_bytes().split(b"\n")[1:]
    written = {}
    for line in lines:
        if line.startswith(b'["f",'):
            kind, path, _ = orjson.loads(line)
            written[path] = line[len(b'["f",') + len(orjson.dumps(path)) + 1 : -1]
    assert written == {p: given[p] for p in changed}
    assert set(reads) == set(changed)
    graph = (root / ".llmc" / GRAPH_FILE).read_bytes()
    stats = update_graph(root, f.store, [], [], f.bump())  # nothing changed: nothing resolved
    assert stats.files_resolved == 0 and not stats.rebuilt
    assert (
        orjson.loads(graph)["nodes"]
        == orjson.loads((root / ".llmc" / GRAPH_FILE).read_bytes())["nodes"]
    )


def test_spilled_events_read_back_as_resolved_and_checked(tmp_path):
    from llmc.graph.codec import decode_events

    facts = facts_of(_mixed(tmp_path))
    r = Resolver(facts, tmp_path)
    r.run()
    seen = 0
    for res in r.results.values():
        for events in res.phases:
            if events:
                assert decode_events(orjson.dumps(events)) == list(events)
                seen += len(events)
    assert seen > 100
    assert decode_events(b'[["a", "b", "calls", 1.0, 3, ""]]') == [("a", "b", "calls", 1.0, 3, "")]
    for bad in (b"not json", b"{}", b'[["a", "b", "nope", 1.0, 3, ""]]', b'[["a", 1, 2]]', b"[1]"):
        assert decode_events(bad) is None, bad


def test_a_cold_update_leaves_no_spill_files_and_removes_stale_ones(tmp_path, filler):
    import subprocess
    import sys

    root = _mixed(tmp_path)
    f = filler(root)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = spill_files(root / ".llmc", int(gone.stdout), 4)  # a build killed mid-way
    for p in stale:
        p.write_bytes(b"left over")
    update_graph(root, f.store, f.put(), [], f.bump())
    left = {p.name for p in (root / ".llmc").iterdir()}
    assert not [n for n in left if n.endswith(".tmp")], left
    assert GRAPH_FILE in left and FACTS_FILE in left


def test_the_graph_header_is_read_without_the_nodes_and_edges(tmp_path, filler):
    from llmc.graph.output import read_head_only, read_header

    root = _mixed(tmp_path)
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    path = root / ".llmc" / GRAPH_FILE
    header = read_head_only(path)
    whole = read_header(path)
    assert header is not None and len(whole["span_nodes"]) > 50
    assert "span_nodes" not in header  # no update reads it
    assert header == {k: v for k, v in whole.items() if k != "span_nodes"}
    data = orjson.loads(path.read_bytes())
    other = tmp_path / "other.json"
    other.write_bytes(orjson.dumps({"nodes": data["nodes"], "edges": [], "graph": data["graph"]}))
    assert read_head_only(other) is None and read_header(other) == whole  # not laid out so
    other.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])  # torn: header whole
    assert read_head_only(other) == header and read_header(other) is None
    other.write_bytes(path.read_bytes()[:100])
    assert read_head_only(other) is None
    # a graph whose body is torn is rebuilt by the next update that needs it whole
    path.write_bytes(path.read_bytes()[:-10])
    stats = update_graph(root, f.store, [], [], f.bump())
    assert orjson.loads(path.read_bytes())["nodes"] == data["nodes"] and not stats.rebuilt


def test_a_doc_path_found_by_suffix_names_the_one_file_that_ends_so(tmp_path):
    """A doc's path that is neither relative to it nor to the root resolves by suffix: to
    the one file ending so, to no file when several do (looked up by base name, not by a
    scan of every path per mention)."""
    (tmp_path / "docs").mkdir()
    for d in ("pkg/core", "pkg/util", "other/util"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "pkg/core/engine.py").write_text("def run():\n    return 1\n")
    (tmp_path / "pkg/util/helpers.py").write_text("def h():\n    return 2\n")
    (tmp_path / "other/util/helpers.py").write_text("def h():\n    return 3\n")
    (tmp_path / "docs/guide.md").write_text(
        "# Guide\n\nSee [the engine](core/engine.py) and [helpers](util/helpers.py).\n"
    )
    r = Resolver(facts_of(tmp_path), tmp_path)
    assert r.mods.ending_with("core/engine.py") == ["pkg/core/engine.py"]
    assert r.mods.ending_with("helpers.py") == ["other/util/helpers.py", "pkg/util/helpers.py"]
    assert r.mods.ending_with("ngine.py") == []
    _, edges, _ = r.run()
    mentions = {(s, d) for s, d, t, _ in edges if t == "mentions"}
    assert any(d == "pkg/core/engine.py" for _, d in mentions)
    assert not any(d.endswith("helpers.py") for _, d in mentions)


def test_imported_names_kept_for_one_file_at_a_time_resolve_the_same(tmp_path, monkeypatch):
    """Each file's imported names are made when first asked for and kept for the last
    ``NAMES_KEPT`` files (like bindings): evicting them at every step changes nothing."""
    import llmc.graph.lookup as lookup

    root = _mixed(tmp_path)
    for fixture in ("goshop", "javashop", "rskv"):  # Go's dot imports are wildcards
        shutil.copytree(FIXTURES / fixture, root / fixture)
    (root / "goshop/cmd/dot").mkdir(parents=True)
    (root / "goshop/cmd/dot/main.go").write_text(
        'package main\n\nimport . "example.com/shop/internal/store"\n\n'
        "func main() { _ = NewCache() }\n"
    )
    facts = facts_of(root)
    want = Resolver(facts, root).run()
    calls = {(s, d): a for s, d, t, a in want[1] if t == "calls"}
    dot = calls[("goshop/cmd/dot/main.go::main", "goshop/internal/store/cache.go::NewCache")]
    assert dot["confidence"] == 1.0  # through the dot import, not by name
    monkeypatch.setattr(lookup, "NAMES_KEPT", 1)
    monkeypatch.setattr(lookup, "BINDINGS_KEPT", 1)
    small = Resolver(facts, root)
    assert len(small.names) <= 1
    assert small.run() == want
    assert len(small.names) <= 1


def test_span_rows_that_cannot_be_read_by_file_fall_back_to_reading_them_all(tmp_path, filler):
    """The store's own sqlite module's error (sqlite3's or pysqlite3's) means None: the
    caller then reads every row."""
    from llmc.store.sqlite import sqlite_module

    root = _mixed(tmp_path)
    f = filler(root)
    f.put()
    r = Resolver(facts_of(root), root)
    nodes, _, _ = r.run()

    class Failing:
        def execute(self, *a):
            raise sqlite_module().OperationalError("database is locked")

    class Store:
        conn = Failing()

    assert spanmap.map_all_spans(Store(), nodes, r.defs) is None
