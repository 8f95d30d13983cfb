"""What every command shares: the group that turns LlmcError into one line, the options
spelled the same everywhere (``--repo``, ``--json``, ``-v``), and logging to stderr."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from llmc.errors import LlmcError

F = TypeVar("F", bound=Callable[..., Any])


class LlmcFailure(click.ClickException):
    """An LlmcError on its way out: ``Error: <message>`` on stderr, the error's exit code."""

    def __init__(self, error: LlmcError):
        from llmc.cli.render import printable

        # an error may quote a repository's path or a server's text: no control character
        super().__init__(printable(str(error)))
        self.exit_code = error.exit_code


class LlmcGroup(click.Group):
    """The group every llmc command hangs from: an LlmcError is one line and its exit code,
    and every command takes ``-v`` (``add_command`` gives it to those that do not declare
    their own, so none is left without it)."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not isinstance(cmd, click.Group) and not any(
            "-v" in getattr(p, "opts", ()) for p in cmd.params
        ):
            cmd.params.append(_logging_only_verbose())
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LlmcError as e:
            raise LlmcFailure(e) from e
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


def _resolve_root(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path:
    from llmc.paths import find_repo_root

    return find_repo_root(value)


_REPO_HELP = "Repository root (default: the git root or the current directory)."
_REPO_TYPE = click.Path(file_okay=False, path_type=Path)


def repo_option(f: F) -> F:
    """``--repo DIR``, resolved once to the repository root: the command gets ``root: Path``."""
    return click.option(
        "--repo", "root", type=_REPO_TYPE, default=None, callback=_resolve_root, help=_REPO_HELP
    )(f)


def repo_path_option(f: F) -> F:
    """``--repo DIR`` as given (None when absent), for commands that resolve it themselves."""
    return click.option("--repo", "repo", type=_REPO_TYPE, default=None, help=_REPO_HELP)(f)


verbose_option = click.option(
    "-v", "--verbose", count=True, help="More logs on stderr (-v info, -vv debug)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")


def _set_verbosity(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        setup_logging(value)


def _logging_only_verbose() -> click.Option:
    """``-v`` for a command whose function takes no ``verbose``: it sets up logging as it
    is parsed, and is not passed on."""
    return click.Option(
        ["-v", "--verbose"],
        count=True,
        expose_value=False,
        callback=_set_verbosity,
        help="More logs on stderr (-v info, -vv debug).",
    )


def setup_logging(verbose: int, quiet: bool = False, fmt: str | None = None) -> None:
    """Log llmc's records on stderr at the level -v / -q ask for."""
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
        handler._llmc = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    for h in root.handlers:
        h.setLevel(level)
        if hasattr(h, "setStream"):
            h.setStream(sys.stderr)
        if getattr(h, "_llmc", False):
            h.setFormatter(_PrintableFormatter(fmt or "%(levelname)s %(name)s: %(message)s"))


class _PrintableFormatter(logging.Formatter):
    """Log lines name files and quote their content: no control character reaches stderr."""

    def format(self, record: logging.LogRecord) -> str:
        from llmc.cli.render import printable

        return printable(super().format(record))


__all__ = [
    "LlmcFailure",
    "LlmcGroup",
    "json_option",
    "repo_option",
    "repo_path_option",
    "setup_logging",
    "verbose_option",
]
