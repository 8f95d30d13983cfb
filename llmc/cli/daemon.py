"""`llmc daemon`, `llmc hooks`, `llmc mcp`: what keeps the index warm and fresh, and the
ways editors and agents reach it (logic: llmc/daemon/, llmc/hooks.py, llmc/mcp.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from llmc.cli import render
from llmc.cli.options import (
    LlmcGroup,
    json_option,
    repo_option,
    repo_path_option,
    setup_logging,
    verbose_option,
)

if TYPE_CHECKING:
    from llmc.config import Config

F = TypeVar("F", bound=Callable[..., object])


# --- daemon ----------------------------------------------------------------------------
@click.group("daemon", cls=LlmcGroup)
def daemon_group() -> None:
    """Background daemon per repository: warm models, local API, file watcher.

    The API is HTTP + JSON on .llmc/daemon.sock, MCP at /mcp (docs/daemon-api.md). While
    a daemon runs, `llmc search`, `llmc graph` and `llmc mcp` use it; LLMC_NO_DAEMON=1
    bypasses it.
    """


def _daemon_options(f: F) -> F:
    f = click.option("--watch/--no-watch", default=None, help="Reindex on file changes.")(f)
    f = click.option("--port", type=click.IntRange(0, 65535), default=None,
                     help="TCP port with --tcp (0: any free port).")(f)  # fmt: skip
    f = click.option("--tcp/--no-tcp", default=None,
                     help="Also listen on 127.0.0.1 with a bearer token.")(f)  # fmt: skip
    return f


def _daemon_config(root: Path, tcp: bool | None, port: int | None, watch: bool | None) -> Config:
    from llmc.config import load_config

    return load_config(
        root, overrides={"daemon.tcp": tcp, "daemon.tcp_port": port, "daemon.watch": watch}
    )


@daemon_group.command("start")
@repo_option
@_daemon_options
@verbose_option
@json_option
def daemon_start_cmd(
    root: Path, tcp: bool | None, port: int | None, watch: bool | None, verbose: int,
    as_json: bool,
) -> None:  # fmt: skip
    """Start the daemon in the background; return once its socket answers."""
    from llmc.daemon import control

    args = [*(["--tcp"] if tcp else ["--no-tcp"] if tcp is False else []),
            *(["--port", str(port)] if port is not None else []),
            *(["--watch"] if watch else ["--no-watch"] if watch is False else []),
            *(["-" + "v" * verbose] if verbose else [])]  # fmt: skip
    res = control.start(root, _daemon_config(root, tcp, port, watch), args)
    if as_json:
        return render.print_json(res.__dict__)
    for path in res.cleaned:
        click.echo(f"removed stale {path}", err=True)
    state = "already running" if res.already_running else f"started in {res.seconds:.1f}s"
    click.echo(f"daemon {state} (pid {res.pid}) on {res.socket}")


@daemon_group.command("stop")
@repo_option
@json_option
def daemon_stop_cmd(root: Path, as_json: bool) -> None:
    """Stop the daemon (SIGTERM; SIGKILL after 15 s)."""
    from llmc.daemon import control

    res = control.stop(root)
    if as_json:
        render.print_json(res.__dict__)
    elif not res.was_running:
        click.echo("no daemon running" + (" (removed stale files)" if res.cleaned else ""))
    else:
        click.echo(f"daemon stopped (pid {res.pid}{', killed' if res.killed else ''})")


@daemon_group.command("status")
@repo_option
@json_option
@click.pass_context
def daemon_status_cmd(ctx: click.Context, root: Path, as_json: bool) -> None:
    """Uptime, index generation, queue, memory, models. Exit status 3 when not running."""
    from llmc.daemon import control
    from llmc.errors import DaemonUnavailable

    st = control.status(root)
    if as_json:
        render.print_json(st)
    else:
        click.echo("\n".join(control.status_lines(st)))
    if not st["running"]:
        ctx.exit(DaemonUnavailable.exit_code)


@daemon_group.command("logs")
@repo_option
@click.option("-n", "--lines", type=click.IntRange(0), default=50, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
def daemon_logs_cmd(root: Path, lines: int, follow: bool) -> None:
    """Print the end of .llmc/daemon.log."""
    from llmc.daemon import control

    for line in control.logs(root, lines, follow):
        click.echo(line)


@daemon_group.command("run")
@repo_option
@_daemon_options
@verbose_option
@click.option("-q", "--quiet", is_flag=True, help="Log warnings only.")
def daemon_run_cmd(
    root: Path, tcp: bool | None, port: int | None, watch: bool | None, verbose: int, quiet: bool
) -> None:
    """Run the daemon in the foreground (for systemd, launchd, or debugging)."""
    from llmc.daemon.server import run_daemon

    setup_logging(max(verbose, 1), quiet, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_daemon(root, _daemon_config(root, tcp, port, watch))


# --- hooks -----------------------------------------------------------------------------
@click.group("hooks", cls=LlmcGroup)
def hooks_group() -> None:
    """Git hooks (post-commit, -merge, -checkout, -rewrite) that keep the index fresh."""


@hooks_group.command("install")
@repo_option
@json_option
def hooks_install_cmd(root: Path, as_json: bool) -> None:
    """Add the llmc block to each hook; existing hooks are kept and still run."""
    from llmc import hooks

    render.print_hooks(hooks.install(root), as_json)


@hooks_group.command("uninstall")
@repo_option
@json_option
def hooks_uninstall_cmd(root: Path, as_json: bool) -> None:
    """Remove the llmc block; restore hooks that were chained."""
    from llmc import hooks

    render.print_hooks(hooks.uninstall(root), as_json)


@hooks_group.command("status")
@repo_option
@json_option
def hooks_status_cmd(root: Path, as_json: bool) -> None:
    """Which hooks carry the llmc block, and where git looks for hooks."""
    from llmc import hooks

    render.print_hooks(hooks.status(root), as_json)


@hooks_group.command("notify", hidden=True)
@click.argument("hook")
@repo_path_option
def hooks_notify_cmd(hook: str, repo: Path | None) -> None:
    """Run by the hooks: tell the daemon, or index here. Never fails."""
    from llmc import hooks
    from llmc.paths import find_repo_root

    try:  # the root is resolved in here too: a hook must not fail on a bad --repo either
        click.echo(hooks.notify(find_repo_root(repo), hook))
    except Exception as e:  # noqa: BLE001 - a hook must never fail; hooks.log has the detail
        click.echo(f"llmc hook {hook}: {e}", err=True)


# --- mcp -------------------------------------------------------------------------------
@click.command("mcp")
@repo_option
@verbose_option
def mcp_cmd(root: Path, verbose: int) -> None:
    """Serve MCP (Model Context Protocol) on stdin/stdout: search, where_used, deps, status."""
    from llmc.config import load_config
    from llmc.mcp import serve_stdio

    setup_logging(verbose)
    serve_stdio(root, load_config(root))


COMMANDS = (daemon_group, hooks_group, mcp_cmd)
