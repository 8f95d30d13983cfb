"""An indexed fixture repository for the learn tests (indexed once, copied per test)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo, user_config

from llmc.cli import main

# No LLM in these tests: HyDE off (it would call one), learning thresholds for a tiny repo.
# The user's config (a repository's llmc.toml may not set LLM stages or [learn]).
CONFIG = """[search]
hyde = false

[llm]
provider = "none"

[learn]
min_queries = 8
labeler = "tester"
"""

EXTRA_FILES = {
    "app/billing.py": '''"""Invoices and refunds."""


def compute_invoice_total(lines, tax_rate):
    """Sum of the invoice lines plus tax."""
    subtotal = sum(lines)
    return subtotal * (1 + tax_rate)


def issue_refund(order_id, amount):
    """Send money back to the customer of an order."""
    return {"order": order_id, "refunded": amount}
''',
    "docs/billing.md": """# Billing

## Refund policy

Customers may ask for a refund within 30 days. Support issues the refund from the admin
panel and the money returns to the original card.

## Taxes

Invoices add the regional tax rate to the subtotal.
""",
    "tests/test_billing.py": """from app.billing import compute_invoice_total


def test_invoice_total_adds_tax():
    assert compute_invoice_total([10, 10], 0.5) == 30
""",
}


@pytest.fixture(autouse=True)
def learn_config(isolated_config) -> str:
    """Every learn test runs with ``CONFIG`` as the user's config; returns its text."""
    user_config(CONFIG)
    return CONFIG


@pytest.fixture(scope="session")
def learn_repo_master(tmp_path_factory) -> Path:
    root = make_repo(
        tmp_path_factory.mktemp("learn") / "repo",
        {**SAMPLE_FILES, **EXTRA_FILES},
    )
    result = CliRunner().invoke(main, ["index", str(root), "-q"])
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def learn_repo(learn_repo_master, tmp_path) -> Path:
    """A private copy of the indexed fixture repo (index included)."""
    dest = tmp_path / "repo"
    shutil.copytree(learn_repo_master, dest)
    return dest
