"""llmc/errors.py: one tree, drawn in its docstring, each class with its exit code."""

import re

import llmc.errors as errors
from llmc.errors import LlmcError


def _classes() -> dict[str, type[LlmcError]]:
    return {
        name: obj
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, LlmcError)
    }


def test_every_error_is_exported_and_drawn_with_its_exit_code():
    drawn = dict(re.findall(r"(\w+)\s+(\d)\s{2}", errors.__doc__ or ""))
    classes = _classes()
    assert set(errors.__all__) == set(classes)
    assert {name: int(code) for name, code in drawn.items()} == {
        name: cls.exit_code for name, cls in classes.items()
    }


def test_exit_codes_the_cli_promises():
    assert errors.AmbiguousSymbolError("x", []).exit_code == 2  # llmc graph: candidates listed
    assert errors.DaemonUnavailable.exit_code == 3  # llmc daemon status: none running
    assert errors.LLMTimeout("slow").exit_code == 1


def test_the_cli_turns_an_error_into_one_line_and_its_exit_code():
    import click
    from click.testing import CliRunner

    from llmc.cli.options import LlmcGroup

    @click.group(cls=LlmcGroup)
    def cli() -> None:
        pass

    @cli.command()
    def boom() -> None:
        raise errors.AmbiguousSymbolError("'save' is ambiguous", ["a", "b"])

    result = CliRunner().invoke(cli, ["boom"])
    assert result.exit_code == 2
    assert result.stderr == "Error: 'save' is ambiguous\n" and result.stdout == ""
