"""The facts cache is repository content: a clone can carry a forged ``.llmc/``. Nothing in
it runs code (an old pickle is deleted unread) and nothing in it breaks a build: a cache of
the wrong shape, types or version, or a truncated one, is a miss, and the graph equals a
clean build."""

from __future__ import annotations

import os
import pickle
import subprocess

import orjson
import pytest
from click.testing import CliRunner
from graph_helpers import copy_project, filler_factory, touch_later

from llmc.graph import update_graph
from llmc.graph.cache import JOURNAL, LEGACY
from llmc.graph.codec import decode_facts, encode_facts, encode_result, result_from_data
from llmc.graph.model import FACTS_FILE, FACTS_VERSION, GRAPH_FILE, SCHEMA, SCHEMA_VERSION
from llmc.graph.resolve import Resolver

filler = pytest.fixture(name="filler")(filler_factory)


class _Pwn:
    """Unpickling this opens (creates) ``path``: what a forged pickle cache would do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _body(root):
    data = orjson.loads((root / ".llmc" / GRAPH_FILE).read_bytes())
    return data["nodes"], data["edges"], data["graph"]["span_nodes"]


def _clean_build(root, f, tmp_path):
    """The graph a full build makes of the same store, in a fresh .llmc beside it."""
    llmc = root / ".llmc"
    saved = {p: p.read_bytes() for p in llmc.iterdir() if p.name.startswith(("rag_", "graph_"))}
    for p in saved:
        p.unlink()
    stats = update_graph(root, f.store, sorted(f.store.files()), [], f.store.generation)
    assert stats.rebuilt and stats.files_cached == 0
    body = _body(root)
    for p in llmc.iterdir():
        if p.name.startswith(("rag_", "graph_")):
            p.unlink()
    for p, data in saved.items():
        p.write_bytes(data)
    return body


def _lines(raw: bytes) -> tuple[dict, list]:
    head, *body = [line for line in raw.split(b"\n") if line]
    return orjson.loads(head), [orjson.loads(line) for line in body]


def _join(head, body) -> bytes:
    return b"".join(orjson.dumps(x) + b"\n" for x in [head, *body])


def _edit(rows, kind, fn):
    return [[k, p, fn(v)] if k == kind else [k, p, v] for k, p, v in rows]


def _bad_defs(v):
    return dict(v, defs=[["a", "a", "function", "1", 2, "", False]])


def _bad_calls(v):
    return dict(v, calls="nope")


def _bad_names(v):
    return dict(v, imports=[[r[0], [[1, None]], *r[2:]] for r in v["imports"]] or [["m", "x"]])


def _missing_key(v):
    return {k: x for k, x in v.items() if k != "lang"}


def _forge(variant: str, raw: bytes) -> bytes:
    head, body = _lines(raw)
    if variant == "truncated":
        return raw[: len(raw) // 2]
    if variant == "truncated_header":
        return raw[:25]
    if variant == "empty":
        return b""
    if variant == "not_json":
        return b"\x80\x04\x95garbage\n" + raw
    if variant == "json_list":
        return b"[]\n"
    if variant == "deep":
        return _join(head, body[:3]) + b"[" * 100_000 + b"\n"
    if variant == "wrong_version":
        return _join(dict(head, version=FACTS_VERSION - 1), body)
    if variant == "future_version":
        return _join(dict(head, version=FACTS_VERSION + 1), body)
    if variant == "header_files_list":
        return _join(dict(head, files=list(head["files"])), body)
    if variant == "header_hash_types":
        return _join(dict(head, files={p: 7 for p in head["files"]}), body)
    if variant == "token_not_str":
        return _join(dict(head, token=["x"]), body)
    if variant == "state_wrong":
        return _join(dict(head, state={"version": "2", "name_fallback": 1, "signature": {}}), body)
    if variant == "state_signature_not_list":
        return _join(dict(head, state=dict(head["state"], signature="x")), body)
    if variant == "facts_wrong_types":
        return _join(head, _edit(_edit(body, "f", _bad_defs), "f", _bad_calls))
    if variant == "facts_bad_import_names":
        return _join(head, _edit(body, "f", _bad_names))
    if variant == "facts_missing_key":
        return _join(head, _edit(body, "f", _missing_key))
    if variant == "facts_wrong_path":
        paths = [p for k, p, _ in body if k == "f"]
        moved = dict(zip(paths, paths[1:] + paths[:1], strict=True))
        return _join(head, [[k, moved.get(p, p) if k == "f" else p, v] for k, p, v in body])
    if variant == "facts_not_objects":
        return _join(head, _edit(body, "f", lambda v: [v]))
    if variant == "lines_not_arrays":
        return _join(head, [{"f": p} for _, p, _ in body])
    if variant == "results_wrong_shapes":
        return _join(head, _edit(body, "r", lambda v: [[], [], []]))
    if variant == "results_unknown_count":
        return _join(head, _edit(body, "r", lambda v: [v[0], [["calls", "maybe", 1]], v[2]]))
    if variant == "results_bad_events":
        return _join(head, _edit(body, "r", lambda v: [[[["a", "b"]]] * 4, v[1], v[2]]))
    if variant == "results_bad_reads":
        return _join(head, _edit(body, "r", lambda v: [v[0], v[1], [[{"a": 1}]]]))
    raise AssertionError(variant)


VARIANTS = [
    "truncated",
    "truncated_header",
    "empty",
    "not_json",
    "json_list",
    "deep",
    "wrong_version",
    "future_version",
    "header_files_list",
    "header_hash_types",
    "token_not_str",
    "state_wrong",
    "state_signature_not_list",
    "facts_wrong_types",
    "facts_bad_import_names",
    "facts_missing_key",
    "facts_wrong_path",
    "facts_not_objects",
    "lines_not_arrays",
    "results_wrong_shapes",
    "results_unknown_count",
    "results_bad_events",
    "results_bad_reads",
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_forged_facts_cache_is_a_miss_and_the_graph_equals_a_clean_build(
    tmp_path, filler, variant
):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    cache = root / ".llmc" / FACTS_FILE
    good = cache.read_bytes()
    cache.write_bytes(_forge(variant, good))
    # a no-op update (only the header is read), then an edit (facts and results decoded)
    update_graph(root, f.store, [], [], f.bump())
    assert _body(root) == _clean_build(root, f, tmp_path)
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    cache.write_bytes(_forge(variant, good))
    update_graph(root, f.store, f.put(["shop/util.py"]), [], f.bump())
    assert _body(root) == _clean_build(root, f, tmp_path)


@pytest.mark.parametrize(
    "journal",
    [
        b"\x80\x04garbage",
        b'{"prev": "TOKEN", "token": 5, "hashes": {}, "facts": {}, "results": {}}\n',
        b'{"prev": "TOKEN", "token": "t2", "hashes": [], "facts": {}, "results": {}}\n',
        b'{"prev": "TOKEN", "token": "t2", "hashes": {"shop/util.py": 1}, "facts": {},'
        b' "results": {}}\n',
        b'{"prev": "TOKEN", "token": "t2", "hashes": {}, "facts": {"shop/util.py": [1]},'
        b' "results": {"shop/util.py": {"x": 1}}}\n',
        b'["prev", "TOKEN"]\n',
    ],
)
def test_a_forged_journal_is_a_miss(tmp_path, filler, journal):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    token = orjson.loads((root / ".llmc" / FACTS_FILE).read_bytes().split(b"\n")[0])["token"]
    (root / ".llmc" / JOURNAL).write_bytes(journal.replace(b"TOKEN", token.encode()))
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    update_graph(root, f.store, f.put(["shop/util.py"]), [], f.bump())
    assert _body(root) == _clean_build(root, f, tmp_path)


def test_an_old_pickle_cache_is_deleted_unread(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    pwned = tmp_path / "PWNED"
    for name in LEGACY:
        (root / ".llmc" / name).write_bytes(pickle.dumps({"version": 6, "x": _Pwn(pwned)}))
    update_graph(root, f.store, [], [], f.bump())  # a no-op: only the header is read
    assert not pwned.exists()
    assert not any((root / ".llmc" / name).exists() for name in LEGACY)
    for name in LEGACY:
        (root / ".llmc" / name).write_bytes(pickle.dumps(_Pwn(pwned)))
    (root / ".llmc" / FACTS_FILE).unlink()
    update_graph(root, f.store, sorted(f.store.files()), [], f.bump())
    assert not pwned.exists()
    assert not any((root / ".llmc" / name).exists() for name in LEGACY)


def test_worker_facts_that_are_not_ours_are_re_extracted(tmp_path, filler):
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    changed = f.put()
    given = {p: pickle.dumps(_Pwn(tmp_path / "PWNED")) for p in changed}
    given["shop/util.py"] = b'{"path": "shop/util.py"}'
    update_graph(root, f.store, changed, [], f.bump(), facts=given)
    assert not (tmp_path / "PWNED").exists()
    assert _body(root) == _clean_build(root, f, tmp_path)


def test_codec_round_trips_facts_and_results(tmp_path):
    from graph_helpers import FIXTURES, facts_of

    facts = facts_of(FIXTURES / "pyshop")
    for path, ff in facts.items():
        assert decode_facts(encode_facts(ff), path) == ff
        assert decode_facts(encode_facts(ff), path + "x") is None  # not that file's
    r = Resolver(facts)
    r.run()
    for res in r.results.values():
        assert result_from_data(orjson.loads(encode_result(res))) == res


def _git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
         *args],
        cwd=cwd, check=True, capture_output=True,
    )  # fmt: skip


def test_llmc_index_of_a_clone_with_a_forged_llmc_runs_no_code(tmp_path):
    """A repository that commits a ``.llmc/`` with a pickle whose loading would create a
    file, and a forged facts cache and graph: `llmc index` of a clone creates nothing,
    succeeds, and search finds the code."""
    from llmc.cli import main
    from llmc.types import text_hash

    src = tmp_path / "src"
    (src / ".llmc").mkdir(parents=True)
    text = "def hello_there(name):\n    return greet(name)\n\n\ndef greet(n):\n    return n\n"
    (src / "a.py").write_text(text, encoding="utf-8")
    pwned = tmp_path / "PWNED"
    for name in LEGACY:
        (src / ".llmc" / name).write_bytes(pickle.dumps(_Pwn(pwned)))
    head = {
        "version": FACTS_VERSION,
        "token": "forged",
        "files": {"a.py": text_hash(text)},
        "state": {"version": 2, "name_fallback": True, "signature": [[], [], []]},
    }
    forged_facts = {"path": "a.py", "lang": "python", "category": "code", "defs": [[1, 2]]}
    (src / ".llmc" / FACTS_FILE).write_bytes(
        _join(head, [["f", "a.py", forged_facts], ["r", "a.py", [[], [], [["x"]]]]])
    )
    graph = {"graph": {"schema": SCHEMA, "version": SCHEMA_VERSION, "generation": 0,
                       "facts_token": "forged", "settings": {}},
             "nodes": [], "edges": []}  # fmt: skip
    (src / ".llmc" / GRAPH_FILE).write_bytes(orjson.dumps(graph))
    _git(src, "init", "-q")
    _git(src, "add", "a.py")
    _git(src, "add", "-f", ".llmc")
    _git(src, "commit", "-q", "-m", "a repository with a forged index")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(src), str(clone))
    assert (clone / ".llmc" / "graph_facts.pickle").is_file()

    runner = CliRunner()
    result = runner.invoke(main, ["index", str(clone), "--no-vectors", "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert not pwned.exists()
    assert not (clone / ".llmc" / "graph_facts.pickle").exists()
    nodes = {n["id"] for n in orjson.loads((clone / ".llmc" / GRAPH_FILE).read_bytes())["nodes"]}
    assert {"a.py::hello_there", "a.py::greet"} <= nodes
    result = runner.invoke(
        main, ["search", "hello_there", "--repo", str(clone), "--json", "--no-dense"]
    )
    assert result.exit_code == 0, result.output
    out = orjson.loads(result.stdout.splitlines()[0])
    assert out["results"] and out["results"][0]["path"] == "a.py"
    assert not pwned.exists()
    assert os.listdir(tmp_path).count("PWNED") == 0


def test_a_cache_that_passes_the_checks_but_trips_resolution_is_dropped(
    tmp_path, filler, monkeypatch
):
    """Checks cover shapes and types, not meaning: a well-typed forged cache that still
    makes resolution raise is deleted and the graph built without it."""
    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    real = Resolver.update, Resolver.reuse_from

    def trips(self, *a, **k):  # a kept resolver patches by update, a one-shot by reuse_from
        monkeypatch.setattr(Resolver, "update", real[0])
        monkeypatch.setattr(Resolver, "reuse_from", real[1])
        raise KeyError("a forged entry")

    monkeypatch.setattr(Resolver, "update", trips)
    monkeypatch.setattr(Resolver, "reuse_from", trips)
    util = root / "shop" / "util.py"
    touch_later(util, util.read_text() + "\n\ndef added(x):\n    return round2(x)\n")
    stats = update_graph(root, f.store, f.put(["shop/util.py"]), [], f.bump())
    assert stats.rebuilt and stats.files_cached == 0
    assert _body(root) == _clean_build(root, f, tmp_path)


def test_the_graph_and_its_cache_are_private_files(tmp_path, filler):
    import stat

    root = copy_project(tmp_path, "pyshop")
    f = filler(root)
    update_graph(root, f.store, f.put(), [], f.bump())
    for name in (GRAPH_FILE, FACTS_FILE):
        assert stat.S_IMODE((root / ".llmc" / name).stat().st_mode) == 0o600, name


def test_the_graph_never_reads_through_a_symlink_out_of_the_repo(tmp_path):
    """A rebuild (`llmc graph`, no worker saw the file) reads files itself: it goes through
    llmc.safe_read like the indexer, so a directory symlinked out of the tree is not read."""
    import os

    from llmc.config import GraphConfig
    from llmc.graph.gather import extract_one as _extract_one

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mod.py").write_text("def outside_canary():\n    return 1\n")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "inside.py").write_text("def inside_def():\n    return 2\n")
    os.symlink(outside, root / "pkg")
    escaped = _extract_one(root, "pkg/mod.py", "python", "code", GraphConfig(), None)
    assert escaped.defs == [] and escaped.error.startswith("unreadable")
    inside = _extract_one(root, "inside.py", "python", "code", GraphConfig(), None)
    assert [d.name for d in inside.defs] == ["inside_def"]
