"""Benchmark the repository graph on a real project downloaded from PyPI.

    python benchmarks/bench_graph.py                      # rich==13.9.4
    python benchmarks/bench_graph.py --package httpx==0.28.1 --json
    python benchmarks/bench_graph.py --src .              # a local tree (no download)

Steps: ``pip download`` the pinned sdist into ``benchmarks/.cache`` (once), unpack it, index
it into a fresh store the way ``llmc index`` does (walk, detect, chunk, store; no embeddings:
the graph never reads vectors), then measure

* build: a cold ``update_graph`` over every file, an incremental one after editing one
  file, and a no-op one;
* load: a cold ``read_graph`` of the JSON and a cached ``load_graph``;
* resolution by edge type: resolved / unresolved (name-only) / external references;
* runtime recall (``--trace``, for packages with a workload below): run the package's own
  code under ``sys.setprofile``, keep the caller → callee pairs between its functions whose
  call is written out at the calling line, and report the share the static graph has.

Numbers go to stdout (a table, or one JSON object with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
sys.path.insert(0, str(HERE.parent))

DEFAULT_PACKAGE = "rich==13.9.4"
# A local tree (``--src``) is copied without these (VCS, environments, an old index).
_NOT_COPIED = (".git", ".venv", "venv", ".llmc", "__pycache__", "node_modules", ".cache")

# Code run under the tracer, per package (it imports the unpacked sdist, not site-packages).
WORKLOADS = {
    "rich": """
import io
from rich.console import Console
from rich.table import Table
from rich.panel import Panel
from rich.tree import Tree
from rich.markdown import Markdown
from rich.syntax import Syntax
from rich.pretty import Pretty
from rich.columns import Columns
from rich.rule import Rule
from rich.text import Text
from rich.progress_bar import ProgressBar
from rich.json import JSON
console = Console(file=io.StringIO(), width=90, force_terminal=True, color_system="truecolor")
table = Table(title="Stats", show_lines=True)
table.add_column("name", style="bold cyan")
table.add_column("value", justify="right")
for i in range(5):
    table.add_row(f"row {i}", str(i * 3.5))
console.print(table)
tree = Tree("root")
tree.add("leaf").add("[red]deep")
console.print(Panel(tree, title="tree"))
console.print(Markdown("# Title\\n\\n* one\\n* two\\n\\n`code` and **bold**\\n\\n> quote"))
console.print(Syntax("def f(x):\\n    return x + 1\\n", "python", line_numbers=True))
console.print(Pretty({"a": [1, 2, {"b": None}], "c": (1.5, "x")}))
console.print(Columns([Text(f"item {i}", style="green") for i in range(12)]))
console.print(Rule("end"))
console.print(ProgressBar(total=100, completed=40, width=30))
console.print(JSON('{"k": [1, 2, 3], "v": {"x": true}}'))
console.log("logged", {"x": 1})
text = Text.from_markup("[b]bold[/b] and [i]italic[/i] " * 5)
text.highlight_words(["bold"], "red")
console.print(text, justify="center")
""",
    "httpx": """
import json
import httpx

def handler(request):
    if request.url.path == "/json":
        return httpx.Response(200, json={"ok": True, "path": request.url.path})
    return httpx.Response(404, text="missing", headers={"x-test": "1"})

with httpx.Client(transport=httpx.MockTransport(handler), base_url="https://example.org") as c:
    r = c.get("/json", params={"a": "1"}, headers={"Accept": "application/json"})
    assert r.json()["ok"]
    c.post("/json", content=b"abc")
    c.put("/json", json={"x": 1}, cookies={"s": "1"})
    r = c.get("/nope")
    r.is_error and r.text
    try:
        r.raise_for_status()
    except httpx.HTTPStatusError:
        pass
