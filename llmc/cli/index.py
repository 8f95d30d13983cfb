"""`llmc index`, `llmc status`, `llmc config`: build the index, see how fresh it is, see
the configuration it was built with (logic: llmc/index/, llmc/config.py)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llmc.cli import render
from llmc.cli.options import json_option, repo_option, setup_logging, verbose_option

if TYPE_CHECKING:  # pragma: no cover
    from llmc.index.progress import Progress

VECTOR_CHOICES = ("auto", "here", "later", "none")  # `--vectors` and index.vectors


@click.command("config")
@click.argument("key", required=False)
@repo_option
@json_option
def config_cmd(key: str | None, root: Path, as_json: bool) -> None:
    """Print the effective configuration and where each value came from (KEY: that one
    only, e.g. `llmc config search.k`). What the repository's llmc.toml tried to set and may
    not (a model, a secret switch, the daemon...) is shown as ignored, with the reason."""
    from llmc.config import load_config

    cfg = load_config(root)
    items = cfg.items()
    if key is not None:
        items = [item for item in items if item[0] == key]
        if not items:
            raise click.UsageError(f"no config key {key!r} (`llmc config` lists them all)")
    render.print_config(items, as_json, cfg.ignored)


@click.command("index")
@click.argument(
    "path", required=False, type=click.Path(file_okay=False, path_type=Path), default=None
)
@click.option("--full", is_flag=True, help="Re-parse every file (embeddings still cached).")
@click.option("--dry-run", is_flag=True, help="Print the plan and estimates; write nothing.")
@click.option(
    "--vectors",
    "vectors",
    type=click.Choice(VECTOR_CHOICES),
    default=None,
    help="[default: index.vectors, auto] Who embeds the new spans once the index is searchable: `here` (before the "
    "command returns), `later` (the running daemon, else a background process at the "
    "lowest priority; the command returns once BM25, exact symbols and the graph answer), "
    "`none` (the next run or the daemon). `auto`: `later` at a terminal or with a daemon "
    "when at most 2,000 spans miss a vector, else `here`.",
)
@click.option(
    "--no-vectors",
    is_flag=True,
    help="Same as `--vectors none`: stop once the index is searchable (BM25, exact symbols, "
    "graph); the next `llmc index` (or the daemon) embeds the spans then.",
)
@click.option(
    "--vectors-only",
    is_flag=True,
    help="Only embed the spans that have no vector yet (what `--vectors later` starts in "
    "the background); one such process at a time.",
)
@click.option("--nice", is_flag=True, hidden=True, help="Lowest CPU priority (background).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@verbose_option
@json_option
def index_cmd(
    path: Path | None,
    full: bool,
    dry_run: bool,
    vectors: str,
    no_vectors: bool,
    vectors_only: bool,
    nice: bool,
    quiet: bool,
    verbose: int,
    as_json: bool,
) -> None:
    """Index PATH (default: this repository) incrementally.

    Spans, the BM25 index, exact symbols and the graph are committed first: search works
    from then on. Then the spans without a vector are embedded, in chunks each committed
    on its own, so an interrupted run loses nothing and the next one resumes; a small
    change's few vectors may be left to the daemon or a background process (`--vectors`)."""
    from llmc.config import load_config
    from llmc.errors import ConfigError
    from llmc.paths import find_repo_root, private_umask

    setup_logging(verbose, quiet)
    root = find_repo_root(path)
    if nice:
        with contextlib.suppress(OSError):
            os.nice(19)
    tty = sys.stderr.isatty()
    # Everything this command writes is the index: 0600 files, 0700 directories.
    with private_umask(), _progress(root, quiet, as_json, tty, dry_run, vectors_only) as progress:
        cfg = load_config(root)
        vectors = vectors or cfg.index.vectors
        if vectors not in VECTOR_CHOICES:
            raise ConfigError(
                f"index.vectors = {vectors!r}: expected one of {', '.join(VECTOR_CHOICES)}"
            )
        if dry_run:
            from llmc.index.indexer import Indexer

            summary, handoff = Indexer(root, cfg, progress).plan(full=full), None
        elif vectors_only:
            from llmc.index.handoff import embed_missing

            summary, handoff = embed_missing(root, cfg, progress), None
            if summary is None:  # the one running embedder takes these too
                if as_json:
                    render.print_json({"backfill": "elsewhere"})
                elif not quiet:
                    click.echo("another process is embedding this index; it takes these too")
                return
        else:
            from llmc.daemon.control import DaemonLink
            from llmc.index.handoff import index_and_handoff

            summary, handoff = index_and_handoff(
                root, cfg, progress, full=full, vectors="none" if no_vectors else vectors,
                interactive=tty and not as_json and not quiet, daemon=DaemonLink(root),
            )  # fmt: skip
    if as_json:
        out = summary.to_json()
        if not dry_run:
            out["handoff"] = handoff.to_json() if handoff is not None else None
        render.print_json(out)
    elif quiet:
        pass
    elif vectors_only:
        cov = summary.vectors
        click.echo(
            f"embedded {summary.embedded:,} spans, {summary.embed_cached:,} from the cache, "
            f"in {summary.seconds:.1f}s" + (f"; {cov.line()}" if cov is not None else "")
        )
    else:
        render.print_index_summary(summary, verbose, handoff.line() if handoff else None)


@contextlib.contextmanager
def _progress(
    root: Path, quiet: bool, as_json: bool, tty: bool, dry_run: bool, vectors_only: bool
) -> Iterator[Progress]:
    """Bars at a terminal, plain lines with ETAs on any other stderr (none with ``-q`` or
    ``--json``), and the run's progress in ``.llmc/progress.json`` for `llmc status`."""
    from llmc.index.live import LiveFile
    from llmc.index.progress import LineProgress, SaySearchable, Silent, Tee

    show = not quiet and not as_json
    with contextlib.ExitStack() as stack:
        if show and tty:
            screen: Progress = stack.enter_context(render.RichProgress(enabled=True))
        elif show:
            screen = LineProgress(lambda line: click.echo(render.printable(line), err=True))
        else:
            screen = Silent()  # rich's bars not even imported
        if dry_run:
            yield screen
            return
        if show:
            screen = SaySearchable(screen)
        what = "embedding the missing vectors" if vectors_only else "llmc index"
        live = LiveFile(root, what)
        try:
            yield Tee(screen, live)
        finally:
            live.close()
            if isinstance(screen, LineProgress):
                screen.close()


@click.command("status")
@repo_option
@json_option
@click.option("-v", "--verbose", count=True, help="List the changed files.")
def status_cmd(root: Path, as_json: bool, verbose: int) -> None:
    """How fresh the index is: changed files, counts, models, device, size; while another
    process indexes, what it is doing and what answers a search already."""
    from llmc.config import load_config
    from llmc.index.status import index_status

    st = index_status(root, load_config(root))
    if as_json:
        render.print_json(st.to_json())
    elif st.indexing:
        for line in st.run_lines():
            click.echo(render.printable(line))
    else:
        render.print_status(st, verbose)
        if st.searchable is not None:
            click.echo(f"  {st.searchable.line()}")


COMMANDS = (config_cmd, index_cmd, status_cmd)
