"""Everything `llmc` prints: rich tables, panels, progress bars and plain lines.

The command modules hand it the library's records; it decides how they look. Results go
to stdout, progress and warnings to stderr; NO_COLOR switches colour off.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

    from llmc.eval.runner import EvalReport
    from llmc.hooks import HookState
    from llmc.index.status import IndexStatus
    from llmc.learn.kappa import Agreement
    from llmc.learn.label import Item
    from llmc.learn.tune import Estimate, TuneReport
    from llmc.search.hyde import HydeReport
    from llmc.search.types import SearchResponse
    from llmc.types import IndexSummary


# Repository content reaches the terminal (paths, symbols, snippets, log lines): its control
# characters must not. C0 (but newline and tab), DEL, C1 and lone surrogates (undecodable
# file names) become one visible character each, so rich's style offsets still fit.
_UNPRINTABLE = {
    **{c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)},  # ␀ … ␟ (ESC = ␛)
    0x7F: 0x2421,  # ␡
    **{c: 0xFFFD for c in range(0x80, 0xA0)},
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every terminal control character (ESC ]0; window titles, ESC ]52;
    clipboard writes, CR overwrites, C1 CSI ...) replaced by a visible stand-in."""
    return _SURROGATE.sub("\ufffd", text.translate(_UNPRINTABLE))


def console(stderr: bool = False) -> Console:
    from rich.console import Console
    from rich.text import Text

    class SafeConsole(Console):
        """A rich console that never writes repository text's control characters."""

        def print(self, *objects: Any, **kwargs: Any) -> None:
            safe = []
            for obj in objects:
                if isinstance(obj, str):
                    obj = printable(obj)
                elif isinstance(obj, Text):
                    obj = obj.copy()
                    obj.plain = printable(obj.plain)  # same length: the styles stay put
                safe.append(obj)
            super().print(*safe, **kwargs)

    return SafeConsole(
        stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")), highlight=False, soft_wrap=True
    )


def print_json(obj: Any) -> None:
    """One JSON document; C0 controls are escaped by JSON itself, C1 controls and lone
    surrogates here (``\\u009b``), so the bytes on the terminal carry no control sequence."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    click.echo(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


class RichProgress:
    """Rich progress bars on stderr for the indexer's phases (library code stays rich-free)."""

    def __init__(self, enabled: bool) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=not enabled,
        )
        self._task = None
        self.enabled = enabled

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
            self.console.print(message)
        else:
            logging.getLogger("llmc").info(message)


def print_index_summary(summary: IndexSummary, verbose: int, handoff: str | None = None) -> None:
    """The run's summary; ``handoff`` is where its missing vectors (and maybe its graph
    update) went (``llmc.index.handoff.Handoff.line``), printed with the vectors line."""
    con = console()

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
        vectors = getattr(summary, "vectors", None)
        if vectors is not None and not vectors.complete:
            how = {
                "deferred": "skipped (--no-vectors)",
                "stopped": "stopped early",
                "daemon": "handed to the daemon",
                "background": "handed to a background process",
            }.get(getattr(summary, "backfill", ""), "incomplete")
            later = getattr(summary, "backfill", "") in ("daemon", "background")
            con.print(
                f"  {vectors.line()}: embedding {how}; search uses BM25 and exact symbols "
                "for the rest" + ("" if later else " (`llmc index` embeds them)")
            )
        if handoff:
            con.print(f"  {handoff}", markup=False)
        if summary.searchable_seconds:
            con.print(f"  searchable after {summary.searchable_seconds:.1f}s")
        for what in summary.repaired:
            how = "rebuilt from the files" if what == "corrupt-db" else "rebuilt from SQLite"
            con.print(f"  repaired: {what} ({how})")
    if summary.skipped:
        if verbose:
            for s in summary.skipped:
                con.print(f"  skip {s.path}: {s.reason} ({s.detail})", markup=False)
        else:
            con.print(
                f"skipped {len(summary.skipped)} files: {counts(summary.skipped_by_reason)} "
                "(-v shows why)"
            )


def _print_hyde(con: Console, report: HydeReport | None) -> None:
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


def print_search(con: Console, response: SearchResponse, explain: bool) -> None:
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
        console(stderr=True).print(f"warning: {w}", markup=False, style="yellow")


def print_files(con: Console, answer: dict) -> None:
    """A file-level answer (--files): rank, path, score, then its best spans' lines."""
    from rich.markup import escape

    if not answer.get("files"):
        con.print("no results", style="yellow")
    for rank, f in enumerate(answer.get("files", []), start=1):
        found = f"{f['matched_spans']} span(s)" if f["matched_spans"] else "whole-file match"
        con.print(
            f"[bold cyan]{rank:>2}.[/] [green]{escape(f['path'])}[/]  "
            f"[dim]{f['score']:.4f}, {found}[/]"
        )
        for sp in f["spans"]:
            what = f"  [bold]{escape(sp['symbol'])}[/] [dim]{escape(sp['kind'])}[/]"
            con.print(f"    :{sp['start_line']}-{sp['end_line']}{what if sp['symbol'] else ''}")
    for w in answer.get("warnings", []):
        console(stderr=True).print(f"warning: {w}", markup=False, style="yellow")


