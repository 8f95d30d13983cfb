"""Mining (query, positive, negatives) for the reranker: pure text functions, a tiny project."""

from __future__ import annotations

import random

import pytest

from lab.train.projects import check_allowed, parse_project, reserved_names
from llmc.errors import TrainError
from llmc.learn.mine import (
    CODE_QUERY,
    DOC_SENTENCE,
    DOC_TITLE,
    clean_markup,
    first_sentence,
    mine_project,
    strip_docstrings,
)


def write_files(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_strip_docstrings_removes_def_and_class_docstrings_only():
    code = '''class Jar:
    """A jar of cookies.

    More text.
    """

    def add(self, cookie):
        r"""Add one cookie to the jar."""
        x = """not a docstring"""
        return x
'''
    out = strip_docstrings(code)
    assert "A jar of cookies" not in out
    assert "Add one cookie" not in out
    assert 'x = """not a docstring"""' in out
    assert "def add(self, cookie):" in out and "return x" in out


def test_first_sentence_drops_markup_and_stops_at_the_first_stop():
    doc = "Return the :class:`~http.cookiejar.Cookie` for ``name``. Raises KeyError.\n\nMore."
    assert first_sentence(doc) == "Return the Cookie for name"
    assert first_sentence("Parse *one* line\nof text.") == "Parse one line of text"


def test_clean_markup_handles_myst_roles_and_links():
    assert clean_markup("See {doc}`processors` and [the docs](https://x.org).") == (
        "See processors and the docs."
    )


def test_reserved_projects_are_refused():
    assert {"flask", "click", "jinja2", "attrs", "marshmallow"} <= reserved_names()
    with pytest.raises(TrainError):
        parse_project("flask")
    with pytest.raises(TrainError):
        parse_project("attrs==25.3.0")
    with pytest.raises(TrainError):
        check_allowed(
            [parse_project("requests"), parse_project("httpx")]
            + [type(parse_project("requests"))("Werkzeug", "3.0.0")]
        )


def test_mine_project_pairs_queries_with_stripped_positives(tmp_path):
    write_files(
        tmp_path,
        {
            "pkg/cookies.py": '''
def parse_cookie_header(header):
    """Split a Cookie header into a dict of names and values.

    Longer explanation.
    """
    out = {}
    for part in header.split(";"):
        name, _, value = part.partition("=")
        out[name.strip()] = value.strip()
    return out


def format_cookie(name, value):
    """Render one cookie as a Set-Cookie header value."""
    text = f"{name}={value}"
    text += "; Path=/"
    return text
''',
            "pkg/tests/test_cookies.py": '''
def test_parse():
    """Parsing works for two cookies at once."""
    assert parse_cookie_header("a=1; b=2") == {"a": "1", "b": "2"}
    assert True
    assert True
''',
            "docs/guide.md": """# Guide

## Sending cookies with a request

Pass a dict to the cookies argument and every request of the session sends them to
the server, which is how a login survives between requests made by the same client.

## Usage

The cookie helpers parse headers into dictionaries and render them back again for
responses, so a server and a client can share one implementation of the format. Both
functions are pure and need no network access, so they are cheap to test anywhere.
""",
        },
    )
    mined = mine_project("demo", tmp_path, random.Random(0), n_hard=1, n_random=1)
    by_query = {e.query: e for e in mined.examples}
    code = by_query["Split a Cookie header into a dict of names and values"]
    assert code.kind == CODE_QUERY
    positive = mined.passages[code.positive]
    assert positive.text.startswith("pkg/cookies.py\n")
    assert "def parse_cookie_header" in positive.text
    assert "Split a Cookie header" not in positive.text  # the docstring is gone
    assert code.positive not in code.hard + code.random
    assert code.positive in code.bm25
    title = by_query["Sending cookies with a request"]
    assert title.kind == DOC_TITLE
    assert "Sending cookies" not in mined.passages[title.positive].text
    sentence = [e for e in mined.examples if e.kind == DOC_SENTENCE]
    assert [e.query for e in sentence] == [
        "The cookie helpers parse headers into dictionaries and render them back again "
        "for responses, so a server and a client can share one implementation of the format"
    ]
    # Tests give no queries (their spans stay in the corpus as negatives).
    assert not any("Parsing works" in e.query for e in mined.examples)
