"""The test-name and example-sentence query miners (lab.train.kind_queries) on crafted
spans: what becomes a query, what its answer is, and what is skipped."""

from __future__ import annotations

from lab.train.docs_queries import Target, cut_lines
from lab.train.kind_queries import (
    GUIDE_SENTENCE,
    README_SENTENCE,
    TEST_NAME,
    as_question,
    called_names,
    docstrings_of_tests,
    example_sentence_queries,
    first_comment,
    mine_test_names,
    name_phrase,
    resolve,
)
from llmc.types import CODE, DOC, Span


def code(path, kind, symbol, start, end, text, qualname=None) -> Span:
    return Span(path, "python", CODE, kind, symbol, qualname or symbol, start, end, text, "")


def doc(path, symbol, start, end, text) -> Span:
    return Span(path, "markdown", DOC, "section", symbol, symbol, start, end, text, "")


PARSE = code("src/pkg/version.py", "function", "parse_version", 10, 30, "def parse_version(s):")
EPOCH = code("src/pkg/version.py", "function", "split_epoch", 32, 40, "def split_epoch(s):")
HELPER = code("src/pkg/util.py", "function", "make_client", 1, 5, "def make_client():")
TEST = code(
    "tests/test_version.py", "function", "test_parse_version_with_epoch", 5, 9,
    "def test_parse_version_with_epoch():\n    c = make_client()\n"
    "    v = pkg.parse_version('1!2.0')\n    assert v.epoch == 1\n",
)  # fmt: skip
TEST_NOTHING = code(
    "tests/test_version.py", "function", "test_client_works", 11, 13,
    "def test_client_works():\n    assert len(make_list()) == 0\n",
)  # fmt: skip


def test_name_phrase_and_questions() -> None:
    assert name_phrase("test_parse_version_with_epoch") == "parse version with epoch"
    assert name_phrase("testParseVersion") == "parse version"
    assert name_phrase("test_it") == ""  # one word: too short
    assert as_question("Test that a version with an epoch parses.") == (
        "a version with an epoch parses"
    )
    assert as_question("Ensure it works") == ""  # under four words
    assert first_comment("def t():\n    # noqa: E501\n    # the epoch comes before the bang\n") == (
        "the epoch comes before the bang"
    )


def test_called_names_in_order_with_decorators() -> None:
    text = "@retry(stop=stop_after_attempt(3))\ndef f():\n    a.b.run(x)\n    run(y)\n"
    assert called_names(text) == ["retry", "stop_after_attempt", "f", "run"]


def test_docstrings_of_tests_from_source() -> None:
    source = 'def test_a():\n    """Check that a works. More."""\n\ndef helper():\n    """No."""\n'
    assert docstrings_of_tests(source) == {"test_a": "Check that a works"}
    assert docstrings_of_tests("def broken(:\n") == {}


def test_test_name_answers_the_called_definition_sharing_a_word() -> None:
    spans = [PARSE, EPOCH, HELPER, TEST, TEST_NOTHING]
    got = mine_test_names(spans, "pkg", limit=10, seed=0)
    assert len(got) == 1  # test_client_works calls nothing the project defines
    q = got[0]
    assert q.kind == TEST_NAME and q.cut is None
    assert "parse version with epoch" in q.query
    # make_client is called too, but shares no word with the test's name
    assert q.targets == (Target("src/pkg/version.py", 10, 30),)


def test_test_name_prefers_the_docstring() -> None:
    docs = {"tests/test_version.py": {"test_parse_version_with_epoch": "Test that X! parses."}}
    got = mine_test_names([PARSE, TEST], "pkg", 10, 0, docstrings=docs)
    assert got[0].query == "X! parses" or got[0].query.endswith("epoch")  # too short: name
    docs = {"tests/test_version.py": {"test_parse_version_with_epoch": "Versions with an epoch "
                                      "parse into their parts."}}  # fmt: skip
    got = mine_test_names([PARSE, TEST], "pkg", 10, 0, docstrings=docs)
    assert got[0].query == "versions with an epoch parse into their parts"


def test_ambiguous_and_test_definitions_are_not_answers() -> None:
    dup = [code(f"src/pkg/m{i}.py", "function", "parse_version", 1, 2, "") for i in range(3)]
    in_tests = code("tests/helpers.py", "function", "parse_version", 1, 2, "")
    assert mine_test_names([*dup, TEST], "pkg", 10, 0) == []
    assert mine_test_names([in_tests, TEST], "pkg", 10, 0) == []
    defs = {"run": [Target("a.py", 1, 2)], "runner": [Target("b.py", 1, 2)]}
    assert resolve(["run", "runner"], defs) == [Target("b.py", 1, 2)]  # "run": too short


def test_example_sentence_answers_what_the_example_calls() -> None:
    readme = doc(
        "README.md", "Retrying", 1, 12,
        "## Retrying\n\nThe library retries failed calls for you. It waits between tries.\n"
        "To give up after a few tries, combine the conditions:\n\n```python\n"
        "@retry(stop=stop_after_attempt(5))\ndef fetch():\n    pass\n```\n\n"
        "That is all there is to it, and the rest is in the guide for everyone.\n",
    )  # fmt: skip
    retry = code("src/pkg/api.py", "function", "retry", 3, 20, "def retry(**kw):")
    stop = code("src/pkg/stop.py", "function", "stop_after_attempt", 1, 9, "def stop_after...")
    guide = doc(
        "docs/usage.rst", "Usage", 1, 9,
        "Usage\n=====\n\nYou can wait a random time between the tries of a call::\n\n"
        "    wait_random(1, 2)\n\nThat is the whole story about waiting for now.\n",
    )  # fmt: skip
    wait = code("src/pkg/wait.py", "function", "wait_random", 1, 4, "def wait_random():")
    got = example_sentence_queries([readme, retry, stop, guide, wait], "pkg", 5, 0)
    by_kind = {q.kind: q for q in got}
    r = by_kind[README_SENTENCE]
    assert r.query == "To give up after a few tries, combine the conditions"
    assert r.targets == (
        Target("README.md", 1, 12), Target("src/pkg/api.py", 3, 20),
        Target("src/pkg/stop.py", 1, 9),
    )  # fmt: skip
    g = by_kind[GUIDE_SENTENCE]
    assert g.query == "You can wait a random time between the tries of a call"
    assert g.targets[1:] == (Target("src/pkg/wait.py", 1, 4),)
    # the cut blanks the sentence and keeps the line
    lines = readme.text.split("\n")
    cut = r.cut
    assert cut is not None and (cut.first, cut.last) == (3, 4)  # the paragraph's lines
    assert cut_lines(lines, cut)[2:4] == [lines[2], ""]
    # a paragraph followed by prose, not code, gives nothing
    plain = doc("docs/a.md", "A", 1, 4, "# A\n\nThis sentence is followed by more prose here.\n\n"
                "More prose follows it and nothing else at all.\n")  # fmt: skip
    assert example_sentence_queries([plain, retry], "pkg", 5, 0) == []
