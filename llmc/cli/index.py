"""`llmc index`, `llmc status`, `llmc config`: build the index, see how fresh it is, see
the configuration it was built with (logic: llmc/index/, llmc/config.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from llmc.cli import render
from llmc.cli.options import json_option, repo_option, setup_logging, verbose_option


@click.command("config")
@repo_option
@json_option
def config_cmd(root: Path, as_json: bool) -> None:
    """Print the effective configuration and where each value came from."""
    from llmc.config import load_config

    render.print_config(load_config(root).items(), as_json)


@click.command("index")
@click.argument(
    "path", required=False, type=click.Path(file_okay=False, path_type=Path), default=None
)
@click.option("--full", is_flag=True, help="Re-parse every file (embeddings still cached).")
@click.option("--dry-run", is_flag=True, help="Print the plan and estimates; write nothing.")
@click.option(
    "--no-vectors",
    is_flag=True,
    help="Stop once the index is searchable (BM25, exact symbols, graph); the next "
    "`llmc index` (or the daemon) embeds the spans then.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@verbose_option
@json_option
def index_cmd(
    path: Path | None,
    full: bool,
    dry_run: bool,
    no_vectors: bool,
    quiet: bool,
    verbose: int,
    as_json: bool,
) -> None:
    """Index PATH (default: this repository) incrementally.

    Spans, the BM25 index, exact symbols and the graph are committed first: search works
    from then on. Then the spans without a vector are embedded, in chunks each committed
    on its own, so an interrupted run loses nothing and the next one resumes."""
    from llmc.config import load_config
    from llmc.index.indexer import Indexer
    from llmc.paths import find_repo_root, private_umask

    setup_logging(verbose, quiet)
    root = find_repo_root(path)
    show = not quiet and not as_json and sys.stderr.isatty()
    # Everything this command writes is the index: 0600 files, 0700 directories.
    with private_umask(), render.RichProgress(enabled=show) as progress:
        indexer = Indexer(root, load_config(root), progress)
        summary = indexer.plan() if dry_run else indexer.run(full=full, vectors=not no_vectors)
    if as_json:
        render.print_json(summary.to_json())
    elif not quiet:
        render.print_index_summary(summary, verbose)


@click.command("status")
@repo_option
@json_option
@click.option("-v", "--verbose", count=True, help="List the changed files.")
def status_cmd(root: Path, as_json: bool, verbose: int) -> None:
    """How fresh the index is: changed files, counts, models, device, size."""
    from llmc.config import load_config
    from llmc.index.status import index_status

    st = index_status(root, load_config(root))
    if as_json:
        render.print_json(st.to_json())
    else:
        render.print_status(st, verbose)


COMMANDS = (config_cmd, index_cmd, status_cmd)
