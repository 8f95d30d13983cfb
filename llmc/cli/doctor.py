"""`llmc doctor`: what this machine can run (logic: llmc/models/doctor.py, and the search's
stage plan from llmc/search/stage_check.py)."""

from __future__ import annotations

from pathlib import Path

import click

from llmc.cli import render
from llmc.cli.options import json_option, repo_option, setup_logging, verbose_option


@click.command("doctor")
@repo_option
@json_option
@verbose_option
@click.pass_context
def doctor_cmd(ctx: click.Context, root: Path, as_json: bool, verbose: int) -> None:
    """Show what this machine can run: LLM providers, models, device, the search profile and
    what each costly stage would use within the latency budget, sqlite-vec, tree-sitter.

    Exits 1 when a required component (sqlite-vec, tree-sitter) is broken.
    """
    from llmc.config import load_config
    from llmc.models.doctor import run_doctor
    from llmc.paths import gate_state
    from llmc.search.stage_check import stages_check

    setup_logging(verbose)
    gate_state(root)  # it reads .llmc/ (the learned stage costs): never state from a clone
    report = run_doctor(load_config(root), root, more=[stages_check])
    if as_json:
        render.print_json(report.as_dict())
    else:
        for line in report.lines():  # model names and server errors: no control character
            click.echo(render.printable(line))
    if not report.ok:
        ctx.exit(1)


COMMANDS = (doctor_cmd,)
