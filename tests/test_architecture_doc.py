"""docs/architecture.md's module list matches the trees under llmc/ and lab/.

Every ``.py`` module under ``llmc/`` or ``lab/`` (``__init__.py`` and ``__main__.py`` aside) must have
a row in the page's "Modules" section, and every ``llmc/....py`` or ``lab/....py`` path the page names, in
that section or elsewhere, must exist. A module added, split out, moved or deleted without
the map following fails here, naming the paths.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
EXEMPT = {"__init__.py", "__main__.py"}
MODULE_PATH = re.compile(r"`((?:llmc|lab)/[\w/]+\.py)`")


def _modules_section(text: str) -> str:
    """The text from the "## Modules" heading to the next level-2 heading."""
    match = re.search(r"^## Modules\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/architecture.md has no '## Modules' section"
    return match.group(1)


def _tree() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for tower in ("llmc", "lab")
        for path in (ROOT / tower).rglob("*.py")
        if path.name not in EXEMPT and "__pycache__" not in path.parts
    }


def test_every_module_under_llmc_is_in_the_module_list() -> None:
    listed = set(MODULE_PATH.findall(_modules_section(DOC.read_text(encoding="utf-8"))))
    missing = sorted(_tree() - listed)
    assert not missing, (
        "modules not in docs/architecture.md's module list (add a row, one line on its "
        f"job): {missing}"
    )


def test_every_module_the_doc_names_exists() -> None:
    named = set(MODULE_PATH.findall(DOC.read_text(encoding="utf-8")))
    gone = sorted(path for path in named if not (ROOT / path).is_file())
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


def test_the_pattern_reads_the_list() -> None:
    """The check is not vacuous: the list's rows are found, the ground floor's included."""
    listed = set(MODULE_PATH.findall(_modules_section(DOC.read_text(encoding="utf-8"))))
    assert "llmc/config.py" in listed
    assert "llmc/search/pipeline.py" in listed
    assert "lab/protocol/run.py" in listed
    assert len(listed) >= len(_tree()) // 2
