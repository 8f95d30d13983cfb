"""Exact evidence in a query (frames, paths) and long queries read as reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from search_fixture_files import line_of

from llmc.cli import main
from llmc.config import load_config
from llmc.search import evidence
from llmc.search.evidence import DEFINITION, FRAME, PATH, Frame
from llmc.search.pipeline import Searcher
from llmc.search.query import normalize_query
from llmc.search.report import LONG_WORDS, read_query

PY_REPORT = """Crash when loading config with an unknown option

Running the linter with an option it does not know crashes instead of printing an error.

Traceback (most recent call last):
  File "/home/x/venv/bin/lint", line 8, in <module>
    sys.exit(run())
  File "/home/x/proj/pkg/config/config_initialization.py", line 85, in _config_initialization
    raise _UnrecognizedOptionError(options=unrecognized_options)
pkg.config.exceptions._UnrecognizedOptionError
"""

JS_REPORT = """TypeError in router when the path is empty

    TypeError: Cannot read properties of undefined (reading 'length')
        at Layer.match (/srv/app/node_modules/express/lib/router/layer.js:118:16)
        at next (/srv/app/node_modules/express/lib/router/index.js:284:7)
        at Object.<anonymous> (/srv/app/server.js:10:5)
"""


# -- extraction: pure functions ---------------------------------------------------------
def test_python_traceback_frames() -> None:
    frames = evidence.frames(PY_REPORT)
    assert frames == [
        Frame("/home/x/venv/bin/lint", 8, ""),
        Frame("/home/x/proj/pkg/config/config_initialization.py", 85, "_config_initialization"),
    ]


def test_javascript_stack_frames() -> None:
    frames = evidence.frames(JS_REPORT)
    assert frames == [
        Frame("/srv/app/node_modules/express/lib/router/layer.js", 118, "Layer.match"),
        Frame("/srv/app/node_modules/express/lib/router/index.js", 284, "next"),
        Frame("/srv/app/server.js", 10, ""),  # Object.<anonymous> names nothing
    ]


@pytest.mark.parametrize(
    "text, frame",
    [
        ("fails at pkg/mod.py:85 when empty", Frame("pkg/mod.py", 85)),
        ("see pkg/mod.py line 85", Frame("pkg/mod.py", 85)),
        ("see `src\\pkg\\mod.py:12`", Frame("src/pkg/mod.py", 12)),
        ("lib/a.js:10:5 throws", Frame("lib/a.js", 10)),
        ("https://github.com/o/r/blob/main/pkg/mod.py#L85", Frame("pkg/mod.py", 85)),
    ],
)
def test_path_and_line(text: str, frame: Frame) -> None:
    assert frame in evidence.frames(text)


def test_named_paths_keep_their_order_and_skip_urls() -> None:
    text = "In src/attr/_make.py and docs/init.md (see ./README.md); not https://x.io/a.py"
    assert evidence.named_paths(text)[:3] == ["src/attr/_make.py", "docs/init.md", "README.md"]


def test_an_absolute_path_resolves_to_its_longest_indexed_tail() -> None:
    indexed = {"pkg/config/config_initialization.py", "config_initialization.py"}
    found = evidence.resolve_path(
        "/home/x/proj/pkg/config/config_initialization.py", indexed.__contains__, lambda n: []
    )
    assert found == "pkg/config/config_initialization.py"
    assert evidence.resolve_path("/srv/other/thing.py", indexed.__contains__, lambda n: []) is None


def test_a_tail_resolves_only_when_one_file_ends_so() -> None:
    files = ["src/attr/_make.py", "lib/router/layer.js", "lib/a/index.js", "lib/b/index.js"]

    def by_tail(tail: str) -> list[str]:
        return [f for f in files if f.endswith("/" + tail)]

    def resolve(path: str) -> str | None:
        return evidence.resolve_path(path, files.__contains__, by_tail)

    assert resolve("/v/lib/python3.12/site-packages/attr/_make.py") == "src/attr/_make.py"
    assert resolve("layer.js") == "lib/router/layer.js"
    assert resolve("/srv/app/index.js") is None  # two files end so
    assert resolve("/srv/app/missing.js") is None


@pytest.mark.parametrize(
    "path",
    ["CHANGELOG.md", "docs/whats-new.rst", "NEWS", "HISTORY.rst", "doc/whatsnew/v2.rst",
     "changelog.d/123.change.md", "docs/release-notes.md", "CHANGES.txt", "CHANGELOG-2.x.md", "docs/versionhistory.rst"],
)  # fmt: skip
def test_changelogs_have_their_own_path_class(path: str) -> None:
    assert evidence.is_changelog(path)


@pytest.mark.parametrize("path", ["src/news/feed.py", "docs/history_of_x.md", "lib/changes.js"])
def test_code_is_not_a_changelog(path: str) -> None:
    assert not evidence.is_changelog(path)


def test_promote_orders_by_evidence_then_the_rankers_order() -> None:
    ranked = [10, 11, 12, 13, 14, 15]
    strength = {14: DEFINITION, 12: PATH, 15: FRAME, 13: DEFINITION}
    assert evidence.promote(ranked, strength, lambda c: c, within=0) == [15, 12, 13, 14, 10, 11]
    # by default a named definition is kept among the first 5, in the ranker's order
    assert evidence.promote(ranked, strength, lambda c: c) == [15, 12, 10, 13, 14, 11]
    assert evidence.promote([10, 11, 12, 13], {11: DEFINITION}, lambda c: c) == [10, 11, 12, 13]
    late = list(range(20))
    assert evidence.promote(late, {18: DEFINITION}, lambda c: c)[:5] == [0, 1, 2, 3, 18]


def test_promote_keeps_a_changelog_out_of_the_lead() -> None:
    ranked = ["CHANGELOG.md", *[f"src/m{i}.py" for i in range(12)]]
    out = evidence.promote(ranked, {}, lambda c: hash(c), evidence.is_changelog)
    assert out.index("CHANGELOG.md") == evidence.CHANGELOG_AFTER
    by_file = ["CHANGELOG.md", *[f"src/m{i // 2}.py" for i in range(30)]]
    out = evidence.promote(by_file, {}, hash, evidence.is_changelog, lambda c: c)
    assert out[2 * evidence.CHANGELOG_AFTER] == "CHANGELOG.md"  # after 10 files' spans
    named = evidence.promote(ranked, {hash("CHANGELOG.md"): PATH}, hash, evidence.is_changelog)
    assert named[0] == "CHANGELOG.md"  # named in the report: evidence of its own


def test_containing_picks_the_smallest_span() -> None:
    spans = [(1, 1, 100), (2, 80, 90), (3, 84, 86), (4, 95, 99)]
    assert evidence.containing(spans, 85) == 3
    assert evidence.containing(spans, 97) == 4
    assert evidence.containing(spans, 200) is None


# -- reading a long query ---------------------------------------------------------------
@pytest.mark.parametrize(
    "raw", ["how is the discount applied", "ShoppingCart.add_item", "  where   is  x?  "]
)
def test_a_short_query_is_read_as_before(raw: str) -> None:
    parts = read_query(raw)
    text, warnings = normalize_query(raw)
    assert not parts.long
    assert parts.text == parts.lexical == parts.dense == parts.focus == text
    assert parts.warnings == warnings


def test_a_report_is_split_into_parts() -> None:
    parts = read_query(PY_REPORT)
    assert parts.long
    assert parts.title == "Crash when loading config with an unknown option"
    assert parts.dense.startswith(parts.title + ". Running the linter")
    assert any(line.startswith('File "/home/x/proj') for line in parts.traceback)
    assert "raise _UnrecognizedOptionError(options=unrecognized_options)" in parts.code
    assert "_config_initialization" in parts.names
    assert "_UnrecognizedOptionError" in parts.lexical.split()
    assert "config_initialization" in parts.lexical  # the frame's path
    assert len(parts.focus.split()) <= 32
    assert "read as a report" in parts.describe()


def test_a_long_query_is_split_not_cut() -> None:
    raw = "the cart total is wrong " * 30 + " apply_discount_at_the_end"
    parts = read_query(raw, max_chars=2000)
    assert parts.long and parts.text.endswith("apply_discount_at_the_end")
    assert not parts.warnings
    assert "apply_discount_at_the_end" in parts.names
    assert "apply_discount_at_the_end" in parts.lexical.split()


def test_past_max_query_chars_the_parts_are_cut_not_the_evidence() -> None:
    raw = "The cart total is wrong. " * 100 + '\nFile "/x/src/shop/cart.py", line 3, in add'
    parts = read_query(raw, max_chars=2000)
    assert parts.text.endswith('File "/x/src/shop/cart.py", line 3, in add')  # exact reads it
    assert evidence.frames(parts.text) == [Frame("/x/src/shop/cart.py", 3, "add")]
    assert "cart.py" not in parts.lexical  # BM25 reads the first 2000 characters
    assert any("cut to its first 2000" in w and "read from all" in w for w in parts.warnings)


def test_a_report_on_one_line_has_its_first_sentence_as_title() -> None:
    raw = (
        "Card payments fail for large orders. "
        + "The cart total looks right and " * 10
        + "then charge_card raises."
    )
    parts = read_query(raw)
    assert parts.long and parts.title == "Card payments fail for large orders."
    assert "charge_card" in parts.focus.split()
    assert parts.prose.startswith("The cart total looks right")


def test_word_count_decides_on_one_line() -> None:
    assert not read_query(" ".join(["word"] * LONG_WORDS)).long
    assert read_query(" ".join(["word"] * (LONG_WORDS + 1))).long
    assert not read_query("first line\nsecond line").long  # two lines, not a report
    assert read_query("first line\n" + "word " * 12).long
    assert read_query('bad value\nFile "/x/pkg/mod.py", line 3, in f').long


# -- through the pipeline ---------------------------------------------------------------
@pytest.fixture(scope="module")
def searcher(indexed_repo: Path):
    with Searcher(indexed_repo, load_config(indexed_repo)) as s:
        yield s


def _paths(response) -> list[str]:
    return [r.path for r in response.results]


def test_a_traceback_frame_ranks_first(searcher: Searcher) -> None:
    line = line_of("src/shop/payment.py", "def refund_payment")
    report = f"""Refunds fail for old receipts

