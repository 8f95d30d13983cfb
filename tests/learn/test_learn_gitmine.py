"""Mining a query set from a real git history built in the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_fixtures import git, make_repo, user_config, write_files

from llmc.errors import LearnError
from llmc.learn.gitmine import (
    FileDiff,
    clean_subject,
    formatting_only,
    mine_git,
    version_bump_only,
)

BILLING = '''"""Billing."""


def compute_invoice_total(lines):
    """Sum the invoice lines."""
    total = 0
    for line in lines:
        total += line
    return total


def format_receipt(total):
    return f"total: {total}"
'''

GUIDE = """# Billing guide

## Refunds

Refunds are issued within 30 days.

## Invoices

Invoices are sent monthly.
"""


def _commit(root: Path, message: str, files: dict[str, str]) -> None:
    write_files(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    root = make_repo(
        tmp_path / "repo",
        {"billing.py": BILLING, "docs/guide.md": GUIDE, "pyproject.toml": 'version = "1.0.0"\n'},
    )
    # kept: changes one function (lines 7-8) and a docs section
    _commit(
        root,
        "fix(billing): round invoice totals to cents (#12)\n\nTotals were off by fractions.",
        {
            "billing.py": BILLING.replace(
                "        total += line\n    return total",
                "        total += round(line, 2)\n    return round(total, 2)",
            ),
            "docs/guide.md": GUIDE.replace("sent monthly.", "sent monthly, rounded to cents."),
        },
    )
    # skipped: a version bump
    _commit(root, "Bump version to 1.0.1", {"pyproject.toml": 'version = "1.0.1"\n'})
    # skipped: formatting only (quotes and spacing)
    _commit(
        root,
        "tidy up receipt helper",
        {
            "billing.py": (root / "billing.py")
            .read_text()
            .replace('f"total: {total}"', "f'total: {total}'")
        },
    )
    # skipped: only a test changed
    _commit(
        root,
        "cover receipt formatting with a test",
        {"tests/test_billing.py": "def test_x():\n    pass\n"},
    )
    # skipped: a revert
    _commit(
        root,
        "add refund deadline to the guide",
        {"docs/guide.md": GUIDE.replace("30 days", "45 days")},
    )
    git(root, "revert", "--no-edit", "HEAD")
    # skipped: a merge (its branch commit is kept)
    git(root, "checkout", "-q", "-b", "feature")
    _commit(
        root,
        "explain refunds for annual plans",
        {
            "docs/guide.md": (root / "docs/guide.md").read_text()
            + "\nAnnual plans are refunded pro rata.\n"
        },
    )
    git(root, "checkout", "-q", "main")
    _commit(
        root,
        "add a receipt footer with the shop name",
        {
            "billing.py": (root / "billing.py").read_text()
            + "\n\ndef receipt_footer(shop):\n    return f'-- {shop}'\n"
        },
    )
    git(root, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature")
    return root


def test_mine_keeps_real_changes_and_skips_the_rest(history):
    result = mine_git(history, 50)
    by_query = {q.query: q for q in result.queries}
    assert set(result.skipped) == {
        "merge", "revert", "version bump", "formatting only", "no indexed non-test file changed",
        "subject too short",  # the fixture's first commit, "fixture"
    }  # fmt: skip
    assert result.skipped["revert"] == 1
    assert set(by_query) == {
        "round invoice totals to cents: Totals were off by fractions",
        "add refund deadline to the guide",
        "explain refunds for annual plans",
        "add a receipt footer with the shop name",
    }
    rounding = by_query["round invoice totals to cents: Totals were off by fractions"]
    assert rounding.intent == "mixed"
    assert rounding.id.startswith("git:")
    assert rounding.id in result.times
    judged = {(j.path, j.grade): j for j in rounding.relevant}
    # billing.py changed again later (formatting, footer): judged by the function's name
    code = judged[("billing.py", 3)]
    assert code.symbol == "compute_invoice_total" and code.start_line is None
    # the guide changed later too: the section's heading path names it
    doc = next(j for j in rounding.relevant if j.path == "docs/guide.md")
    assert doc.symbol == "Billing guide > Invoices"
    footer = by_query["add a receipt footer with the shop name"]
    assert footer.intent == "code"
    # billing.py is unchanged since that commit: exact lines of the new function
    (j,) = footer.relevant
    assert (j.path, j.start_line, j.grade) == ("billing.py", 16, 3)
    assert j.end_line >= 17 and not j.symbol
    assert "queries from" in result.summary()


def test_mined_set_runs_through_the_eval_loader(history, tmp_path):
    from llmc.eval.queries import load_queries
    from llmc.learn.judgments import write_eval_queries

    result = mine_git(history, 50)
    path = write_eval_queries(result.queries, tmp_path / "mined.jsonl")
    assert [q.query for q in load_queries(path)] == [q.query for q in result.queries]


def test_subject_cleaning_and_diff_filters():
    assert clean_subject("feat(search)!: add HyDE (#42).") == "add HyDE"
    assert clean_subject("Fix crash on empty query #7 [skip ci]") == "Fix crash on empty query"
    black = FileDiff("a.py", ((1, 2),), ('x = ["a", "b"]',), ("x = [", "    'a', 'b',", "]"))
    assert formatting_only([black])
    assert not formatting_only([FileDiff("a.py", ((1, 1),), ("x = 2",), ("x = 1",))])
    bump = FileDiff("pyproject.toml", ((3, 3),), ('version = "2.0.1"',), ('version = "2.0.0"',))
    assert version_bump_only([bump])
    assert not version_bump_only([bump, FileDiff("a.py", ((1, 1),), ("y = 1",), ())])


def test_not_a_git_repository(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(LearnError, match="not a git repository"):
        mine_git(tmp_path, 10)


def test_eval_from_git_cli(history):
    import json

    from click.testing import CliRunner

    from llmc.cli import main

    user_config('[search]\nhyde = false\n[llm]\nprovider = "none"\n')  # no LLM: the user's say
    result = CliRunner().invoke(main, ["eval", "--from-git", "--repo", str(history), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["queries"] == 4 and data["set"] == "git-300"
    assert (history / ".llmc" / "learn" / "git-300.jsonl").is_file()
    assert "4 queries from 10 commits (skipped: 1 merge, 1 revert" in result.stderr
    result = CliRunner().invoke(main, ["eval", "--repo", str(history)])
    assert result.exit_code == 2 and "--from-git" in result.output
