"""Two towers: the product (``llmc/``) never imports the lab (``lab/``), and the layers that
answer a query (search, index, store, graph, models, daemon, the MCP server, `llmc search`)
never import the learning code (``llmc.learn``) or the evaluation (``llmc.eval``).

Checked two ways: statically, every import statement of every module (function-level
imports included, since llmc imports heavy things lazily), and at run time, the modules a
real search through the CLI and the daemon's application leave loaded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_fixtures import make_repo

ROOT = Path(__file__).resolve().parents[1]
LAB = ("lab",)
LEARNING = ("llmc.learn", "llmc.eval", "lightgbm")
RUNTIME_PACKAGES = ("search", "index", "store", "graph", "models", "daemon")
RUNTIME_MODULES = ("llmc.mcp", "llmc.feedback", "llmc.cli.search", "llmc.cli.index")


def _imports(source: str) -> set[str]:
    """Every absolute module name an import statement in ``source`` names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _names(targets: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(t for t in targets if any(t == p or t.startswith(p + ".") for p in prefixes))


def _is_runtime(module: str) -> bool:
    parts = module.split(".")
    return (len(parts) > 1 and parts[1] in RUNTIME_PACKAGES) or module in RUNTIME_MODULES


def violations(package_dir: Path) -> list[str]:
    """``module -> imported`` for each import that breaks the contract, under the package
    at ``package_dir`` (named by its folder)."""
    out = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent).with_suffix("")
        module = ".".join(p for p in rel.parts if p != "__init__")
        targets = _imports(path.read_text(encoding="utf-8"))
        bad = _names(targets, LAB)
        if _is_runtime(module):
            bad += _names(targets, LEARNING)
        out += [f"{module} -> {t}" for t in bad]
    return out


def test_the_product_never_imports_the_lab_and_the_runtime_never_imports_learning():
    assert violations(ROOT / "llmc") == []


def test_the_check_catches_a_runtime_module_that_imports_the_lab_or_learning(tmp_path):
    pkg = tmp_path / "llmc"
    for name, text in {
        "__init__.py": "",
        "search/__init__.py": "",
        "search/stage.py": "def f():\n    from lab.train.ranker import run\n",
        "daemon/api.py": "import llmc.learn.tune\n",
        "learn/tune.py": "from llmc.eval import runner\n",  # learning may read eval
        "cli/learn.py": "from lab import cli\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert violations(pkg) == [
        "llmc.cli.learn -> lab",
        "llmc.cli.learn -> lab.cli",
        "llmc.daemon.api -> llmc.learn.tune",
        "llmc.search.stage -> lab.train.ranker",
        "llmc.search.stage -> lab.train.ranker.run",
    ]


_LOADED = """
import json, sys
from click.testing import CliRunner
from llmc.cli import main
from llmc.daemon.asgi import build_app
import llmc.daemon.server, llmc.daemon.api, llmc.mcp
out = CliRunner().invoke(main, ["search", "where are sessions saved", "--repo", sys.argv[1],
                               "--json"])
assert out.exit_code == 0, out.output
names = ("lab", "llmc.learn", "llmc.eval", "lightgbm")
print(json.dumps({"loaded": sorted(m for m in sys.modules if m.split(".")[0] == "lab"
                  or m.startswith(names[1:])), "results": len(json.loads(out.output)["results"])}))
"""


def test_a_search_loads_neither_the_lab_nor_the_learning_code(tmp_path):
    root = make_repo(
        tmp_path / "repo",
        {
            "store.py": "def save_session(s):\n    '''Save the session to disk.'''\n    return s\n",
            "README.md": "# Sessions\n\nSessions are saved by store.save_session.\n",
        },
    )
    env_cmd = [sys.executable, "-m", "llmc", "index", str(root), "-q"]
    assert subprocess.run(env_cmd, capture_output=True, cwd=tmp_path).returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, str(root)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["results"] > 0
    assert report["loaded"] == []


def test_the_wheel_holds_llmc_only():
    """What `pip install .` ships: the packages setuptools finds under pyproject's include
    (``llmc*``) and their data; no lab package, protocol or question file among them."""
    from setuptools import find_packages

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; CI runs 3.11

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = find_packages(str(ROOT), **tool["packages"]["find"])
    assert "llmc" in packages and "llmc.search" in packages
    assert [p for p in packages if not p.startswith("llmc")] == []
    assert not [p for p in packages if ".protocol" in p or p.startswith("llmc.train")]
    shipped_data = [
        path
        for pattern in tool["package-data"]["llmc"]
        for path in (ROOT / "llmc").glob(pattern)
        if path.suffix == ".jsonl"
    ]
    assert {p.parent.name for p in shipped_data} == {"sets"}  # llmc eval's three sets only


def store_connections(package_dir: Path) -> list[str]:
    """``path:line`` of every ``<...>store.conn`` a module reaches for: the index's own
    SQLite connection, past ``Store``'s methods."""
    out = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and node.attr == "conn"):
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if name == "store":
                out.append(f"{path.name}:{node.lineno}")
    return out


def test_search_reads_the_index_through_store_methods_only(tmp_path):
    """The query path asks ``Store`` (spans, paths, files, vectors), never runs SQL on its
    connection: one seam where an index held elsewhere (the team store) can answer."""
    assert store_connections(ROOT / "llmc" / "search") == []
    (tmp_path / "stage.py").write_text("def f(sources):\n    sources.store.conn.execute('x')\n")
    assert store_connections(tmp_path) != []
