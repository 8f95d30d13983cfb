"""`llmc eval`, `llmc label`, `llmc tune`: measure search on this repository, label its
results, learn its weights (logic: llmc/eval/, llmc/learn/; docs/evaluation.md,
docs/learning.md). Training the shipped models is the lab's (`python -m lab train`)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llmc.cli import render
from llmc.cli.options import (
    json_option,
    repo_option,
    repo_path_option,
    setup_logging,
    verbose_option,
)

if TYPE_CHECKING:
    from rich.console import Console

    from llmc.config import Config
    from llmc.learn.label import Answer, LabelSession, Round


# --- eval ------------------------------------------------------------------------------
@click.command("eval")
@click.argument("queries", metavar="[QUERIES.jsonl|SET]", required=False)
@repo_path_option
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
    queries: str | None, repo: Path | None, from_git: int | None, ablate: bool,
    compare: tuple[str, str] | None, variants: tuple[str, ...], k: int | None,
    no_index: bool, per_query: bool, verbose: int, as_json: bool,
) -> None:  # fmt: skip
    """Measure search on graded queries: MRR, nDCG, recall, Code@3, latency, ablations.

    QUERIES is a JSON Lines file or a shipped set (attrs, marshmallow, llmc); a shipped
    project set fetches its pinned sdist from PyPI on first use. docs/evaluation.md defines
    every number. `judgments` runs your labels (`llmc label`); --from-git [N] mines a set
    from the repository's history (docs/learning.md: its caveats).
    """
    from llmc.eval.runner import evaluate_set

    setup_logging(verbose)
    if from_git is not None or queries == "judgments":  # sets made by llmc/learn
        from llmc.config import load_config
        from llmc.learn.sets import materialize
        from llmc.paths import find_repo_root

        repo = find_repo_root(repo)
        queries, note = materialize(repo, load_config(repo), queries, from_git)
        click.echo(f"{note} -> {queries}", err=True)
    if queries is None:
        raise click.UsageError("give QUERIES.jsonl or a set name, or --from-git")
    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        report = evaluate_set(
            queries, repo, ablate=ablate, compare_pair=compare, variants=variants, k=k,
            index=not no_index, progress=progress,
        )  # fmt: skip
    if as_json:
        render.print_json(report.to_json(per_query=per_query))
    else:
        render.print_eval(report, compared=compare is not None)


# --- label -----------------------------------------------------------------------------
def _ask_grade(con: Console) -> Answer:
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


def _label_rounds(con: Console, session: LabelSession, rounds: Iterable[Round]) -> None:
    """Show each result and record the grade typed for it, until the rounds end or `q`."""
    for r in rounds:
        con.print(f"» {r.query}", markup=False, style="bold")
        for reason in r.reasons:
            con.print(f"  ({reason})", markup=False, style="dim")
        for item in r.items:
            render.print_label_item(con, item)
            answer = _ask_grade(con)
            if answer.action == "quit":
                return
            session.record(item, answer)


def _label_files(root: Path, kappa: bool, export: Path | None, as_json: bool) -> None:
    """--export writes the labels as an eval query file; --kappa prints agreement."""
    from llmc.learn.judgments import judgments_path, load_labels

    labels, _ = load_labels(judgments_path(root))
    if export:
        from llmc.learn.judgments import to_eval_queries, write_eval_queries

        queries = to_eval_queries(labels)
        write_eval_queries(queries, export)
        click.echo(f"{len(queries)} queries -> {export}", err=True)
    if kappa:
        from llmc.learn.kappa import agreement

        render.print_kappa(agreement(labels), as_json)


@click.command("label")
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
    labeler: str | None, kappa: bool, export: Path | None, root: Path, as_json: bool,
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
    from llmc.learn.judgments import default_labeler, judgments_path
    from llmc.learn.label import LabelSession

    setup_logging(verbose)
    cfg = load_config(root)
    if kappa or export:
        return _label_files(root, kappa, export, as_json)
    if sum(x is not None for x in (query, suggest_n, from_log)) != 1:
        raise click.UsageError("give one of QUERY, --suggest or --from-log")
    source = "label" if query else ("suggest" if suggest_n else "log")
    name = default_labeler(labeler or cfg.learn.labeler, root)
    con = render.console()
    with LabelSession(root, cfg, name, source) as session:
        rounds = session.rounds(k or cfg.learn.label_k, query, suggest_n, from_log)
        _label_rounds(con, session, rounds)
        con.print(
            f"labeled {session.labeled}, skipped {session.skipped} "
            f"-> {judgments_path(root)} (labeler {name})"
        )


# --- tune ------------------------------------------------------------------------------
def _tune_reset(root: Path, cfg: Config, as_json: bool) -> None:
    from llmc.learn.tuned import reset_tuned

    removed = reset_tuned(root, cfg)
    if as_json:
        return render.print_json({"reset": removed})
    click.echo("removed .llmc/tuned/: search runs untuned" if removed else
               "not tuned: nothing to reset")  # fmt: skip


@click.command("tune")
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
    finetune_steps: int | None, root: Path, as_json: bool, verbose: int,
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

    setup_logging(verbose)
    cfg = load_config(root)
    if reset:
        return _tune_reset(root, cfg, as_json)
    qs = gather(root, cfg, not no_judgments, from_git, query_files)
    if dry_run:
        return render.print_tune_estimate(tuning.estimate(root, cfg, qs), as_json)
    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        kw = {"index": not no_index, "intent": not no_intent, "progress": progress}
        if folds:
            report = tuning.cross_validate(root, cfg, qs, folds, **kw)
        else:
            report = tuning.tune(
                root, cfg, qs, save=not no_save, force=force, finetune=bool(finetune_steps),
                finetune_steps=finetune_steps or 150, **kw,
            )  # fmt: skip
    if as_json:
        render.print_json(report.to_json())
    else:
        render.print_tune(report)


COMMANDS = (eval_cmd, label_cmd, tune_cmd)
