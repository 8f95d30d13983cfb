"""Repository text reaches the terminal without its control sequences (window title,
clipboard write, colour, CR overwrite, C1 CSI), in plain and JSON output alike."""

from __future__ import annotations

import json

from click.testing import CliRunner
from repo_fixtures import make_repo

from llmc.cli import main
from llmc.cli.render import printable

HOSTILE = (
    "def set_window_title():\n"
    '    """Set the title \x1b]0;pwned\x07 and copy \x1b]52;c;cm0gLXJmIH4=\x07 now\x9b31m."""\n'
    '    return "\x1b[2J\\r overwrite"\n'
)


def test_printable_keeps_text_and_drops_every_control():
    out = printable("a\tb\nc\x1b]0;x\x07\x00\x7f\x85\x9b\udcff")
    assert out.startswith("a\tb\nc")
    assert not any(0 <= ord(ch) < 0x20 and ch not in "\t\n" for ch in out)
    assert not any(0x7F <= ord(ch) <= 0x9F or 0xD800 <= ord(ch) <= 0xDFFF for ch in out)
    assert len(out) == len("a\tb\nc\x1b]0;x\x07\x00\x7f\x85\x9b\udcff")  # one for one


def test_search_output_carries_no_control_sequence(tmp_path):
    root = make_repo(
        tmp_path / "repo",
        {"term\x1b]0;name\x07.py": HOSTILE, "ok.py": "def fine():\n    return 1\n"},
    )
    runner = CliRunner()
    indexed = runner.invoke(main, ["index", str(root), "--no-vectors", "--json"])
    assert indexed.exit_code == 0, indexed.output

    plain = runner.invoke(main, ["search", "--repo", str(root), "--no-hyde", "set window title"])
    assert plain.exit_code == 0, plain.output
    assert "set_window_title" in plain.output
    for bad in ("\x1b", "\x07", "\x9b", "\r"):
        assert bad not in plain.output

    as_json = runner.invoke(
        main, ["search", "--repo", str(root), "--no-hyde", "--json", "set window title"]
    )
    assert as_json.exit_code == 0, as_json.output
    assert not any(
        ord(ch) < 0x20 and ch != "\n" or 0x7F <= ord(ch) <= 0x9F for ch in as_json.output
    )
    results = json.loads(as_json.output)["results"]
    assert results and "\x1b]0;pwned\x07" in results[0]["snippet"]  # the data, intact
    assert results[0]["path"] == "term\x1b]0;name\x07.py"
