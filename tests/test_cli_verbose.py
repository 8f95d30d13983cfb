"""README: `-v` logs to stderr on every command (issue 40, item 10: 15 lacked it)."""

from __future__ import annotations

import click
from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main


def _commands(cmd: click.Command, path: tuple[str, ...] = ()):
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


def test_every_command_takes_v():
    lacking = [
        " ".join(path)
        for path, cmd in _commands(main)
        if not any("-v" in getattr(p, "opts", ()) for p in cmd.params)
    ]
    assert lacking == []


def test_v_on_a_command_without_its_own_logs_at_info(tmp_path):
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    quiet = CliRunner().invoke(main, ["graph", "stats", "--repo", str(root)])
    assert quiet.exit_code != 2  # not a usage error, whatever the graph says
    loud = CliRunner().invoke(main, ["hooks", "status", "--repo", str(root), "-v"])
    assert loud.exit_code == 0, loud.output
