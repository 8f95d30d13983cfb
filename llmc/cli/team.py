"""`llmc team push|list|rm`: publish this repository's index to the team store named in your
user config (``[team] url``), list what the store holds, remove a repository from it (logic: llmc/team/;
docs/scale.md, docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path

import click

from llmc.cli import render
from llmc.cli.options import LlmcGroup, json_option, repo_option, setup_logging, verbose_option


@click.group("team", cls=LlmcGroup)
def team_group() -> None:
    """The team store: a shared index in PostgreSQL + pgvector ([team] url in your user
    config; the password in $LLMC_TEAM_PASSWORD or the variable team.password_env names)."""


@team_group.command("push")
@click.option("--as", "name", default=None, metavar="NAME",
              help="The repository's name in the store (team.repo; default: its directory's).")  # fmt: skip
@repo_option
@json_option
@verbose_option
def push_cmd(name: str | None, root: Path, as_json: bool, verbose: int) -> None:
    """Publish this repository's index: only files whose content changed are sent, vectors
    as the local index holds them (never re-embedded); the store switches to the new
    version in one step, so a publish that fails leaves the previous one in place.

    --json: repo, generation, commit, files, spans, files_changed, files_removed,
    spans_sent, spans_kept, vectors_sent, seconds, store (the URL without credentials)."""
    import sys

    from llmc.config import load_config
    from llmc.team.publish import publish

    setup_logging(verbose)
    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        report = publish(root, load_config(root), name, progress)
    if as_json:
        return render.print_json(report.to_json())
    if not report.files_changed and not report.files_removed and report.generation:
        click.echo(f"{report.repo} is up to date in {report.store} (version {report.generation})")
        return
    click.echo(
        f"published {report.repo} to {report.store} (version {report.generation}): "
        f"{report.files_changed} files changed, {report.files_removed} removed; "
        f"{report.spans_sent} spans and {report.vectors_sent} vectors sent, "
        f"{report.spans_kept} spans kept, in {report.seconds:.1f} s"
    )


@team_group.command("list")
@repo_option
@json_option
def list_cmd(root: Path, as_json: bool) -> None:
    """The repositories in the team store: version, commit, files, spans, when published."""
    from llmc.config import load_config
    from llmc.team.publish import published

    rows = published(load_config(root))
    if as_json:
        return render.print_json({"repos": rows})
    if not rows:
        click.echo("the team store holds no repository yet (`llmc team push` publishes one)")
    for r in rows:
        commit = r["commit"][:12] or "-"
        click.echo(render.printable(
            f"{r['repo']}  version {r['generation']}  {commit}  {r['files']} files  "
            f"{r['spans']} spans  {r['published_at']}"
        ))  # fmt: skip


@team_group.command("rm")
@click.argument("name")
@repo_option
@json_option
def rm_cmd(name: str, root: Path, as_json: bool) -> None:
    """Remove repository NAME from the team store (every version of it)."""
    from llmc.config import load_config
    from llmc.errors import TeamError
    from llmc.team.publish import unpublish

    removed = unpublish(load_config(root), name)
    if as_json:
        return render.print_json({"repo": name, "removed": removed})
    if not removed:
        raise TeamError(f"the team store holds no repository named {name!r} (`llmc team list`)")
    click.echo(render.printable(f"removed {name} from the team store"))


COMMANDS = (team_group,)


def search_team(
    root: Path, query: str, overrides: dict, ask: dict, repos: tuple[str, ...], as_json: bool
) -> None:
    """`llmc search --team [--team-repo NAME ...] QUERY`: the published repositories (all,
    or those named) in one ranking, each result naming its repository and commit. A daemon
    of this repository answers warm when no search flag asks for other settings (it runs
    the user's config, as this does); else this process searches."""
    from llmc.config import load_config
    from llmc.daemon.client import try_daemon
    from llmc.team.search import TeamSearch

    if query == "-":
        raise click.UsageError("--team takes one query (batch mode `-` is per repository)")
    params = {k: v for k, v in ask.items() if v is not None and k != "explain"}
    out = None
    if not any(v is not None for v in overrides.values()):
        out = try_daemon(root, "search", {"query": query, "team": True, "repos": list(repos),
                                          **params})  # fmt: skip
    if out is None:
        cfg = load_config(root)  # the user's [team] (a repository's llmc.toml cannot set it)
        with TeamSearch(cfg, lambda r: load_config(r, overrides)) as team:
            out = team.answer(query, repos, **params)
    if as_json:
        return render.print_json(out)
    print_team(out)


def print_team(out: dict) -> None:
    from llmc.cli.workspace import print_workspace

    if out.get("group") == "file":
        con = render.console()
        for rank, f in enumerate(out["files"], start=1):
            con.print(f"{rank:>2}. {f['repo']}@{f['commit'][:12]} {f['path']}", markup=False)
        for w in out["warnings"]:
            render.console(stderr=True).print(f"warning: {w}", markup=False, style="yellow")
        return
    print_workspace(
        {
            **out,
            "results": [
                r | {"repo": f"{r['repo']}@{r['commit'][:12]}"} if r.get("commit") else r
                for r in out["results"]
            ],
        }  # fmt: skip
    )
