"""`llmc doctor` prints no terminal control sequence from a model name or a server's
error text (issue 41, Low): every line goes through the printable formatter."""

from __future__ import annotations

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo, user_config

from llmc.cli import main

ESC_TITLE = "\\u001b]0;pwned\\u0007"  # TOML escapes: ESC ]0; window title BEL


def test_doctor_shows_escape_sequences_as_visible_stand_ins(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    user_config(
        f'[llm]\nprovider = "ollama"\nollama_model = "tiny{ESC_TITLE}\\u001b[2J"\n'
        f'ollama_host = "http://127.0.0.1:9"\nprobe_timeout_s = 0.2\n'
        f'[embedding]\ncode_model = "missing{ESC_TITLE}model"\n'
    )
    result = CliRunner().invoke(main, ["doctor", "--repo", str(root)])
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "␛" in result.output  # shown, not executed
