"""Every relative link in README.md and docs/ points at a file that exists (reports move
into docs/reports/; a link left behind should fail here, not in a reader's browser)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_relative_links_resolve():
    broken = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_check_reads_links():
    assert len(_pages()) > 10
    assert any(LINK.search(p.read_text(encoding="utf-8")) for p in _pages())
