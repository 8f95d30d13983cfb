"""An overloaded Python function is one result: its implementation (issue 40, item 10)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmc.cli import main
from llmc.search.results import select
from llmc.search.types import Candidate
from llmc.types import Span, StoredSpan

FILEIO = '''"""Files opened in a worker thread."""
from typing import Any, overload


class AsyncFile:
    """An open file whose reads and writes run in a worker thread."""

    def __init__(self, fp: Any) -> None:
        self._fp = fp


@overload
async def open_file(file: str, mode: str, buffering: int = ...) -> AsyncFile: ...


@overload
async def open_file(file: str, mode: str = ..., encoding: str | None = ...) -> AsyncFile: ...


async def open_file(file: str, mode: str = "r", encoding: str | None = None) -> AsyncFile:
    """Open a file asynchronously: the open runs in a worker thread."""
    return AsyncFile(open(file, mode, encoding=encoding))
'''
SOCKETS = '''"""Network connections."""


async def connect_tcp(host: str, port: int) -> object:
    """Open a TCP connection to a host and port."""
    return (host, port)
'''


def _search(root: Path, query: str) -> list[dict]:
    out = CliRunner().invoke(main, ["search", "--json", "--repo", str(root), query, "-k", "5"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["results"]


def test_overload_signatures_do_not_take_places_of_their_own(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "fileio.py").write_text(FILEIO)
    (root / "pkg" / "sockets.py").write_text(SOCKETS)
    assert CliRunner().invoke(main, ["index", str(root), "-q"]).exit_code == 0
    impl = FILEIO.splitlines().index("async def open_file(file: str, mode: str = \"r\", "
                                     "encoding: str | None = None) -> AsyncFile:") + 1  # fmt: skip
    for query in ("open a file asynchronously", "open_file", "open_file overload"):
        results = _search(root, query)
        opens = [r for r in results if r["symbol"] == "open_file"]
        assert [(r["start_line"], r["end_line"]) for r in opens] == [(impl, impl + 2)], results
        assert results[0]["symbol"] == "open_file", results


def _stored(span_id: int, start: int, text: str, qualname: str = "open_file") -> StoredSpan:
    span = Span("pkg/io.py", "python", "code", "function", qualname, qualname, start,
                start + 1, text, "")  # fmt: skip
    return StoredSpan(span_id, span)


def test_the_implementation_takes_the_place_of_a_better_ranked_signature(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "io.py").write_text("x\n")
    spans = {
        1: _stored(1, 1, "@typing.overload\ndef open_file(a: int) -> int: ..."),
        2: _stored(2, 4, "def other(): pass", "other"),
        3: _stored(3, 7, "@overload\ndef open_file(a: str) -> str: ..."),
        4: _stored(4, 10, "def open_file(a):\n    return a"),
    }
    ranked = [Candidate(i, 1.0 / i) for i in (1, 2, 3, 4)]
    sel = select(ranked, lambda ids: {i: spans[i] for i in ids if i in spans}, tmp_path, 3, 0)
    assert [s.id for _, s in sel.chosen] == [4, 2]
    assert sel.chosen[0][0].score == 1.0  # at the signature's place
    assert sel.merged == 2
