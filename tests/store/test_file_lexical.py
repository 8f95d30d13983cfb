"""The whole-file BM25 index (llmc/store/file_lexical.py): built from the store's spans by
`llmc index`, kept in step by content hash, repaired when lost."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.errors import StoreError
from llmc.paths import db_path, file_index_path
from llmc.store.db import Store
from llmc.store.file_lexical import HASHES_FILE, FileIndex, file_text


def test_file_text_counts_overlapping_lines_once() -> None:
    spans = [
        (1, 2, "import os\nimport re"),
        (4, 7, "class A:\n    def f(self):\n        return 1\n    x = 2"),
        (5, 6, "    def f(self):\n        return 1"),  # a method inside the class
    ]
    assert file_text(spans) == (
        "import os\nimport re\nclass A:\n    def f(self):\n        return 1\n    x = 2"
    )
    assert file_text([]) == ""


def _index(repo, runner: CliRunner) -> None:
    result = runner.invoke(main, ["index", "--no-vectors", str(repo)])
    assert result.exit_code == 0, result.output


def _search(repo, query: str) -> list[str]:
    return [m.path for m in FileIndex(file_index_path(repo), readonly=True).search(query, 10)]


@pytest.fixture()
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "colors.py").write_text(
        "def paint(wall):\n    '''Paint the wall turquoise.'''\n    return wall\n"
    )
    (root / "pkg" / "shapes.py").write_text(
        "def hexagon(side):\n    '''Six sides.'''\n    return 6 * side\n"
    )
    (root / "README.md").write_text("# shapes\n\nDraw a hexagon.\n")
    return root


def test_index_builds_it_and_an_edit_or_removal_follows(repo, tmp_path) -> None:
    runner = CliRunner()
    _index(repo, runner)
    assert set(json.loads((file_index_path(repo) / HASHES_FILE).read_text())) == {
        "README.md", "pkg/colors.py", "pkg/shapes.py"}  # fmt: skip
    assert _search(repo, "turquoise wall") == ["pkg/colors.py"]
    assert _search(repo, "hexagon")[0] in ("pkg/shapes.py", "README.md")
    (repo / "pkg" / "colors.py").write_text("def paint(wall):\n    return 'magenta'\n")
    (repo / "pkg" / "shapes.py").unlink()
    _index(repo, runner)
    assert _search(repo, "turquoise") == []
    assert _search(repo, "magenta") == ["pkg/colors.py"]
    assert _search(repo, "hexagon") == ["README.md"]


def test_its_text_is_what_was_indexed_not_the_file_on_disk(repo) -> None:
    """Documents come from the stored spans: a file changed since the last run answers
    as it was indexed (and nothing outside the store is read)."""
    _index(repo, CliRunner())
    (repo / "pkg" / "colors.py").write_text("def paint(wall):\n    return 'vermilion'\n")
    store = Store(db_path(repo))
    try:
        report = FileIndex(file_index_path(repo)).sync(store)
    finally:
        store.close()
    assert report.written == 0 and report.files == 3
    assert _search(repo, "vermilion") == []
    assert _search(repo, "turquoise") == ["pkg/colors.py"]


@pytest.mark.parametrize("damage", ["wipe", "hashes", "corrupt"])
def test_a_lost_or_damaged_index_is_rebuilt_by_the_next_run(repo, damage) -> None:
    runner = CliRunner()
    _index(repo, runner)
    path = file_index_path(repo)
    if damage == "wipe":  # the documents gone, the hashes kept
        for f in path.iterdir():
            if f.name != HASHES_FILE:
                f.unlink() if f.is_file() else None
    elif damage == "hashes":
        (path / HASHES_FILE).write_text("not json")
    else:
        (path / "meta.json").write_text("{garbage")
    _index(repo, runner)
    assert _search(repo, "turquoise") == ["pkg/colors.py"]


def test_a_reader_without_an_index_says_so(tmp_path) -> None:
    with pytest.raises(StoreError, match="no whole-file index"):
        FileIndex(tmp_path / "nope", readonly=True)


def test_search_files_without_the_index_answers_from_spans(repo) -> None:
    """An index from before the whole-file index (or one whose build failed) still gives
    file-level answers, from the span list alone."""
    import shutil

    runner = CliRunner()
    _index(repo, runner)
    shutil.rmtree(file_index_path(repo))
    args = ["search", "--json", "--files", "--repo", str(repo), "paint the wall turquoise"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip())
    assert out["files"][0]["path"] == "pkg/colors.py" and out["whole_file_weight"] == 0.0
