"""`llmc doctor` prints no terminal control sequence from a model name or a server's
error text (issue 41, Low): every line goes through the printable formatter."""

from __future__ import annotations

import http.server
import json
import threading

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


class _HostileServer(http.server.BaseHTTPRequestHandler):
    """A model server whose answers carry terminal control sequences: ollama's version and
    model names, and an OpenAI-compatible server's error message."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        ollama = {
            "/api/version": {"version": "0.1\x1b[2J"},
            "/api/tags": {"models": [{"name": "evil\x1b]0;owned\x07:latest"}]},
        }
        if self.path in ollama:
            self._send(200, ollama[self.path])
        else:  # /v1/models
            self._send(500, {"error": {"message": "boom \x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b1m"}})

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_doctor_shows_a_servers_escape_sequences_as_visible_stand_ins(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        user_config(
            f'[llm]\nprovider = "auto"\nollama_host = "{url}"\nbase_url = "{url}/v1"\n'
            'openai_model = "m"\nprobe_timeout_s = 5\n'
        )
        result = CliRunner().invoke(main, ["doctor", "--repo", str(root)])
    finally:
        server.shutdown()
        server.server_close()
    assert "boom" in result.output and "evil" in result.output, result.output
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in result.output, repr(result.output)


def test_an_error_line_shows_control_characters_as_stand_ins(tmp_path):
    """`Error:` lines quote paths and server text; none of their control characters reaches
    the terminal (`workspace remove` echoes the path it was given)."""
    assert CliRunner().invoke(main, ["workspace", "add", "team", str(tmp_path)]).exit_code == 0
    result = CliRunner().invoke(
        main, ["workspace", "remove", "team", str(tmp_path / "evil\x1b]0;pwned\x07dir")]
    )
    assert result.exit_code != 0
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "␛" in result.output