def print_search_error(query: str, error: Exception, as_json: bool) -> None:
    """A failed query of a batch: an error object with --json, else one line."""
    if as_json:
        print_json({"query": query, "error": str(error)})
    else:
        console().print(f"error: {error}", markup=False)


def _print_explain(con: Console, response: SearchResponse) -> None:
    from rich.markup import escape

    route, ex = response.route, response.explain
    con.print(
        f"[bold]route[/] {route.intent} (p_code {route.p_code:.2f}, confidence "
        f"{route.confidence:.2f}, {route.source}); route weights "
        + ", ".join(f"{k} {v:.2f}" for k, v in route.weights.items())
        + (
            "; list weights " + ", ".join(f"{k} {v:.2f}" for k, v in route.list_weights.items())
            if route.list_weights
            else ""  # the learned ranker weighs no list: nothing to show, not an empty label
        )
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


def print_eval(report: EvalReport, compared: bool) -> None:
    from rich import box
    from rich.table import Table

    from llmc.eval import tables as fmt

    con = console()
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


def print_hooks(states: list[HookState], as_json: bool) -> None:
    if as_json:
        print_json([s.to_json() for s in states])
        return
    for s in states:
        click.echo(f"{s.hook:<14} {s.state:<10} {s.path}" + (f"  ({s.detail})" if s.detail else ""))


def print_label_item(con: Console, item: Item) -> None:
    from rich.markup import escape

    symbol = f"  [bold]{escape(item.symbol)}[/] [dim]{escape(item.kind)}[/]" if item.symbol else ""
    why = f"  [dim]disagreement {item.disagreement:.2f}[/]" if item.disagreement else ""
    con.print(
        f"[bold cyan]{item.rank:>2}.[/] [green]{escape(item.path)}[/]:{item.start_line}-"
        f"{item.end_line}{symbol}  [dim]{item.tag}, {escape(','.join(item.sources))}[/]{why}"
    )
    for line in item.snippet.split("\n"):
        con.print(f"     │ {line}", markup=False, overflow="ellipsis", no_wrap=True)


def print_kappa(pairs: list[Agreement], as_json: bool) -> None:
    if as_json:
        return print_json({"agreement": [a.to_json() for a in pairs]})
    if not pairs:
        click.echo("no item was labeled by two labelers: no agreement to measure")
    for a in pairs:
        click.echo(
            f"{a.a} vs {a.b}: {a.n} items, agree {a.observed:.0%}, kappa {a.kappa:.3f}, "
            f"weighted (quadratic) {a.weighted_kappa:.3f}, relevant-or-not {a.relevant_kappa:.3f}"
        )


def print_tune(report: TuneReport) -> None:
    from rich import box
    from rich.table import Table

    con = console()
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


def print_tune_estimate(est: Estimate, as_json: bool) -> None:
    """`llmc tune --dry-run`: how many searches tuning takes, and roughly how long."""
    if as_json:
        return print_json(est.to_json())
    stale = " (the index is stale: updating it comes on top)" if est.index_stale else ""
    click.echo(
        f"{est.queries} queries ({est.train} training, {est.heldout} held out), about "
        f"{est.searches} searches at {est.seconds_per_search * 1000:.0f} ms: roughly "
        f"{est.seconds:.0f}s{stale}"
    )


def print_config(
    items: list[tuple[str, Any, str]],
    as_json: bool,
    ignored: dict[str, tuple[Any, str, str]] | None = None,
) -> None:
    """`llmc config`: each key, its value and where the value came from; a value the
    repository's llmc.toml tried to set and may not is shown as ignored, with why: in JSON
    an ``ignored`` object, in text one whole line per key under the table (a table cell
    would be cut at the terminal's width). Values are text, never rich markup: they may
    come from the repository."""
    ignored = {k: ignored[k] for k, _, _ in items if k in (ignored or {})}
    if as_json:
        out: dict[str, Any] = {}
        for k, v, s in items:
            out[k] = {"value": v, "source": s}
            if k in ignored:
                value, where, why = ignored[k]
                out[k]["ignored"] = {"value": value, "source": where, "why": why}
        return print_json(out)
    from rich.table import Table
    from rich.text import Text

    table = Table("key", "value", "source", box=None)
    for key, value, source in items:
        if key in ignored:
            source += "; repo value ignored"
        table.add_row(Text(key), Text(json.dumps(value)), Text(source))
    con = console()
    con.print(table)
    for where in dict.fromkeys(where for _, where, _ in ignored.values()):
        from llmc.config import user_config_path

        con.print(
            Text(
                f"ignored in {where}: a repository's llmc.toml may set only how its own files "
                f"are indexed and ranked (set the others in {user_config_path()} or "
                "LLMC_<SECTION>__<KEY>):"
            )
        )
        for key, (value, source, why) in ignored.items():
            if source == where:
                con.print(Text(f"  {key}: ignored {json.dumps(value)}: {why}"))


def print_status(st: IndexStatus, verbose: int) -> None:
    """`llmc status`: freshness, counts, models, device, sizes; -v lists changed files."""
    from llmc.index.status import age

    con = console()
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
    todo = (
        ""
        if st.vectors.complete
        else " (`llmc index` embeds the rest; search meanwhile "
        "uses BM25 and exact symbols for them)"
    )
    con.print(f"  {st.vectors.line()}{todo}")
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
