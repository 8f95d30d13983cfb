"""Fixture repositories for tests: write files, optionally commit them with real git.

Importable from any test as ``from repo_fixtures import make_repo`` (tests/ is on the
pytest pythonpath); conftest.py modules are not importable by name once subdirectories
have their own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    out = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=True
    )
    return out.stdout


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def make_repo(root: Path, files: dict[str, str | bytes], use_git: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_files(root, files)
    if use_git:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "fixture")
    return root


SAMPLE_FILES: dict[str, str] = {
    "app/store.py": '''"""Persistence for the sample app."""

import sqlite3

DEFAULT_PATH = "app.db"


class SessionStore:
    """Keeps user sessions in SQLite."""

    def __init__(self, path=DEFAULT_PATH):
        self.conn = sqlite3.connect(path)

    def save_session(self, user_id, token):
        """Persist a session token for a user."""
        self.conn.execute("INSERT INTO sessions VALUES (?, ?)", (user_id, token))


def open_store(path):
    """Open the session store at path."""
    return SessionStore(path)
''',
    "app/server.js": """// HTTP server for the sample app
const http = require('http');

class Router {
  constructor() { this.routes = {}; }
  addRoute(path, handler) { this.routes[path] = handler; }
}

function startServer(port) {
  return http.createServer().listen(port);
}

module.exports = { Router, startServer };
""",
    "cmd/main.go": """package main

import "fmt"

type Server struct{ Port int }

func (s *Server) Handle(path string) string {
\treturn fmt.Sprintf("handled %s", path)
}

func main() {
\tfmt.Println("hello")
}
""",
    "docs/guide.md": """# Guide

Welcome to the sample app.

## Installation

Install with pip and run the server.

## Configuration

### Sessions

Sessions are stored in SQLite; set the path with `DEFAULT_PATH`.
""",
    "README.txt": "Sample app.\n\nIt stores sessions and routes requests.\n",
}


class ScriptedLLM:
    """A stand-in LLM for stage tests (``llmc.models.llm.LLM`` protocol): answers from a
    list (cycling), or raises what it is given; records every call. The real model is
    tested end to end elsewhere; this pins what the caller does with an answer."""

    provider = "scripted"

    def __init__(self, answers=("a hypothetical answer",), model: str = "scripted-1"):
        self.answers = list(answers)
        self.model = model
        self.calls: list[dict] = []

    def generate(self, prompt, system=None, max_tokens=None, temperature=None, stop=None,
                 timeout=None, seed=None):  # fmt: skip
        from llmc.models.llm import Generation

        self.calls.append({"prompt": prompt, "system": system, "max_tokens": max_tokens,
                           "temperature": temperature, "timeout": timeout, "seed": seed})  # fmt: skip
        answer = self.answers[(len(self.calls) - 1) % len(self.answers)]
        if isinstance(answer, BaseException):
            raise answer
        return Generation(text=answer, model=self.model, provider=self.provider, latency_ms=5.0)


def user_config(text: str) -> Path:
    """Write the user's own config file (``$XDG_CONFIG_HOME/llmc/config.toml``, a fresh
    folder per test: conftest's ``isolated_config``) and return its path. Tests set
    user-only keys (models, LLM stages, secret switches, the daemon) here: a repository's
    ``llmc.toml`` may not (llmc/repo_config.py)."""
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "llmc" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
