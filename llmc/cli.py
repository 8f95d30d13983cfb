"""The `llmc` command line. Parses, calls one library function, prints.

Only this module imports click and rich. Library errors (LlmcError) become one line and
exit status 1; results go to stdout, logs and progress to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from llmc.errors import LlmcError


class LlmcGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LlmcError as e:
            raise click.ClickException(str(e)) from e
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(
        stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")), highlight=False, soft_wrap=True
    )


def _setup_logging(verbose: int, quiet: bool = False) -> None:
    level = logging.WARNING
    if quiet:
        level = logging.ERROR
    elif verbose == 1:
        level = logging.INFO
    elif verbose >= 2:
        level = logging.DEBUG
    root = logging.getLogger("llmc")
    root.setLevel(level)
    if not any(getattr(h, "_llmc", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler._llmc = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    for h in root.handlers:
        h.setLevel(level)
        if hasattr(h, "setStream"):
            h.setStream(sys.stderr)


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


verbose_option = click.option(
    "-v", "--verbose", count=True, help="More logs on stderr (-v info, -vv debug)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
repo_option = click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Repository root (default: the git root or the current directory).",
)


def _repo_root(path: Path | None) -> Path:
    from llmc.paths import find_repo_root

    return find_repo_root(path)


@click.group(cls=LlmcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llmc")
def main() -> None:
    """Index a repository and search its code and docs, locally."""


# --- config ----------------------------------------------------------------------------
@main.command("config")
@repo_option
@json_option
def config_cmd(repo: Path | None, as_json: bool) -> None:
    """Print the effective configuration and where each value came from."""
    from llmc.config import load_config

    root = _repo_root(repo)
    cfg = load_config(root)
    items = cfg.items()
    if as_json:
        _print_json({k: {"value": v, "source": s} for k, v, s in items})
        return
    from rich.table import Table

    table = Table("key", "value", "source", box=None)
    for key, value, source in items:
        table.add_row(key, json.dumps(value), source)
    _console().print(table)


# --- index -----------------------------------------------------------------------------
class _RichProgress:
    """Rich progress bars on stderr for the indexer's phases (library code stays rich-free)."""

    def __init__(self, enabled: bool):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._console = _console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
            disable=not enabled,
        )
        self._task = None
        self.enabled = enabled

    def __enter__(self):
        self._progress.start()
        return self

    def __exit__(self, *exc):
        self._progress.stop()

    def phase(self, name: str, total: int | None) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(name, total=total)

    def advance(self, n: int = 1) -> None:
        if self._task is not None and n:
            self._progress.advance(self._task, n)

    def note(self, message: str) -> None:
        if self.enabled:
            self._console.print(message)
        else:
            logging.getLogger("llmc").info(message)


def _summary_json(summary) -> dict:
    return {
        "dry_run": summary.dry_run,
        "files_seen": summary.files_seen,
        "files_indexed": summary.files_indexed,
        "files_unchanged": summary.files_unchanged,
        "files_removed": summary.files_removed,
        "files_by_lang": summary.files_by_lang,
        "spans_by_kind": summary.spans_by_kind,
        "spans_written": summary.spans_written,
        "spans_total": summary.spans_total,
        "embedded": summary.embedded,
        "embed_cached": summary.embed_cached,
        "skipped_by_reason": summary.skipped_by_reason,
        "skipped": [
            {"path": s.path, "reason": s.reason, "detail": s.detail} for s in summary.skipped
        ],
        "seconds": round(summary.seconds, 3),
        "spans_per_second": round(summary.embedded / summary.embed_seconds, 1)
        if summary.embed_seconds
        else None,
        "generation": summary.generation,
        "repaired": summary.repaired,
        "model_changed": summary.model_changed,
        "estimated_spans": summary.estimated_spans,
        "estimated_embed_seconds": round(summary.estimated_embed_seconds, 1),
    }