url = httpx.URL("https://user:pw@example.org:8080/a/b?x=1#frag").copy_with(path="/c")
str(url.join("../d")); httpx.QueryParams({"a": ["1", "2"]}).add("b", "3")
httpx.Headers({"A": "1"}).multi_items(); httpx.Cookies({"a": "b"})
""",
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fetch(spec: str) -> Path:
    """Download (once) and unpack the sdist ``name==version``; return the source root."""
    name, _, version = spec.partition("==")
    if not version:
        raise SystemExit("--package must be pinned: name==version")
    dest = CACHE / f"{name}-{version}"
    if dest.is_dir():
        return dest
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = next(CACHE.glob(f"{name.replace('-', '_')}-{version}.tar.gz"), None) or next(
        CACHE.glob(f"{name}-{version}.tar.gz"), None
    )
    if archive is None:
        log(f"downloading {spec} from PyPI ...")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--dest", str(CACHE), spec],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        archive = next(CACHE.glob(f"*{version}.tar.gz"))
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        (top,) = Path(tmp).iterdir()
        shutil.move(str(top), dest)
    return dest


def index_into_store(src: Path, work: Path):
    """Copy the project to ``work`` and fill a store as ``llmc index`` would (no vectors)."""
    from llmc.config import IndexConfig
    from llmc.index.chunk import chunk_file
    from llmc.index.walk import read_text, walk
    from llmc.languages import detect_language
    from llmc.paths import db_path
    from llmc.store.db import Store
    from llmc.types import text_hash

    shutil.copytree(src, work, ignore=shutil.ignore_patterns(*_NOT_COPIED))
    cfg = IndexConfig()
    store = Store(db_path(work))
    gen = store.bump_generation()
    paths = []
    for wf in walk(work, cfg).files:
        ft = read_text(work, wf.path)
        if ft.text is None:
            continue
        lang, category = detect_language(wf.path, ft.text.split("\n", 1)[0])
        if lang is None:
            continue
        spans = chunk_file(wf.path, ft.text, lang, category, cfg)
        store.replace_file(
            wf.path, lang, category, wf.size, wf.mtime_ns, text_hash(ft.text), spans,
            [None] * len(spans), gen,
        )  # fmt: skip
        paths.append(wf.path)
    return store, paths


def timed(fn, *args, **kw):
    started = time.perf_counter()
    result = fn(*args, **kw)
    return result, time.perf_counter() - started


def bench_build(work: Path, store, paths: list[str]) -> dict:
    from llmc.graph import update_graph

    gen = store.generation
    cold, t_cold = timed(update_graph, work, store, paths, [], gen)
    # incremental: append a function to the largest Python file and re-store it
    target = max((p for p in paths if p.endswith(".py")), key=lambda p: (work / p).stat().st_size)
    text = (work / target).read_text(encoding="utf-8") + "\n\ndef _bench_added():\n    pass\n"
    (work / target).write_text(text, encoding="utf-8")
    from llmc.config import IndexConfig
    from llmc.index.chunk import chunk_file
    from llmc.languages import detect_language
    from llmc.types import text_hash

    lang, category = detect_language(target)
    spans = chunk_file(target, text, lang, category, IndexConfig())
    st = (work / target).stat()
    gen = store.bump_generation()
    store.replace_file(
        target, lang, category, st.st_size, st.st_mtime_ns, text_hash(text), spans,
        [None] * len(spans), gen,
    )  # fmt: skip
    inc, t_inc = timed(update_graph, work, store, [target], [], gen)
    noop, t_noop = timed(update_graph, work, store, [], [], store.bump_generation())
    size = (work / ".llmc" / "rag_graph.json").stat().st_size
    return {
        "files": cold.files,
        "nodes": cold.nodes,
        "edges": cold.edges,
        "nodes_by_kind": cold.nodes_by_kind,
        "edges_by_type": cold.edges_by_type,
        "resolution": cold.resolution,
        "build_cold_s": round(t_cold, 3),
        "build_incremental_s": round(t_inc, 3),
        "incremental_files_extracted": inc.files_extracted,
        "build_noop_s": round(t_noop, 3),
        "graph_json_bytes": size,
        "edited_file": target,
        "noop_nodes_equal": noop.nodes == inc.nodes,
    }


def bench_load(work: Path) -> dict:
    from llmc.graph.query import clear_cache, graph_file, load_graph, read_graph

    path = graph_file(work)
    colds = []
    for _ in range(5):
        _, t = timed(read_graph, path)
        colds.append(t)
    clear_cache()
    load_graph(work)
    warm = []
    for _ in range(50):
        _, t = timed(load_graph, work)
        warm.append(t)
    graph = load_graph(work)
    # a typical query after loading: where-used of the most-called node
    calls_in = max(graph.g.nodes, key=lambda n: graph.degree(n, ["calls"], "in"))
    _, t_q = timed(graph.where_used, calls_in)
    return {
        "load_cold_ms": round(statistics.median(colds) * 1000, 2),
        "load_cached_ms": round(statistics.median(warm) * 1000, 4),
        "where_used_ms": round(t_q * 1000, 2),
        "where_used_of": calls_in,
    }


TRACER = r"""
import json, os, sys, linecache
root = os.path.realpath(sys.argv[1]); workload = sys.argv[2]; out = sys.argv[3]
sys.path.insert(0, root)
pairs = {}

def site(frame):
    code = frame.f_code
    path = os.path.realpath(code.co_filename)
    if not path.startswith(root + os.sep):
        return None
    qual = code.co_qualname
    if "<" in qual.replace("<locals>", "") and qual != "<module>":
        return "skip"
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    qual = "" if qual == "<module>" else qual.replace(".<locals>.", ".")
    return rel, qual

