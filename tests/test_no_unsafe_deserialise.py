"""No executable deserialisation anywhere in llmc/ (DESIGN.md: repository content is
untrusted, nothing under ``.llmc/`` is read back from a format that runs code).

Every ``.py`` under ``llmc/`` is parsed with :mod:`ast` (comments and docstrings do not
count) and checked for imports of pickle-like modules and for loader calls that unpickle:
``torch.load`` without ``weights_only=True``, ``numpy.load`` with ``allow_pickle`` not
``False``, ``yaml.load`` without a safe Loader, ``yaml.unsafe_load`` / ``full_load``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "llmc"

# Modules whose loading runs code chosen by the data (and their C twins).
UNSAFE_MODULES = frozenset(
    {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
)
SAFE_YAML_LOADERS = frozenset({"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"})
UNSAFE_YAML_CALLS = frozenset({"unsafe_load", "unsafe_load_all", "full_load", "full_load_all"})
NUMPY_NAMES = frozenset({"np", "numpy"})


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, "" for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _is_const(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def problems(source: str, filename: str = "<string>") -> list[str]:
    """Each unsafe deserialisation in ``source``, as ``file:line: what``."""
    tree = ast.parse(source, filename)
    out: list[str] = []

    def bad(node: ast.AST, what: str) -> None:
        out.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in UNSAFE_MODULES:
                    bad(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 0 and _top(mod) in UNSAFE_MODULES:
                bad(node, f"imports from {mod}")
            names = {a.name for a in node.names}
            if node.level == 0 and mod == "torch" and "load" in names:
                bad(node, "imports torch.load (call it as torch.load(..., weights_only=True))")
            if node.level == 0 and mod == "yaml" and names & (UNSAFE_YAML_CALLS | {"load"}):
                bad(node, "imports a yaml loader by name (use yaml.safe_load)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in ("__import__", "importlib.import_module") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    if _top(arg.value) in UNSAFE_MODULES:
                        bad(node, f"imports {arg.value} dynamically")
            if name == "torch.load" and not _is_const(_kw(node, "weights_only"), True):
                bad(node, "torch.load without weights_only=True")
            head, _, attr = name.rpartition(".")
            if head in NUMPY_NAMES and attr == "load":
                allow = _kw(node, "allow_pickle")
                if allow is not None and not _is_const(allow, False):
                    bad(node, "numpy.load with allow_pickle")
            if head == "yaml" and attr in UNSAFE_YAML_CALLS:
                bad(node, f"yaml.{attr}")
            if head == "yaml" and attr in ("load", "load_all"):
                loader = _kw(node, "Loader")
                if loader is None and len(node.args) > 1:
                    loader = node.args[1]
                if loader is None or _dotted(loader).rpartition(".")[2] not in SAFE_YAML_LOADERS:
                    bad(node, f"yaml.{attr} without a safe Loader")
    return out


def test_no_module_under_llmc_deserialises_executable_formats():
    found: list[str] = []
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 50  # the scan really looked at the package
    for path in files:
        rel = path.relative_to(ROOT.parent).as_posix()
        found.extend(problems(path.read_text(encoding="utf-8"), rel))
    assert not found, "unsafe deserialisation in llmc/:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import pickle",
        "import cPickle as p",
        "import _pickle",
        "from pickle import loads",
        "import marshal",
        "import shelve",
        "import dill",
        "from cloudpickle import dumps",
        "import joblib.numpy_pickle",
        "def f():\n    import pickle\n    return pickle",
        "__import__('pickle')",
        "import importlib\nimportlib.import_module('marshal')",
        "import torch\ntorch.load(p)",
        "import torch\ntorch.load(p, weights_only=False)",
        "import torch\ntorch.load(p, weights_only=flag)",
        "from torch import load",
        "import numpy as np\nnp.load(p, allow_pickle=True)",
        "import numpy\nnumpy.load(p, allow_pickle=flag)",
        "import yaml\nyaml.load(s)",
        "import yaml\nyaml.load(s, Loader=yaml.Loader)",
        "import yaml\nyaml.load(s, yaml.UnsafeLoader)",
        "import yaml\nyaml.load_all(s, Loader=yaml.FullLoader)",
        "import yaml\nyaml.unsafe_load(s)",
        "import yaml\nyaml.full_load(s)",
        "from yaml import unsafe_load",
    ],
)
def test_the_scan_catches(source):
    assert problems(source), source


@pytest.mark.parametrize(
    "source",
    [
        "# import pickle\nx = 1",
        "'''import pickle; pickle.loads(b)'''",
        "s = 'pickle.loads'",
        "import orjson\norjson.loads(b)",
        "import torch\ntorch.load(p, weights_only=True)",
        "import numpy as np\nnp.load(p)",
        "import numpy as np\nnp.load(p, allow_pickle=False)",
        "import yaml\nyaml.safe_load(s)",
        "import yaml\nyaml.load(s, Loader=yaml.SafeLoader)",
        "import yaml\nyaml.load(s, yaml.CSafeLoader)",
        "import json\njson.load(fh)",
        "from . import pickle_free",
    ],
)
def test_the_scan_allows(source):
    assert not problems(source), source


def test_the_parser_crash_check_hands_its_child_json(monkeypatch):
    """``kills_its_parser`` runs the chunker in a child python: (rel, text, config) go to
    it as JSON on stdin, and the child reads them back (a file that parses: no crash)."""
    import dataclasses
    import json
    import subprocess

    from llmc.config import IndexConfig
    from llmc.index.chunk.pool import kills_its_parser

    cfg = IndexConfig(max_span_lines=40, exclude=["x/**"])
    text = "def f():\n    return 'caf\u00e9 \udcff'\n"
    assert kills_its_parser("a.py", text, cfg) is False

    sent = []

    def run(argv, input, **kw):
        sent.append(input)
        return subprocess.CompletedProcess(argv, -11)

    monkeypatch.setattr(subprocess, "run", run)
    assert kills_its_parser("a.py", text, cfg) is True  # died of a signal
    assert json.loads(sent[0]) == ["a.py", text, dataclasses.asdict(cfg)]
