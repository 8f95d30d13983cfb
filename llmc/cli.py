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
        "searchable_seconds": round(summary.searchable_seconds, 3),
        "timings": summary.timings,
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


# --- doctor (logic: llmc/models/doctor.py) ----------------------------------------------
@main.command("doctor")
@repo_option
@json_option
@verbose_option
def doctor_cmd(repo: Path | None, as_json: bool, verbose: int) -> None:
    """Show what this machine can run: LLM providers, models, device, sqlite-vec, tree-sitter.

    Exits 1 when a required component (sqlite-vec, tree-sitter) is broken.
    """
    from llmc.config import load_config
    from llmc.models.doctor import run_doctor

    _setup_logging(verbose)
    report = run_doctor(load_config(_repo_root(repo)))
    if as_json:
        _print_json(report.as_dict())
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        sys.exit(1)


# --- end doctor ------------------------------------------------------------------------


# --- search (logic: llmc/search/) ---------------------------------------------------------
def _search_overrides(
    no_bm25: bool, no_dense: bool, no_routing: bool, no_exact: bool, fusion: str | None
) -> dict[str, Any]:
    return {
        "search.bm25": False if no_bm25 else None,
        "search.dense": False if no_dense else None,
        "search.routing": False if no_routing else None,
        "search.exact_symbol": False if no_exact else None,
        "search.fusion": fusion,
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


def _print_hyde(con, report) -> None:
    """The HyDE diagnostics of --explain: never results, only what the stage did."""
    from rich.markup import escape

    if report is None:
        return
    if not report.used:
        con.print(f"[bold]hyde[/] not used: {escape(report.reason)}")
        return
    con.print(
        f"[bold]hyde[/] {escape(report.model)}: {len(report.hypotheses)} hypothesis(es), "
        f"LLM {report.llm_ms:.0f} ms, stage {report.took_ms:.0f} ms"
    )
    for t in report.thresholds:
        found = f"threshold {t.threshold:g}" if t.threshold is not None else "nothing found"
        con.print(
            f"  {t.category}: {found} after {t.steps} step(s) down, {t.hits} hits, "
            f"best cosine {t.best:.3f}"
        )
    for h in report.hypotheses:
        first = " ".join(h.text.split())[:160]
        cached = ", cached" if h.cached else ""
        con.print(f"  [dim]{h.route} #{h.seed} ({h.latency_ms:.0f} ms{cached}):[/] {escape(first)}")
    if report.expansion:
        terms = ", ".join(f"{t} {w:.2f}" for t, w in report.expansion.items())
        con.print(f"  BM25 terms: {escape(terms)}")


def _print_search(con, response, explain: bool) -> None:
    """Rank, path:start-end, symbol, score, then the snippet with the query words lit."""
    import re

    from rich.markup import escape
    from rich.text import Text

    terms = sorted({t for t in response.highlight_terms if t}, key=len, reverse=True)
    pattern = (
        r"(?i)(?<![A-Za-z0-9])(?:" + "|".join(re.escape(t) for t in terms) + r")[A-Za-z0-9]*"
        if terms
        else None
    )
    if explain:
        _print_explain(con, response)
    if not response.results:
        con.print("no results", style="yellow")
    for rank, r in enumerate(response.results, start=1):
        symbol = f"  [bold]{escape(r.symbol)}[/] [dim]{escape(r.kind)}[/]" if r.symbol else ""
        con.print(
            f"[bold cyan]{rank:>2}.[/] [green]{escape(r.path)}[/]:{r.start_line}-{r.end_line}"
            f"{symbol}  [dim]{r.score:.4f} {escape(','.join(r.sources))}[/]"
        )
        width = len(str(r.snippet_start_line + r.snippet.count("\n")))
        for i, line in enumerate(r.snippet.split("\n")):
            text = Text(f"   {r.snippet_start_line + i:>{width}} │ ", style="dim")
            body = Text(line)
            if pattern:
                body.highlight_regex(pattern, style="bold yellow")
            con.print(text + body, overflow="ellipsis", no_wrap=True)
    for w in response.warnings:
        _console(stderr=True).print(f"warning: {w}", markup=False, style="yellow")


def _print_explain(con, response) -> None:
    from rich.markup import escape

    route, ex = response.route, response.explain
    con.print(
        f"[bold]route[/] {route.intent} (p_code {route.p_code:.2f}, confidence "
        f"{route.confidence:.2f}, {route.source}); route weights "
        + ", ".join(f"{k} {v:.2f}" for k, v in route.weights.items())
        + "; list weights "
        + ", ".join(f"{k} {v:.2f}" for k, v in route.list_weights.items())
    )
    for reason in route.reasons:
        con.print(f"  · {escape(reason)}")
    _print_hyde(con, getattr(response, "hyde", None))
    if ex is None:
        return
    for name, hits in ex.lists.items():
        con.print(f"[bold]{escape(name)}[/] top {len(hits)}")
        for h in hits:
            con.print(
                f"  {h.rank:>2}. {escape(h.path)}:{h.start_line}-{h.end_line} "
                f"{escape(h.symbol)} [dim]{h.score:.4f}[/]"
            )
    con.print(f"[bold]fusion[/] {ex.fusion}")
    rows = zip(response.results, ex.ranks, ex.contributions, strict=True)
    for n, (r, ranks, contrib) in enumerate(rows, start=1):
        parts = ", ".join(f"{name} {v:.4f} (#{ranks[name]})" for name, v in contrib.items())
        pinned = " pinned (exact symbol)" if "exact" in ranks and "exact" not in contrib else ""
        con.print(f"  {n:>2}. {escape(r.path)}:{r.start_line} = {r.score:.4f}{pinned}: {parts}")
    for s in ex.stages:
        con.print(f"[bold]{escape(s.stage)}[/] {escape(s.note)}")
    con.print(
        "[dim]timings ms: "
        + ", ".join(f"{k} {v:.1f}" for k, v in response.timings_ms.items())
        + f"; total {response.took_ms:.1f}[/]"
    )
    con.print()


def _stdin_queries():
    """One query per stdin line, decoded leniently (binary garbage is the query's problem)."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # an already-decoded stream
        yield from (line.rstrip("\r\n") for line in sys.stdin)
        return
    for raw in binary:
        yield raw.rstrip(b"\r\n").decode("utf-8", "replace")


@main.command("search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=None, help="Results (search.k).")
@click.option(
    "--route", type=click.Choice(["auto", "code", "docs", "mixed"]), default=None,
    help="Search code, docs or both; auto lets the router decide (search.route).",
)  # fmt: skip
@json_option
@click.option("--explain", is_flag=True, help="Show the route, each retriever's hits, fusion.")
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
    "--fusion", type=click.Choice(["rrf", "weighted", "max"]), default=None,
    help="How ranked lists are fused (search.fusion).",
)  # fmt: skip
@verbose_option
def search_cmd(
    query: str, k: int | None, route: str | None, as_json: bool, explain: bool,
    repo: Path | None, no_bm25: bool, no_dense: bool, no_routing: bool, no_exact: bool,
    fusion: str | None, hyde: bool | None, graph: bool | None, rerank: bool | None,
    llm_rerank: bool | None, verbose: int,
) -> None:  # fmt: skip
    """Search code and docs for QUERY; `-` reads one query per stdin line (batch mode).

    With --json, each query prints one JSON object on one line: query, route, results
    (path, start_line, end_line, symbol, kind, lang, score, sources, snippet), timings_ms,
    took_ms, warnings. Paths are relative to the repo root, lines 1-based and inclusive.
    """
    from llmc.config import load_config
    from llmc.errors import IndexMissingError
    from llmc.search import Searcher

    _setup_logging(verbose)
    root = _repo_root(repo)
    overrides = _search_overrides(no_bm25, no_dense, no_routing, no_exact, fusion)
    overrides |= _hyde_overrides(hyde) | _second_stage_overrides(graph, rerank, llm_rerank)
    cfg = load_config(root, overrides)
    batch = query == "-"
    from llmc.daemon.client import try_daemon  # a running daemon answers warm (llmc/daemon)

    ask = {"query": query, "k": k, "route": route, "explain": explain}
    if as_json and not batch and (answer := try_daemon(root, "search", ask, cfg)) is not None:
        _log_query(root, cfg, answer)  # learn.log_queries (llmc/learn/querylog.py)
        return _print_json(answer)
    failed = 0
    con = _console()
    with Searcher(root, cfg) as searcher:
        if batch:
            searcher.warm()
        for q in _stdin_queries() if batch else [query]:
            try:
                response = searcher.search(q, k=k, route=route, explain=explain)
            except LlmcError as e:
                if not batch or isinstance(e, IndexMissingError):
                    raise
                failed += 1
                if as_json:
                    _print_json({"query": q, "error": str(e)})
                else:
                    con.print(f"error: {e}", markup=False)
                continue
            if not batch:
                _log_query(root, cfg, response.to_json())  # learn.log_queries
            if as_json:
                _print_json(response.to_json())
            else:
                if batch:
                    con.print(f"» {response.query}", markup=False, style="bold")
                _print_search(con, response, explain)
    if failed:
        raise click.ClickException(f"{failed} of the queries failed (see their error objects)")


# --- end search ----------------------------------------------------------------------------


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


# --- eval (logic: llmc/eval/) -------------------------------------------------------------
def _print_eval(report, compared: bool) -> None:
    from rich import box
    from rich.table import Table

    from llmc.eval import report as fmt

    con = _console()
    con.print(f"{report.set_name}: {report.n_queries} queries, k={report.k}, repo {report.root}")
    tables = [
        (fmt.QUALITY_COLUMNS, fmt.quality_rows(report), None),
        (fmt.LATENCY_COLUMNS, fmt.latency_rows(report), "p: paired tests against default"),
        (fmt.INTENT_COLUMNS, fmt.intent_rows(report), None),
    ]
    if compared:
        tables.append(
            (fmt.COMPARE_COLUMNS, fmt.comparison_rows(report), "Wilcoxon on RR, McNemar on hit@5")
        )
    for columns, rows, caption in tables:
        table = Table(caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)
        for i, column in enumerate(columns):
            table.add_column(column, no_wrap=i == 0)
        for row in rows:
            table.add_row(*row)
        con.print(table)
    for name in report.skipped_variants:
        con.print(f"skipped variant {name}: its stage is not in this build", markup=False)
    if report.warnings:
        con.print(f"{len(report.warnings)} judgments do not fit the repo (-v shows them)")


@main.command("eval")
@click.argument("queries", metavar="[QUERIES.jsonl|SET]", required=False)
@repo_option
@click.option(
    "--from-git", "from_git", type=click.IntRange(min=0), is_flag=False, flag_value=0,
    default=None, metavar="[N]", help="Mine a set from the last N commits (llmc/learn).",
)  # fmt: skip
@click.option("--ablate", is_flag=True, help="Run every stage-off variant into one table.")
@click.option("--compare", nargs=2, default=None, metavar="A B", help="Paired tests, A vs B.")
@click.option("--variant", "variants", multiple=True, help="Run this variant (repeatable).")
@click.option("-k", "k", type=int, default=None, help="Results per query (default search.k).")
@click.option("--no-index", is_flag=True, help="Search the index as it is; do not update it.")
@click.option("--per-query", is_flag=True, help="With --json: each query's scores and results.")
@verbose_option
@json_option
def eval_cmd(
    queries: str | None,
    repo: Path | None,
    from_git: int | None,
    ablate: bool,
    compare: tuple[str, str] | None,
    variants: tuple[str, ...],
    k: int | None,
    no_index: bool,
    per_query: bool,
    verbose: int,
    as_json: bool,
) -> None:
    """Measure search on graded queries: MRR, nDCG, recall, Code@3, latency, ablations.

    QUERIES is a JSON Lines file or a shipped set (attrs, marshmallow, llmc); a shipped
    project set fetches its pinned sdist from PyPI on first use. docs/evaluation.md
    defines every number. `judgments` runs your labels (`llmc label`); --from-git [N]
    mines a set from the repository's history (docs/learning.md: its caveats).
    """
    from llmc.eval.runner import evaluate_set

    _setup_logging(verbose)
    if from_git is not None or queries == "judgments":  # sets made by llmc/learn
        from llmc.config import load_config
        from llmc.learn.sets import materialize

        repo = _repo_root(repo)
        queries, note = materialize(repo, load_config(repo), queries, from_git)
        click.echo(f"{note} -> {queries}", err=True)
    if queries is None:
        raise click.UsageError("give QUERIES.jsonl or a set name, or --from-git")
    with _RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        report = evaluate_set(
            queries, repo, ablate=ablate, compare_pair=compare, variants=variants, k=k,
            index=not no_index, progress=progress,
        )  # fmt: skip
    if as_json:
        _print_json(report.to_json(per_query=per_query))
    else:
        _print_eval(report, compared=compare is not None)


# --- end eval ------------------------------------------------------------------------------


# --- graph (owner: llmc/graph; docs/graph.md) ----------------------------------------------
@main.group("graph", cls=LlmcGroup)
def graph_group() -> None:
    """Query the repository graph: who uses a symbol, what it depends on, what is central.

    The graph (.llmc/rag_graph.json) is built by `llmc index`. SYMBOL / TARGET may be a node
    id (path::Qualified.name), a file path, a qualified name (Store.files), a dotted Python
    name (pkg.mod.func) or a plain name; an ambiguous name lists the candidates (exit 2).
    """


def _open_graph(repo: Path | None):
    from llmc.graph import load_graph
    from llmc.graph.report import stale_warning

    root = _repo_root(repo)
    graph = load_graph(root)
    warning = stale_warning(root, graph)
    if warning:
        click.echo(warning, err=True)
    return graph


def _graph_answer(graph, query: str, as_json: bool, answer):
    """Run ``answer()``; an ambiguous name prints its candidates and exits 2."""
    from llmc.graph import AmbiguousSymbolError
    from llmc.graph.report import candidate_lines

    try:
        return answer()
    except AmbiguousSymbolError as e:
        if as_json:
            cands = [graph.node(c).to_json() for c in e.candidates]
            _print_json({"query": query, "ambiguous": True, "candidates": cands})
        else:
            click.echo("\n".join(candidate_lines(graph, query, e.candidates)))
        sys.exit(2)


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
def graph_where_used_cmd(
    symbol: str, min_confidence: float, repo: Path | None, as_json: bool
) -> None:
    """Callers, importers, subclasses, tests and docs of SYMBOL."""
    from llmc.graph.report import usage_lines

    graph = _open_graph(repo)
    usage = _graph_answer(graph, symbol, as_json, lambda: graph.where_used(symbol, min_confidence))
    if as_json:
        _print_json(usage.to_json())
    else:
        click.echo("\n".join(usage_lines(usage)))


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
def graph_deps_cmd(target: str, depth: int | None, repo: Path | None, as_json: bool) -> None:
    """What TARGET uses: calls, imports and bases, transitively up to --depth."""
    from llmc.config import load_config
    from llmc.graph.report import deps_lines

    graph = _open_graph(repo)
    depth = depth or load_config(_repo_root(repo)).graph.deps_depth
    node = _graph_answer(graph, target, as_json, lambda: graph.resolve_one(target))
    deps = graph.deps(node, depth)
    if as_json:
        _print_json(
            {
                "target": graph.node(node).to_json(),
                "depth": depth,
                "deps": [d.to_json() for d in deps],
            }
        )
    else:
        click.echo("\n".join(deps_lines(graph, node, deps)))


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
    target: str, edge_types: tuple[str, ...], direction: str, repo: Path | None, as_json: bool
) -> None:
    """Every edge at TARGET, in and out, with type and confidence."""
    from llmc.graph.report import neighbor_lines

    graph = _open_graph(repo)
    node = _graph_answer(graph, target, as_json, lambda: graph.resolve_one(target))
    edges = graph.neighbors(node, edge_types or None, direction)
    if as_json:
        _print_json({"target": graph.node(node).to_json(), "edges": [e.to_json() for e in edges]})
    else:
        click.echo("\n".join(neighbor_lines(graph, node, edges)))


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
def graph_stats_cmd(top: int, repo: Path | None, as_json: bool) -> None:
    """Counts by node kind and edge type, resolution rates, top nodes by PageRank."""
    from llmc.graph.report import stats_lines

    summary = _open_graph(repo).summary(top)
    if as_json:
        _print_json(summary)
    else:
        click.echo("\n".join(stats_lines(summary)))


# --- end graph -----------------------------------------------------------------------------


# --- daemon, hooks, mcp (logic: llmc/daemon/, llmc/hooks.py, llmc/mcp.py) ------------------
@main.group("daemon", cls=LlmcGroup)
def daemon_group() -> None:
    """Background daemon per repository: warm models, local API, file watcher.

    The API is HTTP + JSON on .llmc/daemon.sock (docs/daemon-api.md). While a daemon
    runs, `llmc search --json` and `llmc mcp` use it; LLMC_NO_DAEMON=1 bypasses it.
    """


def _daemon_options(f):
    f = click.option("--watch/--no-watch", default=None, help="Reindex on file changes.")(f)
    f = click.option("--port", type=click.IntRange(0, 65535), default=None,
                     help="TCP port with --tcp (0: any free port).")(f)  # fmt: skip
    f = click.option("--tcp/--no-tcp", default=None,
                     help="Also listen on 127.0.0.1 with a bearer token.")(f)  # fmt: skip
    return f


def _daemon_config(root: Path, tcp: bool | None, port: int | None, watch: bool | None):
    from llmc.config import load_config

    return load_config(
        root, overrides={"daemon.tcp": tcp, "daemon.tcp_port": port, "daemon.watch": watch}
    )


@daemon_group.command("start")
@repo_option
@_daemon_options
@verbose_option
@json_option
def daemon_start_cmd(repo, tcp, port, watch, verbose: int, as_json: bool) -> None:
    """Start the daemon in the background; return once its socket answers."""
    from llmc.daemon import control

    root = _repo_root(repo)
    args = [*(["--tcp"] if tcp else ["--no-tcp"] if tcp is False else []),
            *(["--port", str(port)] if port is not None else []),
            *(["--watch"] if watch else ["--no-watch"] if watch is False else []),
            *(["-" + "v" * verbose] if verbose else [])]  # fmt: skip
    res = control.start(root, _daemon_config(root, tcp, port, watch), args)
    if as_json:
        _print_json(res.__dict__)
        return
    for path in res.cleaned:
        click.echo(f"removed stale {path}", err=True)
    state = "already running" if res.already_running else f"started in {res.seconds:.1f}s"
    click.echo(f"daemon {state} (pid {res.pid}) on {res.socket}")


@daemon_group.command("stop")
@repo_option
@json_option
def daemon_stop_cmd(repo: Path | None, as_json: bool) -> None:
    """Stop the daemon (SIGTERM; SIGKILL after 15 s)."""
    from llmc.daemon import control

    res = control.stop(_repo_root(repo))
    if as_json:
        _print_json(res.__dict__)
    elif not res.was_running:
        click.echo("no daemon running" + (" (removed stale files)" if res.cleaned else ""))
    else:
        click.echo(f"daemon stopped (pid {res.pid}{', killed' if res.killed else ''})")


@daemon_group.command("status")
@repo_option
@json_option
def daemon_status_cmd(repo: Path | None, as_json: bool) -> None:
    """Uptime, index generation, queue, memory, models. Exit status 3 when not running."""
    from llmc.daemon import control

    st = control.status(_repo_root(repo))
    if as_json:
        _print_json(st)
    else:
        click.echo("\n".join(control.status_lines(st)))
    if not st["running"]:
        sys.exit(3)


@daemon_group.command("logs")
@repo_option
@click.option("-n", "--lines", type=click.IntRange(0), default=50, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines.")
def daemon_logs_cmd(repo: Path | None, lines: int, follow: bool) -> None:
    """Print the end of .llmc/daemon.log."""
    from llmc.daemon import control

    for line in control.logs(_repo_root(repo), lines, follow):
        click.echo(line)


@daemon_group.command("run")
@repo_option
@_daemon_options
@verbose_option
@click.option("-q", "--quiet", is_flag=True, help="Log warnings only.")
def daemon_run_cmd(repo, tcp, port, watch, verbose: int, quiet: bool) -> None:
    """Run the daemon in the foreground (for systemd, launchd, or debugging)."""
    from llmc.daemon.server import run_daemon

    _setup_logging(max(verbose, 1), quiet)
    for h in logging.getLogger("llmc").handlers:
        if getattr(h, "_llmc", False):
            h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = _repo_root(repo)
    run_daemon(root, _daemon_config(root, tcp, port, watch))


@main.group("hooks", cls=LlmcGroup)
def hooks_group() -> None:
    """Git hooks (post-commit, -merge, -checkout, -rewrite) that keep the index fresh."""


def _print_hooks(states, as_json: bool) -> None:
    if as_json:
        _print_json([s.to_json() for s in states])
        return
    for s in states:
        click.echo(f"{s.hook:<14} {s.state:<10} {s.path}" + (f"  ({s.detail})" if s.detail else ""))


@hooks_group.command("install")
@repo_option
@json_option
def hooks_install_cmd(repo: Path | None, as_json: bool) -> None:
    """Add the llmc block to each hook; existing hooks are kept and still run."""
    from llmc import hooks

    _print_hooks(hooks.install(_repo_root(repo)), as_json)


@hooks_group.command("uninstall")
@repo_option
@json_option
def hooks_uninstall_cmd(repo: Path | None, as_json: bool) -> None:
    """Remove the llmc block; restore hooks that were chained."""
    from llmc import hooks

    _print_hooks(hooks.uninstall(_repo_root(repo)), as_json)


@hooks_group.command("status")
@repo_option
@json_option
def hooks_status_cmd(repo: Path | None, as_json: bool) -> None:
    """Which hooks carry the llmc block, and where git looks for hooks."""
    from llmc import hooks

    _print_hooks(hooks.status(_repo_root(repo)), as_json)


@hooks_group.command("notify", hidden=True)
@click.argument("hook")
@repo_option
def hooks_notify_cmd(hook: str, repo: Path | None) -> None:
    """Run by the hooks: tell the daemon, or index here. Never fails."""
    from llmc import hooks

    try:
        click.echo(hooks.notify(_repo_root(repo), hook))
    except Exception as e:  # noqa: BLE001 - a hook must never fail; hooks.log has the detail
        click.echo(f"llmc hook {hook}: {e}", err=True)


@main.command("mcp")
@repo_option
@verbose_option
def mcp_cmd(repo: Path | None, verbose: int) -> None:
    """Serve MCP (Model Context Protocol) on stdin/stdout: search, where_used, deps, status."""
    from llmc.config import load_config
    from llmc.mcp import serve_stdio

    _setup_logging(verbose)
    root = _repo_root(repo)
    serve_stdio(root, load_config(root))


# --- end daemon, hooks, mcp ------------------------------------------------------------------


# --- learn: label, tune, query log (logic: llmc/learn/; docs/learning.md) ---------------------
def _log_query(root: Path, cfg, response: dict) -> None:
    """Append one answered query to .llmc/queries.jsonl when learn.log_queries is on."""
    if cfg.learn.log_queries:
        from llmc.learn.querylog import log_search

        log_search(root, response, cfg.learn.query_log_max)


def _print_label_item(con, item) -> None:
    from rich.markup import escape

    symbol = f"  [bold]{escape(item.symbol)}[/] [dim]{escape(item.kind)}[/]" if item.symbol else ""
    why = f"  [dim]disagreement {item.disagreement:.2f}[/]" if item.disagreement else ""
    con.print(
        f"[bold cyan]{item.rank:>2}.[/] [green]{escape(item.path)}[/]:{item.start_line}-"
        f"{item.end_line}{symbol}  [dim]{item.tag}, {escape(','.join(item.sources))}[/]{why}"
    )
    for line in item.snippet.split("\n"):
        con.print(f"     │ {line}", markup=False, overflow="ellipsis", no_wrap=True)


def _ask_grade(con):
    """Prompt until the answer is a grade, skip or quit (``?`` prints the rubric)."""
    from llmc.learn.label import Answer, parse_answer, rubric_lines

    while True:
        try:
            text = click.prompt("grade 0-3, s skip, q quit, ? help", default="s",
                                show_default=False)  # fmt: skip
        except click.Abort:  # end of input
            return Answer("quit")
        try:
            answer = parse_answer(text)
        except ValueError as e:
            con.print(str(e), markup=False)
            continue
        if answer.action != "help":
            return answer
        for line in rubric_lines():
            con.print(f"  {line}", markup=False)


def _print_kappa(labels, as_json: bool) -> None:
    from llmc.learn.kappa import agreement

    pairs = agreement(labels)
    if as_json:
        return _print_json({"agreement": [a.to_json() for a in pairs]})
    if not pairs:
        click.echo("no item was labeled by two labelers: no agreement to measure")
    for a in pairs:
        click.echo(
            f"{a.a} vs {a.b}: {a.n} items, agree {a.observed:.0%}, kappa {a.kappa:.3f}, "
            f"weighted (quadratic) {a.weighted_kappa:.3f}, relevant-or-not {a.relevant_kappa:.3f}"
        )


@main.command("label")
@click.argument("query", required=False)
@click.option(
    "--suggest", "suggest_n", type=click.IntRange(min=1), is_flag=False, flag_value=5,
    default=None, metavar="[N]", help="Active learning: N queries (5) where stages disagree most.",
)  # fmt: skip
@click.option(
    "--from-log", "from_log", type=click.IntRange(min=1), is_flag=False, flag_value=10,
    default=None, metavar="[N]", help="Label the N (10) latest logged searches not yet labeled.",
)  # fmt: skip
@click.option("-k", "k", type=click.IntRange(min=1), default=None, help="Results per query.")
@click.option("--labeler", default=None, help="Your name in the labels (learn.labeler).")
@click.option("--kappa", is_flag=True, help="Print Cohen's kappa between labelers; no labeling.")
@click.option(
    "--export", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write the labels as an eval query file; no labeling.",
)  # fmt: skip
@repo_option
@json_option
@verbose_option
def label_cmd(
    query: str | None, suggest_n: int | None, from_log: int | None, k: int | None,
    labeler: str | None, kappa: bool, export: Path | None, repo: Path | None, as_json: bool,
    verbose: int,
) -> None:  # fmt: skip
    """Grade search results 0-3 into .llmc/judgments.jsonl (3 = the direct answer or the
    implementation, 2 = partial, e.g. a usage example, 1 = mentions the terms but off
    target, 0 = unrelated).

    Label QUERY's top results, the latest logged searches (--from-log), or the queries and
    results where BM25, dense and the router disagree most (--suggest). `llmc eval
    judgments` and `llmc tune` use the labels; docs/learning.md describes the workflow.
    """
    from llmc.config import load_config
    from llmc.learn.judgments import default_labeler, judgments_path, load_labels

    _setup_logging(verbose)
    root = _repo_root(repo)
    cfg = load_config(root)
    if kappa or export:
        labels, _ = load_labels(judgments_path(root))
        if export:
            from llmc.learn.judgments import to_eval_queries, write_eval_queries

            queries = to_eval_queries(labels)
            write_eval_queries(queries, export)
            click.echo(f"{len(queries)} queries -> {export}", err=True)
        return _print_kappa(labels, as_json) if kappa else None
    if sum(x is not None for x in (query, suggest_n, from_log)) != 1:
        raise click.UsageError("give one of QUERY, --suggest or --from-log")
    from llmc.learn.label import LabelSession
    from llmc.learn.querylog import logged_queries
    from llmc.learn.sets import judged_queries

    k = k or cfg.learn.label_k
    source = "label" if query else ("suggest" if suggest_n else "log")
    name = default_labeler(labeler or cfg.learn.labeler, root)
    con = _console()
    with LabelSession(root, cfg, name, source) as session:
        if suggest_n:
            pool = logged_queries(root, 200) + [q.query for q in judged_queries(root)]
            if not pool:
                raise click.ClickException("no logged or labeled queries to choose from yet")
            plan = [(s.query, list(s.items), s.reasons) for s in
                    session.suggestions(pool, suggest_n, k)]  # fmt: skip
        else:
            asked = [query] if query else logged_queries(root, 10 * from_log)
            plan = [(q, None, ()) for q in asked]
        shown = 0
        for q, items, reasons in plan:
            items = session.items(q, k) if items is None else items
            if not items:
                continue
            if from_log and shown >= from_log:
                break
            shown += 1
            con.print(f"» {q}", markup=False, style="bold")
            for reason in reasons:
                con.print(f"  ({reason})", markup=False, style="dim")
            for item in items:
                _print_label_item(con, item)
                answer = _ask_grade(con)
                if answer.action == "quit":
                    break
                session.record(item, answer)
            else:
                continue
            break
        con.print(
            f"labeled {session.labeled}, skipped {session.skipped} "
            f"-> {judgments_path(root)} (labeler {name})"
        )


def _print_tune(report) -> None:
    from rich import box
    from rich.table import Table

    con = _console()
    what = f"{report.folds}-fold cross-validation" if report.folds else "held-out split"
    con.print(
        f"tune {report.root}: {report.n_train} training / {report.n_test} held-out queries "
        f"({what}); sources {report.sources}; {report.evaluations} weight settings tried"
    )
    table = Table(caption="held-out queries", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("", "nDCG@10", "MRR@10", "hit@5", "Δ nDCG", "p nDCG", "p RR", "p hit@5"):
        table.add_column(column)
    tests = {c.b: c for c in report.comparisons}
    for name, ev in report.heldout.items():
        c = tests.get(name)
        extra = (
            [f"{c.delta_ndcg:+.4f}", f"{c.p_ndcg:.3g}", f"{c.p_rr:.3g}", f"{c.p_hit5:.3g}"]
            if c else [""] * 4
        )  # fmt: skip
        table.add_row(name, f"{ev.ndcg:.4f}", f"{ev.mrr:.4f}", f"{ev.hit5:.4f}", *extra)
    con.print(table)
    for key, value in report.after.items():
        if report.before.get(key) != value:
            con.print(f"  {key}: {report.before.get(key)} -> {value}", markup=False)
    for fold in report.fold_params:
        con.print(f"  fold: {fold}", markup=False)
    if report.finetune:
        f = report.finetune
        con.print(
            f"  reranker fine-tune: {f['steps']} steps on {f['pairs']} in {f['seconds']}s "
            f"({f['device']}), loss {f['loss_first']} -> {f['loss_last']}; "
            + ("kept (used when search.rerank is on)" if f["kept"] else "not kept"),
            markup=False,
        )
    if report.intent:
        i = report.intent
        kept = "kept" if i.get("kept") else f"not kept ({i.get('why', '')})"
        con.print(
            f"  intent model: {kept}; held-out route accuracy heuristic "
            f"{i.get('heldout_heuristic_acc', 0):.2f} -> {i.get('heldout_combined_acc', 0):.2f}",
            markup=False,
        )
    for note in report.notes:
        con.print(f"  {note}", markup=False)
    con.print(
        f"saved {report.path}" if report.saved else f"not saved: {report.why_not_saved}",
        markup=False,
    )
    con.print(f"took {report.seconds:.0f}s")


@main.command("tune")
@click.option(
    "--from-git", "from_git", type=click.IntRange(min=0), is_flag=False, flag_value=0,
    default=None, metavar="[N]", help="Also learn from N mined commits (learn.git_commits).",
)  # fmt: skip
@click.option("--queries", "query_files", multiple=True, metavar="FILE|SET",
              help="Also learn from this eval query file or shipped set (repeatable).")  # fmt: skip
@click.option("--no-judgments", is_flag=True, help="Leave .llmc/judgments.jsonl out.")
@click.option("--no-intent", is_flag=True, help="Weights only; keep the heuristic router.")
@click.option("--cv", "folds", type=click.IntRange(min=2), default=None, metavar="K",
              help="K-fold cross-validation: measure only, write nothing.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Estimate how long tuning takes; fit nothing.")
@click.option("--reset", is_flag=True, help="Remove .llmc/tuned/: search runs untuned again.")
@click.option("--force", is_flag=True, help="Save even when held-out nDCG@10 got worse.")
@click.option("--no-save", is_flag=True, help="Fit and measure, write nothing.")
@click.option("--no-index", is_flag=True, help="Search the index as it is; do not update it.")
@click.option(
    "--finetune", "finetune_steps", type=click.IntRange(min=1), is_flag=False, flag_value=150,
    default=None, metavar="[STEPS]",
    help="Also fine-tune the reranker on the repo's own pairs (150 steps; minutes on CPU).",
)  # fmt: skip
@repo_option
@json_option
@verbose_option
def tune_cmd(
    from_git: int | None, query_files: tuple[str, ...], no_judgments: bool, no_intent: bool,
    folds: int | None, dry_run: bool, reset: bool, force: bool, no_save: bool, no_index: bool,
    finetune_steps: int | None, repo: Path | None, as_json: bool, verbose: int,
) -> None:  # fmt: skip
    """Learn fusion weights and an intent classifier for this repository from its labels
    (`llmc label`), query files and git history; measure them on held-out queries.

    Writes .llmc/tuned/, which search then uses, only when held-out nDCG@10 is not
    worse; prints untuned against tuned with paired tests. docs/learning.md has the
    procedure.
    """
    from llmc.config import load_config
    from llmc.learn import tune as tuning
    from llmc.learn.sets import gather

    _setup_logging(verbose)
    root = _repo_root(repo)
    cfg = load_config(root)
    if reset:
        from llmc.learn.tuned import reset_tuned

        removed = reset_tuned(root, cfg)
        if as_json:
            return _print_json({"reset": removed})
        return click.echo("removed .llmc/tuned/: search runs untuned" if removed else
                          "not tuned: nothing to reset")  # fmt: skip
    qs = gather(root, cfg, not no_judgments, from_git, query_files)
    if dry_run:
        est = tuning.estimate(root, cfg, qs)
        if as_json:
            return _print_json(est.to_json())
        stale = " (the index is stale: updating it comes on top)" if est.index_stale else ""
        return click.echo(
            f"{est.queries} queries ({est.train} training, {est.heldout} held out), about "
            f"{est.searches} searches at {est.seconds_per_search * 1000:.0f} ms: roughly "
            f"{est.seconds:.0f}s{stale}"
        )
    with _RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        kw = {"index": not no_index, "intent": not no_intent, "progress": progress}
        if folds:
            report = tuning.cross_validate(root, cfg, qs, folds, **kw)
        else:
            report = tuning.tune(
                root, cfg, qs, save=not no_save, force=force, finetune=bool(finetune_steps),
                finetune_steps=finetune_steps or 150, **kw,
            )  # fmt: skip
    if as_json:
        _print_json(report.to_json())
    else:
        _print_tune(report)


# --- end learn -------------------------------------------------------------------------------