def prof(frame, event, arg):
    if event != "call":
        return
    if not frame.f_code.co_flags & 0x2:  # CO_NEWLOCALS: a function, not a class body
        return
    callee = site(frame)
    if callee is None or callee == "skip":
        return
    caller_frame = frame.f_back
    while caller_frame is not None and site(caller_frame) == "skip":
        caller_frame = caller_frame.f_back
    if caller_frame is None:
        return
    caller = site(caller_frame)
    if caller is None:
        return
    line = linecache.getline(caller_frame.f_code.co_filename, caller_frame.f_lineno)
    name = frame.f_code.co_name
    if name == "__init__":
        name = callee[1].split(".")[-2] if "." in callee[1] else name
    elif name.startswith("__"):
        return
    written = (name + "(") in line.replace(" (", "(")
    key = (caller[0], caller[1], callee[0], callee[1], frame.f_code.co_name == "__init__")
    pairs[key] = pairs.get(key, False) or written

sys.setprofile(prof)
try:
    exec(compile(workload, "<workload>", "exec"), {"__name__": "__bench__"})
finally:
    sys.setprofile(None)
json.dump([list(k) + [v] for k, v in pairs.items()], open(out, "w"))
"""


def bench_trace(work: Path, package: str) -> dict | None:
    """Recall of the static call graph against calls observed at run time."""
    workload = WORKLOADS.get(package)
    if workload is None:
        return None
    from llmc.graph.query import load_graph

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pairs.json"
        script = Path(tmp) / "tracer.py"
        script.write_text(TRACER, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run(
            [sys.executable, str(script), str(work), workload, str(out)],
            check=True, cwd=tmp, env=env,
        )  # fmt: skip
        pairs = json.loads(out.read_text())
    graph = load_graph(work)
    g = graph.g

    def nid(path: str, qual: str) -> str:
        return f"{path}::{qual}" if qual else path

    found = found_any = total = 0
    missing = []
    for c_path, c_qual, d_path, d_qual, is_init, written in pairs:
        if not written:
            continue  # properties, protocols, operators: calls nobody wrote
        src, dst = nid(c_path, c_qual), nid(d_path, d_qual)
        targets = {dst}
        if is_init:
            targets.add(dst.rsplit(".", 1)[0])  # Foo() is an edge to the class Foo
        if src not in g or not targets & set(g.nodes):
            continue
        total += 1
        edges = [
            d for _, v, d in g.out_edges(src, data=True) if v in targets and d["type"] == "calls"
        ]
        if any(d["confidence"] >= 0.5 for d in edges):
            found += 1
        else:
            missing.append(f"{src} -> {dst}")
        name = d_qual.rsplit(".", 1)[-1]
        unresolved = g.has_edge(src, f"?{name}")
        if edges or unresolved:
            found_any += 1
    return {
        "observed_call_pairs": total,
        "recall": round(found / total, 4) if total else None,
        "recall_with_name_only": round(found_any / total, 4) if total else None,
        "missing_examples": sorted(missing)[:15],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", default=DEFAULT_PACKAGE, help="pinned sdist, name==version")
    ap.add_argument("--src", type=Path, help="benchmark this local tree instead of --package")
    ap.add_argument("--trace", action="store_true", help="also measure runtime call recall")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    if args.src is not None:
        src = args.src.resolve()
        args.package = name = src.name
    else:
        src = fetch(args.package)
        name = args.package.split("==")[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / src.name
        log(f"indexing {src.name} into a fresh store ...")
        (store, paths), t_index = timed(index_into_store, src, work)
        report = {"package": args.package, "index_s": round(t_index, 2)}
        report["build"] = bench_build(work, store, paths)
        report["load"] = bench_load(work)
        if args.trace:
            report["trace"] = bench_trace(work, name)
        store.close()

    if args.json:
        print(json.dumps(report, indent=2))
        return
    b, lo = report["build"], report["load"]
    print(f"{args.package}: {b['files']} files, {b['nodes']} nodes, {b['edges']} edges")
    print(
        f"build: cold {b['build_cold_s']:.3f}s, incremental {b['build_incremental_s']:.3f}s "
        f"({b['incremental_files_extracted']} file re-parsed), no-op {b['build_noop_s']:.3f}s; "
        f"json {b['graph_json_bytes'] / 1024:.0f} KiB"
    )
    print(
        f"load: cold {lo['load_cold_ms']:.1f} ms, cached {lo['load_cached_ms']:.4f} ms; "
        f"where-used {lo['where_used_ms']:.1f} ms"
    )
    print("resolution by edge type:")
    for etype, c in b["resolution"].items():
        print(
            f"  {etype:<9} {c['rate'] * 100:5.1f}%  resolved {c['resolved']:>5}  "
            f"unresolved {c['unresolved']:>4}  external {c['external']:>5}"
        )
    t = report.get("trace")
    if t:
        print(
            f"runtime recall: {t['recall']:.3f} of {t['observed_call_pairs']} observed call "
            f"pairs ({t['recall_with_name_only']:.3f} counting name-only edges)"
        )
        for m in t["missing_examples"]:
            print(f"  missing: {m}")


if __name__ == "__main__":
    main()
