"""The house rules a reader relies on: no function over 100 lines, no module over 600
(DEVELOPERS.md, "How we want the code"), checked on every module under ``llmc/``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "llmc"
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 600


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of every function or method longer than ``limit``
    lines, from its ``def`` (a click command's option decorators declare, they do not
    run)."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > limit:
                        out.append((name, lines))
                visit(child, name + ".")

    visit(ast.parse(source), "")
    return out


def test_no_function_is_over_100_lines():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{name} ({lines} lines)"
        for path in _modules()
        for name, lines in long_functions(path.read_text(encoding="utf-8"))
    ]
    assert not found, "split these at their steps: " + ", ".join(found)


def test_no_module_is_over_600_lines():
    found = [
        f"{path.relative_to(PACKAGE.parent)} ({n} lines)"
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not found, "split these by job: " + ", ".join(found)


def test_the_checks_see_a_long_function_and_a_nested_one():
    body = "\n".join(f"        x{i} = {i}" for i in range(101))
    src = f"def short():\n    pass\n\n\nclass A:\n    def long(self):\n{body}\n"
    src += "\n\ndef outer():\n    def inner():\n" + "\n".join(
        f"        y{i} = {i}" for i in range(101)
    )
    assert long_functions(src) == [("A.long", 102), ("outer", 103), ("outer.inner", 102)]