We see this in production when a customer asks for a refund of an order placed last year,
the shopping cart total and the discount look right but the refund never goes through.

Traceback (most recent call last):
  File "/home/ci/work/shop/src/shop/payment.py", line {line + 1}, in refund_payment
    return gateway.refund(receipt_id)
"""
    response = searcher.search(report, k=5, explain=True)
    first = response.results[0]
    assert (first.path, first.symbol) == ("src/shop/payment.py", "refund_payment")
    notes = [n.note for n in response.explain.stages]
    assert any(n.startswith("read as a report") for n in notes)
    assert any("exact evidence kept on top" in n for n in notes)


def test_a_file_named_in_the_second_line_ranks_first(searcher: Searcher) -> None:
    report = (
        "Discount codes are applied twice\n"
        "The problem is in legacy/tax_rules.py I think, where totals and discounts meet; "
        "the cart adds the discount to the price and then the payment charges the card with "
        "the discounted total again, so customers pay less than they should."
    )
    assert _paths(searcher.search(report, k=5))[0] == "legacy/tax_rules.py"


def test_a_named_definition_is_not_ranked_away(searcher: Searcher) -> None:
    report = (
        "Card payments are declined for every order over a thousand dollars, and the error "
        "says nothing useful. The shopping cart shows the right total, the discount is applied "
        "and the order page looks fine; then charge_card raises and the customer sees a blank "
        "page. Refunds of small orders work. Expected: the payment goes through or a clear "
        "message explains why it did not."
    )
    response = searcher.search(report, k=5)
    assert (response.results[0].path, response.results[0].symbol) == (
        "src/shop/payment.py",
        "charge_card",
    )


def test_a_changelog_does_not_win_a_code_report(repo_copy: Path, isolated_env) -> None:
    (repo_copy / "CHANGELOG.md").write_text(
        "# Changelog\n\n## 2.0\n\n- `apply_discount` rounds the discounted total; "
        "`ShoppingCart.total_price` and `apply_discount` agree on the discount code; "
        "the discount code is applied once to the cart total (apply_discount).\n"
    )
    result = CliRunner().invoke(main, ["index", str(repo_copy), "-q"])
    assert result.exit_code == 0, result.output
    report = (
        "Discount code applied to the cart total gives a wrong total\n"
        "apply_discount returns a total with too many decimals when the discount code is "
        "used on a cart total; ShoppingCart.total_price then adds the discounted total."
    )
    with Searcher(repo_copy, load_config(repo_copy)) as s:
        paths = _paths(s.search(report, k=10))
    assert paths[0] != "CHANGELOG.md"
    assert paths[0] == "src/shop/cart.py"
    if "CHANGELOG.md" in paths:
        assert paths.index("CHANGELOG.md") >= 2


def test_a_doc_heading_named_is_no_definition_evidence(searcher: Searcher) -> None:
    report = (
        "Card payments fail after following the `Installation` steps\n"
        "We installed the toolkit in a fresh virtual environment and configured the "
        "database as the guide says, then every card payment of an order fails with a "
        "gateway error although refunds work."
    )
    response = searcher.search(report, k=5, explain=True)
    notes = [n.note for n in response.explain.stages]
    assert any("`Installation`" in n and "pinned" in n for n in notes)  # the exact stage
    assert not any("exact evidence kept on top" in n for n in notes)  # the rule: not code