def _print_summary(summary, verbose: int) -> None:
    con = _console()

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "-"

    if summary.dry_run:
        con.print(
            f"plan: {summary.files_indexed} files to (re)index, {summary.files_unchanged} "
            f"unchanged, {summary.files_removed} to remove"
        )
        con.print(f"  languages: {counts(summary.files_by_lang)}")
        con.print(
            f"  ~{summary.estimated_spans} spans ({summary.embed_cached} cached), "
            f"embedding ~{summary.estimated_embed_seconds:.0f}s"
        )
    else:
        con.print(
            f"indexed {summary.files_indexed} files ({summary.files_unchanged} unchanged, "
            f"{summary.files_removed} removed) in {summary.seconds:.1f}s; "
            f"{summary.spans_total} spans in the index"
        )
        if summary.files_by_lang:
            con.print(f"  languages: {counts(summary.files_by_lang)}")
        if summary.spans_by_kind:
            con.print(f"  spans: {counts(summary.spans_by_kind)}")
        rate = (
            f", {summary.embedded / summary.embed_seconds:.0f} spans/s"
            if summary.embed_seconds
            else ""
        )
        con.print(f"  embedded {summary.embedded}, from cache {summary.embed_cached}{rate}")
        for what in summary.repaired:
            con.print(f"  repaired: {what} (rebuilt from SQLite)")
    if summary.skipped:
        if verbose:
            for s in summary.skipped:
                con.print(f"  skip {s.path}: {s.reason} ({s.detail})", markup=False)
        else:
            con.print(
                f"skipped {len(summary.skipped)} files: {counts(summary.skipped_by_reason)} "
                "(-v shows why)"
            )


@main.command("index")
@click.argument(
    "path", required=False, type=click.Path(file_okay=False, path_type=Path), default=None
)
@click.option("--full", is_flag=True, help="Re-parse every file (embeddings still cached).")
@click.option("--dry-run", is_flag=True, help="Print the plan and estimates; write nothing.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary.")
@verbose_option
@json_option
def index_cmd(
    path: Path | None, full: bool, dry_run: bool, quiet: bool, verbose: int, as_json: bool
) -> None:
    """Index PATH (default: this repository) incrementally."""
    from llmc.config import load_config
    from llmc.index.indexer import Indexer

    _setup_logging(verbose, quiet)
    root = _repo_root(path)
    cfg = load_config(root)
    show = not quiet and not as_json and sys.stderr.isatty()
    with _RichProgress(enabled=show) as progress:
        indexer = Indexer(root, cfg, progress)
        summary = indexer.plan() if dry_run else indexer.run(full=full)
    if as_json:
        _print_json(_summary_json(summary))
    elif not quiet:
        _print_summary(summary, verbose)


# --- status ----------------------------------------------------------------------------
@main.command("status")
@repo_option
@json_option
@click.option("-v", "--verbose", count=True, help="List the changed files.")
def status_cmd(repo: Path | None, as_json: bool, verbose: int) -> None:
    """How fresh the index is: changed files, counts, models, device, size."""
    from llmc.config import load_config
    from llmc.index.status import age, index_status

    root = _repo_root(repo)
    st = index_status(root, load_config(root))
    if as_json:
        _print_json(st.to_json())
        return
    con = _console()
    stale = len(st.changed_files) + len(st.new_files) + len(st.deleted_files)
    state = "fresh" if st.fresh else f"stale: {stale} files changed since the last index"
    con.print(f"{st.root}: {state} (indexed {age(st.indexed_at)}, generation {st.generation})")
    if not st.lexical_fresh:
        con.print("  lexical index is behind the store (run `llmc index` to repair)")
    if st.uncommitted_changes is not None:
        con.print(f"  uncommitted changes in git: {st.uncommitted_changes}")
    con.print(
        f"  {st.files} files, {st.spans} spans ({st.code_spans} code, {st.doc_spans} docs), "
        f"{st.cached_vectors} cached vectors"
    )
    con.print(f"  models: code {st.models['code']}; docs {st.models['doc']}")
    con.print(f"  device: {st.device}")
    mib = 1024 * 1024
    con.print(
        f"  size: db {st.db_bytes / mib:.1f} MiB, lexical {st.lexical_bytes / mib:.1f} MiB, "
        f"graph {st.graph_bytes / mib:.1f} MiB"
    )
    if verbose:
        for label, paths in (
            ("changed", st.changed_files),
            ("new", st.new_files),
            ("deleted", st.deleted_files),
        ):
            for p in paths:
                con.print(f"  {label}: {p}", markup=False)
