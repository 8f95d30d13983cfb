"""The team tests' way to run a CLI command in a repository (``from team_cli import run``:
tests/ is on the pytest pythonpath)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmc.cli import main


def run(root: Path, *args: str, ok: bool = True) -> dict | str:
    """``llmc ARGS --repo ROOT``: its JSON with ``--json``, else its output; ``ok=False``
    expects exit 1 and returns the output (the one error line)."""
    result = CliRunner().invoke(main, [*args, "--repo", str(root)])
    if ok:
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 1, result.output
        return result.output
    return json.loads(result.stdout) if "--json" in args else result.output
