"""What the query spells exactly comes first (issue 40, items 3 and 4): a lookup's
definition ("class Schema", "the load method") and the code that says a pasted error
message, through `llmc search` on a repository where prose and near names compete."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.search.query import identifiers, lookup_name, pasted_messages

FILES = {
    "src/app/registry.py": '''
        """A registry of classes by name."""

        _registry: dict[str, type] = {}


        def register_class(classname: str, cls: type) -> None:
            """Add a class to the registry of classes, under its class name."""
            _registry[classname] = cls


        def get_class(classname: str) -> type:
            """Look up a class in the class registry by its class name."""
            return _registry[classname]


        def dict_class(ordered: bool) -> type:
            """The dict class a schema class uses."""
            return dict
        ''',
    "src/app/schema.py": '''
        """Schemas."""
        from app.registry import register_class


        class Schema:
            def __init__(self, fields=None):
                self.fields = fields or {}
                register_class(type(self).__name__, type(self))

            def load(self, data):
                return {k: f(data[k]) for k, f in self.fields.items()}
        ''',
    "src/app/globals.py": '''
        """The application context and its stack."""

        _stack: list = []


        def push_context(ctx) -> None:
            """Push an application context on the stack."""
            _stack.append(ctx)


        def current_app():
            """The application of the current application context."""
            if not _stack:
                raise RuntimeError(
                    "Working outside of application context. Push an application"
                    " context first."
                )
            return _stack[-1].app


        def context_depth() -> int:
            """How many application contexts are pushed: the application context depth."""
            return len(_stack)
        ''',
    "src/app/ctx.py": '''
        """Application contexts: push, pop, and ask about them."""


        class AppContext:
            """The application context: binds an application to the current context of work."""

            def __init__(self, app):
                self.app = app

            def push(self) -> None:
                """Push this application context: work inside the application context."""

            def pop(self) -> None:
                """Pop this application context: work outside of it again."""


        def has_app_context() -> bool:
            """Whether an application context is pushed, so work outside of application context fails."""
            return False


        def app_context(app) -> AppContext:
            """A new application context for the application, to work inside of."""
            return AppContext(app)
        ''',
    "docs/context.md": """
        # The application context

        The application context keeps track of the application-level data during a request.
        Working with the application context: push an application context before you use the application.

        ## Outside of an application context

        If you work outside of an application context, push one with `push_context`.

        ## Working outside of application context errors

        The error "working outside of application context" means no application context was pushed.
        Push an application context, or use `app_context` to work inside of one.
        """,
    "docs/schemas.md": """
        # Schema class

        A schema class declares fields. Every schema class is registered in the class registry
        by its class name, so a class can be looked up by name.

        ## Registry of classes

        `get_class` returns a class by its class name.
        """,
    "tests/test_schema.py": """
        from app.schema import Schema


        class Schema2(Schema):
            pass


        def test_load():
            assert Schema({"a": int}).load({"a": "1"}) == {"a": 1}
        """,
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lead")
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    result = CliRunner().invoke(main, ["index", str(root), "-q"])
    assert result.exit_code == 0, result.output
    return root


def _top(repo: Path, query: str) -> dict:
    out = CliRunner().invoke(main, ["search", "--json", "--repo", str(repo), query, "-k", "5"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["results"][0]


@pytest.mark.parametrize(
    "query, path, symbol",
    [
        ("class Schema", "src/app/schema.py", "Schema"),
        ("Schema class", "src/app/schema.py", "Schema"),
        ("the load method", "src/app/schema.py", "load"),
        ("where is get_class defined?", "src/app/registry.py", "get_class"),
        ("RuntimeError: Working outside of application context.", "src/app/globals.py",
         "current_app"),
        ("RuntimeError: Working outside of application context. Push an application context "
         "first.", "src/app/globals.py", "current_app"),
        ('I get "working outside of application context" after a request', "src/app/globals.py",
         "current_app"),
    ],
)  # fmt: skip
def test_what_the_query_spells_comes_first(repo, query, path, symbol):
    top = _top(repo, query)
    assert (top["path"], top["symbol"]) == (path, symbol), top


def test_a_message_no_code_says_moves_nothing(repo):
    """A docs page that says it is no code that raises it: the ranker's order stands."""
    top = _top(repo, "ValueError: the registry of classes is full of schemas")
    assert "exact" not in top["sources"]


@pytest.mark.parametrize(
    "query, name",
    [
        ("class Schema", "Schema"),
        ("Schema class", "Schema"),
        ("the load method", "load"),
        ("def dump", "dump"),
        ("`open_file`", "open_file"),
        ("where is parse_args defined?", "parse_args"),
        ("Nested", "Nested"),
        ("how do I load a schema", ""),
        ("class", ""),
        ("load a class from a file", ""),
        ("what does dict_class return", ""),
    ],
)
def test_lookup_shapes(query, name):
    assert lookup_name(query) == name
    if name:
        assert any(i.name == name and i.strong for i in identifiers(query))


def test_pasted_messages():
    assert pasted_messages("RuntimeError: Working outside of application context.") == [
        "Working outside of application context"
    ]
    assert pasted_messages("pkg.errors.ValidationError: Not a valid integer.") == [
        "Not a valid integer"
    ]
    assert pasted_messages('why "the JSON object must be str" here') == [
        "the JSON object must be str"
    ]
    assert pasted_messages("how do I push an application context") == []
    assert pasted_messages("Error: x") == []  # too short to say anything verbatim
