"""`llmc workspace add|list|remove`, and what `llmc search --workspace NAME` prints
(logic: llmc/workspace.py). Workspaces live in the user's config directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from llmc.cli import render
from llmc.cli.options import LlmcGroup, json_option

_DIR = click.Path(exists=True, file_okay=False, path_type=Path)


@click.group("workspace", cls=LlmcGroup)
def workspace_group() -> None:
    """Repositories searched together (`llmc search --workspace NAME`), each keeping its
    own index; kept in $XDG_CONFIG_HOME/llmc/workspaces.toml."""


@workspace_group.command("add")
@click.argument("name")
@click.argument("paths", nargs=-1, required=True, type=_DIR)
def add_cmd(name: str, paths: tuple[Path, ...]) -> None:
    """Add repository PATHS to workspace NAME (created when new)."""
    from llmc import workspace

    roots = workspace.add(name, paths)
    click.echo(f"workspace {name}: {len(roots)} repositories")


@workspace_group.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Each workspace and its repositories (whether each has an index)."""
    from llmc import workspace
    from llmc.paths import DB_NAME, state_dir

    found = workspace.load_workspaces()
    rows = {
        name: [
            {"name": n, "root": str(r), "indexed": (state_dir(r) / DB_NAME).is_file()}
            for n, r in zip(workspace.short_names(roots), roots, strict=True)
        ]
        for name, roots in sorted(found.items())
    }
    if as_json:
        return render.print_json({"workspaces": rows})
    con = render.console()
    if not rows:
        con.print("no workspaces (`llmc workspace add NAME PATH...` makes one)", markup=False)
    for name, items in rows.items():
        con.print(name, markup=False, style="bold")
        for m in items:
            note = "" if m["indexed"] else "  (no index)"
            con.print(f"  {m['name']}  {m['root']}{note}", markup=False)


@workspace_group.command("remove")
@click.argument("name")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
def remove_cmd(name: str, paths: tuple[Path, ...]) -> None:
    """Remove PATHS from workspace NAME, or the whole workspace without PATHS."""
    from llmc import workspace

    left = workspace.remove(name, paths)
    click.echo(f"workspace {name}: {len(left)} repositories" if left else f"removed {name}")


def search_workspace(
    name: str, query: str, overrides: dict[str, Any], ask: dict[str, Any], as_json: bool
) -> None:
    """`llmc search --workspace NAME QUERY`: every member, one ranking, printed."""
    from llmc import workspace

    if query == "-":
        raise click.UsageError("--workspace takes one query (batch mode `-` is per repository)")
    from llmc.daemon.client import try_daemon

    with workspace.MemberSearchers(overrides, daemon=try_daemon) as searchers:
        out = workspace.search(name, query, searchers.ask, k=ask.get("k"), route=ask.get("route"))
    if as_json:
        return render.print_json(out)
    print_workspace(out)


def print_workspace(out: dict[str, Any]) -> None:
    from rich.markup import escape

    con = render.console()
    if not out["results"]:
        con.print("no results", style="yellow")
    for rank, r in enumerate(out["results"], start=1):
        symbol = (
            f"  [bold]{escape(r['symbol'])}[/] [dim]{escape(r['kind'])}[/]" if r["symbol"] else ""
        )
        con.print(
            f"[bold cyan]{rank:>2}.[/] [magenta]{escape(r['repo'])}[/] "
            f"[green]{escape(r['path'])}[/]:{r['start_line']}-{r['end_line']}{symbol}  "
            f"[dim]{r['score']:.4f} {escape(','.join(r['sources']))}[/]"
        )
        for line in r["snippet"].split("\n"):
            con.print(f"    │ {line}", markup=False, overflow="ellipsis", no_wrap=True)
    for w in out["warnings"]:
        render.console(stderr=True).print(f"warning: {w}", markup=False, style="yellow")


COMMANDS = (workspace_group,)

__all__ = ["COMMANDS", "print_workspace", "search_workspace"]
