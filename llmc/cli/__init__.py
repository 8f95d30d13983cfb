"""The `llmc` command line: each command parses its flags, makes one library call and
hands the result to ``render``. Only this package imports click and rich.

- ``options``: the group that makes an LlmcError one line and its exit code, shared options;
- ``index``: index, status, config;       ``search``: search;       ``graph``: graph *;
- ``daemon``: daemon *, hooks *, mcp;     ``learn``: eval, label, tune;
- ``doctor``: doctor;                     ``render``: everything printed;
- ``workspace``: workspace * (and what search --workspace prints);
- ``team``: team push, team list (the team store).

Results go to stdout, logs and progress to stderr.
"""

from __future__ import annotations

import click

from llmc.cli import daemon, doctor, graph, index, learn, search, team, workspace
from llmc.cli.options import LlmcGroup


@click.group(cls=LlmcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llmc")
def main() -> None:
    """Index a repository and search its code and docs, locally."""


for _module in (index, search, graph, daemon, learn, doctor, workspace, team):
    for _command in _module.COMMANDS:
        main.add_command(_command)

__all__ = ["main"]
