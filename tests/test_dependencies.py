"""Every third-party package that llmc imports is declared in pyproject.toml.

A package that only comes along with another one (httpx with ollama, anyio with mcp) can
disappear in that package's next release; declaring what we import keeps installs honest.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> set[str]:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]) for d in deps}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported() -> dict[str, set[str]]:
    """Top-level module -> files importing it, for modules outside stdlib and llmc."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "llmc").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("llmc", "__future__"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_import_is_declared():
    if sys.version_info < (3, 11):  # tomllib; the check itself is version independent
        return
    declared = _declared()
    dists = packages_distributions()
    missing = {
        top: sorted(files)
        for top, files in _imported().items()
        # an import that no installed distribution provides is looked up by its own name
        if not any(_norm(d) in declared for d in dists.get(top, [top]))
    }
    assert not missing, f"imported but not in [project].dependencies: {missing}"
