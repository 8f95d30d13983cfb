"""`llmc search`: flags become config overrides, the pipeline answers, render prints
(logic: llmc/search/). A running daemon answers every query warm, human output and
--json alike; without one (or with LLMC_NO_DAEMON=1) this process searches."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llmc.cli import render
from llmc.cli.options import json_option, repo_option, setup_logging, verbose_option

if TYPE_CHECKING:
    from llmc.config import Config


def _search_overrides(
    no_bm25: bool, no_dense: bool, no_routing: bool, no_exact: bool, fusion: str | None
) -> dict[str, Any]:
    return {
        "search.bm25": False if no_bm25 else None,
        "search.dense": False if no_dense else None,
        "search.routing": False if no_routing else None,
        "search.exact_symbol": False if no_exact else None,
        "search.fusion": fusion,
        "search.ranker": "fusion" if fusion else None,  # a fusion method asks for fusion
    }


def _hyde_overrides(hyde: bool | None) -> dict[str, Any]:
    """--hyde: HyDE for every query, ungated; --no-hyde: the stage off."""
    if hyde is None:
        return {}
    return {"search.hyde": True, "hyde.mode": "always"} if hyde else {"search.hyde": False}


def _second_stage_overrides(
    graph: bool | None, rerank: bool | None, llm_rerank: bool | None
) -> dict[str, Any]:
    """--graph/--no-graph, --rerank/--no-rerank: those stages on or off; --llm-rerank: the
    LLM reranks every query, ungated; --no-llm-rerank: that stage off. None: as configured."""
    out: dict[str, Any] = {"search.graph": graph, "search.rerank": rerank}
    if llm_rerank is not None:
        out["search.llm_rerank"] = llm_rerank
        if llm_rerank:
            out["llm_rerank.always"] = True
    return out


def _log_query(root: Path, cfg: Config, response: dict[str, Any]) -> None:
    """Append one answered query to .llmc/queries.jsonl when learn.log_queries is on."""
    if cfg.learn.log_queries:
        from llmc.feedback import log_search

        log_search(root, response, cfg.learn.query_log_max)


def _stdin_queries() -> Iterator[str]:
    """One query per stdin line, decoded leniently (binary garbage is the query's problem)."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # an already-decoded stream
        yield from (line.rstrip("\r\n") for line in sys.stdin)
        return
    for raw in binary:
        yield raw.rstrip(b"\r\n").decode("utf-8", "replace")


BLANK = "blank line: nothing to search"


def _ask_daemon(
    root: Path, cfg: Config, query: str, ask: dict[str, Any], as_json: bool
) -> dict[str, Any] | None:
    """A running daemon's answer (warm models), or None: then this process searches.

    Human output asks for ``extras`` (highlights, snippet lines) so it prints the same."""
    from llmc.daemon.client import try_daemon

    payload = {"query": query, **ask, **({} if as_json else {"extras": True})}
    return try_daemon(root, "search", payload, cfg)


def _print_answer(answer: dict[str, Any], as_json: bool, explain: bool, con: Any = None) -> None:
    if as_json:
        return render.print_json(answer)
    if answer.get("group") == "file":
        return render.print_files(con or render.console(), answer)
    from llmc.daemon.answers import search_response

    render.print_search(con or render.console(), search_response(answer), explain)


def _search_one(root: Path, cfg: Config, query: str, ask: dict[str, Any], as_json: bool) -> None:
    """One query: a running daemon answers warm, else this process searches; either way
    the answer comes from ``Searcher.answer`` (llmc/search/answer.py) and prints the same."""
    answer = _ask_daemon(root, cfg, query, ask, as_json)
    if answer is None:
        from llmc.search import Searcher

        with Searcher(root, cfg) as searcher:
            found = searcher.answer(query, **ask)  # opens the index, which _stale reads
            answer = _as_printed(found, _stale(searcher), as_json)
    _log_query(root, cfg, answer)  # learn.log_queries (llmc/feedback.py)
    _print_answer(answer, as_json, ask["explain"])


def _as_printed(found: Any, stale: str | None, as_json: bool) -> dict[str, Any]:
    """This process's answer (an ``Answer``) as a daemon gives it (the JSON object,
    ``extras`` for a human display), with the warning that files changed since the index
    when they did (no daemon keeps it fresh here)."""
    if stale is not None:
        found = found.with_warning(stale)
    return found.to_json(extras=not as_json)


def _stale(searcher: Any) -> str | None:
    """A warning when files changed since the index was built (no daemon keeps it fresh
    here); llmc/index/freshness.py."""
    from llmc.index.freshness import staleness

    found = staleness(searcher.root, searcher.sources.store.files())
    return found.warning() if found else None


def _search_batch(root: Path, cfg: Config, ask: dict[str, Any], as_json: bool) -> int:
    """One query per stdin line, one answer each; a failed query is an error object and
    the batch goes on (a missing index stops it). A running daemon answers while it
    does; once it does not, this process searches the rest. Returns how many failed."""
    from contextlib import ExitStack

    from llmc.errors import IndexMissingError, LlmcError

    failed = 0
    con = render.console()
    searcher: Any = None
    stale: str | None = None
    use_daemon = True
    with ExitStack() as stack:
        for q in _stdin_queries():
            if not q.strip():  # keeps its place in --json output; not a failed query
                if as_json:
                    render.print_json({"query": q, "results": [], "warnings": [BLANK]})
                continue
            try:
                answer = _ask_daemon(root, cfg, q, ask, as_json) if use_daemon else None
                if answer is None:
                    use_daemon = False
                    if searcher is None:
                        from llmc.search import Searcher

                        searcher = stack.enter_context(Searcher(root, cfg))
                        searcher.warm()
                        stale = _stale(searcher)  # once: the batch reads one index
                    answer = _as_printed(searcher.answer(q, **ask), stale, as_json)
            except IndexMissingError:
                raise
            except LlmcError as e:
                failed += 1
                render.print_search_error(q, e, as_json)
                continue
            if not as_json:
                con.print(f"» {answer['query']}", markup=False, style="bold")
            _print_answer(answer, as_json, ask["explain"], con)
    return failed


@click.command("search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=None, help="Results (search.k).")
@click.option(
    "--route", type=click.Choice(["auto", "code", "docs", "mixed"]), default=None,
    help="Search code, docs or both; auto lets the router decide (search.route).",
)  # fmt: skip
@json_option
@click.option("--explain", is_flag=True, help="Show the route, each retriever's hits, fusion.")
@click.option(
    "--files", "by_file", is_flag=True,
    help="Answer with files: -k files ranked by their spans' evidence, each with its best "
    "1-3 spans (JSON: `files` instead of `results`).",
)  # fmt: skip
@repo_option
@click.option("--no-bm25", is_flag=True, help="Switch BM25 off (search.bm25).")
@click.option("--no-dense", is_flag=True, help="Switch dense retrieval off (search.dense).")
@click.option("--no-routing", is_flag=True, help="Search every route unweighted (search.routing).")
@click.option("--no-exact", is_flag=True, help="No exact-symbol fast path (search.exact_symbol).")
@click.option(
    "--hyde/--no-hyde", default=None,
    help="HyDE for every query, ungated / switched off (search.hyde, hyde.mode).",
)  # fmt: skip
@click.option(
    "--graph/--no-graph", default=None,
    help="Graph-neighbor expansion and priors on / off (search.graph).",
)  # fmt: skip
@click.option(
    "--rerank/--no-rerank", default=None, help="Cross-encoder rerank on / off (search.rerank).",
)  # fmt: skip
@click.option(
    "--llm-rerank/--no-llm-rerank", default=None,
    help="LLM listwise rerank for every query, ungated / switched off (search.llm_rerank).",
)  # fmt: skip
@click.option(
    "--budget-ms", type=click.FloatRange(min=0), default=None, metavar="MS",
    help="Latency budget of the query; stages not asked for that would break it are "
    "skipped (search.budget_ms; 0: none).",
)  # fmt: skip
@click.option(
    "--fusion", type=click.Choice(["rrf", "weighted", "max"]), default=None,
    help="How ranked lists are fused (search.fusion).",
)  # fmt: skip
@click.option(
    "--workspace", "workspace", default=None, metavar="NAME",
    help="Search every repository of workspace NAME in one ranking (`llmc workspace`).",
)  # fmt: skip
@click.option(
    "--team", "team", is_flag=True,
    help="Search the team store ([team] url) instead of this repository: every published "
    "repository in one ranking, each result naming its repository and commit.",
)  # fmt: skip
@click.option(
    "--team-repo", "team_repos", multiple=True, metavar="NAME",
    help="With --team: only this published repository (repeatable; `llmc team list`).",
)  # fmt: skip
@verbose_option
def search_cmd(
    query: str, k: int | None, route: str | None, as_json: bool, explain: bool,
    by_file: bool, root: Path, no_bm25: bool, no_dense: bool, no_routing: bool, no_exact: bool,
    fusion: str | None, hyde: bool | None, graph: bool | None, rerank: bool | None,
    llm_rerank: bool | None, budget_ms: float | None, verbose: int,
    workspace: str | None = None, team: bool = False, team_repos: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """Search code and docs for QUERY; `-` reads one query per stdin line (batch mode; a
    blank line answers with no results, keeping its place in --json output).

    With --json, each query prints one JSON object on one line: query, route, results
    (path, start_line, end_line, symbol, kind, lang, score, sources, snippet), timings_ms,
    took_ms, warnings. Paths are relative to the repo root, lines 1-based and inclusive.
    With --files, `group: "file"` and `files` replace `results`: each file's path, score,
    matched_spans and its best spans (start_line, end_line, symbol, kind, score, snippet);
    files are ranked by their spans and by whole-file BM25 (search.file_bm25_weight,
    reported as whole_file_weight), so a file may come with no span.

    Each query keeps a latency budget (--budget-ms, search.budget_ms): HyDE's LLM, the
    cross-encoder and the LLM rerank run only when their learned cost fits, unless asked
    for (--hyde, --rerank, --llm-rerank); --explain says what each decided.
    """
    from llmc.config import load_config

    setup_logging(verbose)
    overrides = _search_overrides(no_bm25, no_dense, no_routing, no_exact, fusion)
    overrides |= _hyde_overrides(hyde) | _second_stage_overrides(graph, rerank, llm_rerank)
    overrides["search.budget_ms"] = budget_ms
    cfg = load_config(root, overrides)
    ask = {"k": k, "route": route, "explain": explain}
    if by_file:
        ask["group"] = "file"
    if team or team_repos:  # the team store's repositories, one ranking (llmc/team/search.py)
        if workspace is not None:
            raise click.UsageError("--team and --workspace do not go together")
        from llmc.cli.team import search_team

        return search_team(root, query, overrides, ask, team_repos, as_json)
    if workspace is not None:  # every member, one ranking (llmc/workspace.py)
        if by_file:  # as the daemon's /v1/search answers 400 for group: file with workspace
            raise click.UsageError("--files does not work with --workspace (spans only)")
        from llmc.cli.workspace import search_workspace

        return search_workspace(workspace, query, overrides, ask, as_json)
    if query != "-":
        return _search_one(root, cfg, query, ask, as_json)
    if failed := _search_batch(root, cfg, ask, as_json):
        raise click.ClickException(f"{failed} of the queries failed (see their error objects)")


COMMANDS = (search_cmd,)
