"""`llmc graph where-used | deps | neighbors | stats` (logic: llmc/graph/; docs/graph.md).

A running daemon answers (its graph is parsed once); without one (or with
LLMC_NO_DAEMON=1) this process loads the graph."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from llmc.cli import render
from llmc.cli.options import LlmcGroup, json_option, repo_option

if TYPE_CHECKING:
    from llmc.graph import RepoGraph

T = TypeVar("T")


@click.group("graph", cls=LlmcGroup)
def graph_group() -> None:
    """Query the repository graph: who uses a symbol, what it depends on, what is central.

    The graph (.llmc/rag_graph.json) is built by `llmc index`. SYMBOL / TARGET may be a node
    id (path::Qualified.name), a file path, a qualified name (Store.files), a dotted Python
    name (pkg.mod.func) or a plain name; an ambiguous name lists the candidates (exit 2).
    """


def _open_graph(root: Path) -> RepoGraph:
    from llmc.graph import load_graph
    from llmc.graph.render import stale_warning

    graph = load_graph(root)
    warning = stale_warning(root, graph)
    if warning:
        click.echo(warning, err=True)
    return graph


def _graph_answer(graph: RepoGraph, query: str, as_json: bool, answer: Callable[[], T]) -> T:
    """Run ``answer()``; an ambiguous name prints its candidates on stdout and exits 2."""
    from llmc.errors import AmbiguousSymbolError
    from llmc.graph.render import candidate_lines

    try:
        return answer()
    except AmbiguousSymbolError as e:
        if as_json:
            cands = [graph.node(c).to_json() for c in e.candidates]
            render.print_json({"query": query, "ambiguous": True, "candidates": cands})
        else:
            click.echo(render.printable("\n".join(candidate_lines(graph, query, e.candidates))))
        raise click.exceptions.Exit(e.exit_code) from e


def _daemon(root: Path, endpoint: str, params: dict[str, Any], as_json: bool) -> bool:
    """Let a running daemon answer (its graph is loaded); False when none did.

    The daemon's answer is the object `--json` prints, plus ``warnings`` (for stderr) and,
    asked with ``text``, ``text``: the human output. An ambiguous name exits 2 as here.
    """
    from llmc.daemon.client import try_daemon
    from llmc.errors import AmbiguousSymbolError

    answer = try_daemon(root, f"graph/{endpoint}", {**params, "text": not as_json})
    if answer is None:
        return False
    for warning in answer.pop("warnings", []):
        click.echo(render.printable(warning), err=True)
    text = answer.pop("text", "")
    if endpoint == "stats" and "summary" in answer:
        answer = answer["summary"]
    _emit(as_json, answer, lambda: [text])
    if answer.get("ambiguous"):
        raise click.exceptions.Exit(AmbiguousSymbolError.exit_code)
    return True


def _emit(as_json: bool, data: Any, lines: Callable[[], list[str]]) -> None:
    if as_json:
        render.print_json(data)
    else:
        click.echo(render.printable("\n".join(lines())))


@graph_group.command("where-used")
@click.argument("symbol")
@click.option(
    "--min-confidence",
    type=float,
    default=0.5,
    show_default=True,
    help="Hide uses resolved with less confidence (name-only guesses are 0.3).",
)
@repo_option
@json_option
def graph_where_used_cmd(symbol: str, min_confidence: float, root: Path, as_json: bool) -> None:
    """Callers, importers, subclasses, tests and docs of SYMBOL."""
    from llmc.graph.render import usage_lines

    if _daemon(root, "where-used", {"symbol": symbol, "min_confidence": min_confidence}, as_json):
        return
    graph = _open_graph(root)
    usage = _graph_answer(graph, symbol, as_json, lambda: graph.where_used(symbol, min_confidence))
    _emit(as_json, usage.to_json(), lambda: usage_lines(usage))


@graph_group.command("deps")
@click.argument("target")
@click.option(
    "--depth",
    type=click.IntRange(1, 10),
    default=None,
    help="Follow dependencies this many hops (default graph.deps_depth).",
)
@repo_option
@json_option
def graph_deps_cmd(target: str, depth: int | None, root: Path, as_json: bool) -> None:
    """What TARGET uses: calls, imports and bases, transitively up to --depth."""
    from llmc.config import load_config
    from llmc.graph.render import deps_lines

    if _daemon(root, "deps", {"target": target, "depth": depth}, as_json):
        return
    graph = _open_graph(root)
    depth = depth or load_config(root).graph.deps_depth
    node = _graph_answer(graph, target, as_json, lambda: graph.resolve_one(target))
    deps = graph.deps(node, depth)
    data = {
        "target": graph.node(node).to_json(),
        "depth": depth,
        "deps": [d.to_json() for d in deps],
    }
    _emit(as_json, data, lambda: deps_lines(graph, node, deps))


@graph_group.command("neighbors")
@click.argument("target")
@click.option(
    "--type",
    "edge_types",
    multiple=True,
    type=click.Choice(["defines", "calls", "imports", "inherits", "tests", "mentions"]),
    help="Only these edge types (repeatable).",
)
@click.option(
    "--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True
)
@repo_option
@json_option
def graph_neighbors_cmd(
    target: str, edge_types: tuple[str, ...], direction: str, root: Path, as_json: bool
) -> None:
    """Every edge at TARGET, in and out, with type and confidence."""
    from llmc.graph.render import neighbor_lines

    ask = {"target": target, "type": list(edge_types) or None, "direction": direction}
    if _daemon(root, "neighbors", ask, as_json):
        return
    graph = _open_graph(root)
    node = _graph_answer(graph, target, as_json, lambda: graph.resolve_one(target))
    edges = graph.neighbors(node, edge_types or None, direction)
    data = {"target": graph.node(node).to_json(), "edges": [e.to_json() for e in edges]}
    _emit(as_json, data, lambda: neighbor_lines(graph, node, edges))


@graph_group.command("stats")
@click.option(
    "--top",
    type=click.IntRange(0, 1000),
    default=10,
    show_default=True,
    help="How many nodes to list by PageRank.",
)
@repo_option
@json_option
def graph_stats_cmd(top: int, root: Path, as_json: bool) -> None:
    """Counts by node kind and edge type, resolution rates, top nodes by PageRank."""
    from llmc.graph.render import stats_lines

    if _daemon(root, "stats", {"top": top}, as_json):
        return
    summary = _open_graph(root).summary(top)
    _emit(as_json, summary, lambda: stats_lines(summary))


COMMANDS = (graph_group,)
