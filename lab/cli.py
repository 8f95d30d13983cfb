"""`python -m lab`: the lab's commands, outside the product: the cross-project protocol
(``protocol``) and training of the models llmc ships (``train``). They reach llmc through
its public modules; llmc never imports the lab (tests/test_import_contract.py).
docs/evaluation.md, docs/reranker.md, docs/learning.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llmc.cli import render
from llmc.cli.options import LlmcGroup, json_option, setup_logging, verbose_option

if TYPE_CHECKING:
    from lab.protocol.run import ProtocolReport


@click.group("lab", cls=LlmcGroup)
def main() -> None:
    """llmc's lab: the cross-project protocol and training of the shipped models."""


# --- protocol --------------------------------------------------------------------------
@main.command("protocol")
@click.option(
    "--split",
    type=click.Choice(["test", "validation", "train"]),
    default="test",
    show_default=True,
    help="The projects to run.",
)
@click.option("--project", "projects", multiple=True, help="Only this project.")
@click.option(
    "--task", "tasks", multiple=True,
    type=click.Choice(["docstring", "commits", "questions", "reports"]),
    help="Run this task (repeatable; default docstring). commits needs "
    "git mirrors under $LLMC_MIRRORS; questions: the projects with a question file.",
)  # fmt: skip
@click.option("--pool", is_flag=True, help="With --task questions: write the results to judge.")
@click.option("--check", "check_only", is_flag=True,
              help="With --task questions: load and anchor the question files only.")  # fmt: skip
@click.option(
    "--max-queries",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    help="Queries per project (seeded sample).",
)
@click.option(
    "--tasks",
    "every",
    default=None,
    metavar="a,b,c,d",
    help="These tasks for every system in one run, numbers per kind "
    "and pooled, and issue 28's verdicts (a docstring, b questions, c commits, d reports).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="With --tasks: write report.md, report.json and each project's run here.",
)
@click.option("--resume", is_flag=True, help="With --out: reuse the runs already there.")
@click.option("--dry-run", is_flag=True, help="With --tasks: list what would run; search nothing.")
@click.option("-k", "k", type=int, default=None, help="Results per query (default 10).")
@click.option("--per-query", is_flag=True, help="With --json: each query's scores and results.")
@verbose_option
@json_option
def protocol_cmd(
    split: str, projects: tuple[str, ...], tasks: tuple[str, ...], pool: bool, check_only: bool,
    max_queries: int, every: str | None, out: Path | None, resume: bool, dry_run: bool,
    k: int | None, per_query: bool, verbose: int, as_json: bool,
) -> None:  # fmt: skip
    """Run the protocol: grep, bm25-only, dense-only, rrf and default over the pinned
    projects of --split, through llmc's own answer path (docs/evaluation.md)."""
    setup_logging(verbose)
    if pool or check_only:  # docs/evaluation.md, "Hand-written questions (task (b))"
        if tuple(tasks) != ("questions",):
            raise click.UsageError("--pool and --check go with --task questions alone")
        _questions_pool(split, projects, check_only, as_json)
        return
    if (out or resume or dry_run) and every is None:
        raise click.UsageError("--out, --resume and --dry-run go with --tasks")
    if every is not None:  # docs/evaluation.md, "Every kind in one run"
        if tasks:
            raise click.UsageError("give --tasks a,b,... or --task, not both")
        _every_kind(split, every, projects, max_queries, out, resume, dry_run, as_json, per_query)
        return
    from lab.protocol import run_protocol

    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        result = run_protocol(split, tasks or ("docstring",), projects=projects,
                              max_queries=max_queries, k=k or 10, progress=progress)  # fmt: skip
    render.print_json(result.to_json(per_query)) if as_json else print_protocol(result)


def _every_kind(split: str, spec: str, projects: tuple[str, ...], max_queries: int,
                out: Path | None, resume: bool, dry_run: bool, as_json: bool,
                per_query: bool) -> None:  # fmt: skip
    import json

    from lab.protocol import kinds, kinds_markdown, kinds_run

    tasks = kinds.parse_tasks(spec)
    if dry_run:
        rows = kinds_run.plan(split, tasks, projects, max_queries=max_queries)
        if as_json:
            render.print_json([r.to_json() for r in rows])
        else:
            click.echo(kinds_run.plan_markdown(rows), nl=False)
        return
    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        report = kinds_run.run_every_kind(split, tasks, projects, max_queries=max_queries,
                                          out=out, resume=resume, progress=progress)  # fmt: skip
    text = kinds_markdown.markdown(report)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(text, encoding="utf-8")
        doc = json.dumps(report.to_json(per_query=True), indent=1)
        (out / "report.json").write_text(doc + "\n", encoding="utf-8")
    render.print_json(report.to_json(per_query)) if as_json else click.echo(text, nl=False)


def _questions_pool(split: str, projects: tuple[str, ...], check_only: bool, as_json: bool) -> None:
    from lab.protocol import questions

    with render.RichProgress(enabled=not as_json and sys.stderr.isatty()) as progress:
        if check_only:
            lines = questions.check(split, projects, progress=progress)
            doc = lines
        else:
            pooled = questions.pool(split, projects, progress=progress)
            doc = {p: {"to_judge": str(f), "lines": n, "unjudged_top5": per}
                   for p, (f, n, per) in pooled.items()}  # fmt: skip
            lines = {p: f"{d['lines']} to judge -> {d['to_judge']} (unjudged top-5 per system: "
                     f"{d['unjudged_top5']})" for p, d in doc.items()}  # fmt: skip
    if as_json:
        render.print_json(doc)
        return
    for project, line in lines.items():
        click.echo(f"{project}: {line}")
    if not check_only:
        click.echo("judge: set each line's grade (0-3), then "
                   "python -m lab.protocol.questions merge FILE --judge NAME")  # fmt: skip


def print_protocol(report: ProtocolReport) -> None:
    from rich import box
    from rich.table import Table

    from lab.protocol.tables import tables

    con = render.console()
    for title, header, rows in tables(report):
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
        for i, column in enumerate(header):
            table.add_column(column, no_wrap=i == 0)
        for row in rows:
            table.add_row(*row)
        con.print(table)
    for name in report.skipped_systems:
        con.print(f"skipped system {name}: its stage is not in this build", markup=False)


# --- train -----------------------------------------------------------------------------
@main.group("train", cls=LlmcGroup)
def train_group() -> None:
    """Train the models llmc ships (docs/reranker.md); never needed to use llmc."""


def _ranker_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    from lab.train.ranker import TRAIN_KINDS

    return () if kinds == ("all",) else kinds or TRAIN_KINDS


def _specs(values: tuple[str, ...]) -> tuple[str, ...]:
    """Repeated and comma-separated values, in order."""
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


def _train_command(name: str) -> str:
    """This run's command line (``python -m lab train NAME ...``), as TRAINING.json records it."""
    import shlex

    argv = sys.argv[1:]
    rest = argv[argv.index(name) + 1 :] if name in argv else []
    return shlex.join(["python", "-m", "lab", "train", name, *rest])


@train_group.command("reranker")
@click.option("--projects", multiple=True, metavar="NAME[==VER]",
              help="Training projects, repeatable or comma-separated (default: the pinned "
              "list in lab.train.projects).")  # fmt: skip
@click.option("--holdout", multiple=True, metavar="NAME[==VER]",
              help="Held-out projects for evaluation (default: anyio, structlog).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Model directory to write (default: $XDG_CACHE_HOME/llmc/train/model; "
              "the shipped one is llmc/models/reranker).")  # fmt: skip
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where sdists are unpacked (default: $XDG_CACHE_HOME/llmc/train).")  # fmt: skip
@click.option("--epochs", type=int, default=None)
@click.option("--max-pairs", type=int, default=None,
              help="Training pairs (1 positive + negatives per query).")  # fmt: skip
@click.option("--max-length", type=int, default=None, help="Tokens per training pair.")
@click.option("--batch-size", type=int, default=None)
@click.option("--lr", type=float, default=None)
@click.option("--head-lr", type=float, default=None,
              help="Learning rate of the new classification head.")  # fmt: skip
@click.option("--hard", "n_hard", type=int, default=None, help="BM25 hard negatives per query.")
@click.option("--random", "n_random", type=int, default=None, help="Random negatives per query.")
@click.option("--loss", type=click.Choice(["bce", "listwise", "bce+listwise"]), default=None,
              help="bce: pointwise; listwise: softmax over each query's positive and "
              "negatives.")  # fmt: skip
@click.option("--pos-weight", type=float, default=None, help="BCE weight of positive pairs.")
@click.option("--seed", type=int, default=None)
@click.option("--device", default=None, help="auto (cuda > mps > cpu), cuda, mps, cpu.")
@click.option("--precision", default=None,
              help="auto, fp32, bf16, fp16 (autocast while training).")  # fmt: skip
@click.option("--eval-queries", type=int, default=0,
              help="Held-out queries per project (0: all).")  # fmt: skip
@click.option("--eval-max-length", type=int, multiple=True, default=[128],
              help="Tokens per pair when evaluating (as rerank.max_length); repeat to "
              "compare values.")  # fmt: skip
@click.option("--check-fp32", is_flag=True,
              help="Also evaluate in fp32, to compare with the default precision.")  # fmt: skip
@click.option("--threads", type=int, default=0,
              help="Torch threads (0: torch's default; 1 is fastest on a busy 2-core machine).")  # fmt: skip
@click.option("--eval-only", is_flag=True,
              help="Evaluate the model in --out on the held-out projects (no training); "
              "results are added to its TRAINING.json.")  # fmt: skip
@click.option("-v", "--verbose", is_flag=True)
def train_reranker_cmd(
    projects: tuple[str, ...], holdout: tuple[str, ...], out: Path | None,
    cache_dir: Path | None, eval_queries: int, eval_max_length: tuple[int, ...],
    check_fp32: bool, threads: int, eval_only: bool, verbose: bool, **options: object,
) -> None:  # fmt: skip
    """Train llmc's cross-encoder reranker on open-source projects from PyPI; print the
    held-out numbers as JSON. Defaults are the shipped recipe (docs/reranker.md)."""
    import json

    from lab.train.reranker import RerankerJob, TrainOptions, run, summary

    setup_logging(2 if verbose else 1, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    job = RerankerJob(
        TrainOptions(**{k: v for k, v in options.items() if v is not None}),  # type: ignore[arg-type]
        _specs(projects), _specs(holdout), out, cache_dir, eval_queries,
        tuple(eval_max_length), check_fp32, threads, eval_only,
        command=_train_command("reranker"),
    )  # fmt: skip
    click.echo(json.dumps(summary(job, run(job)), indent=2))


@train_group.command("embedder")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write (the shipped one is llmc/models/code_embedder).")  # fmt: skip
@click.option("--grid", default="1e-4:3", show_default=True,
              help="Candidates as lr:epochs, comma-separated; the best on validation wins.")  # fmt: skip
@click.option("--batch-size", type=int, default=128, show_default=True)
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Reuse mined data (pairs.jsonl, val-*.jsonl) instead of mining.")  # fmt: skip
@click.option("--mine-only", is_flag=True, help="Mine the data into OUT/data and stop.")
@click.option("-v", "--verbose", is_flag=True)
def train_embedder_cmd(
    out: Path, grid: str, batch_size: int, data: Path | None, mine_only: bool, verbose: bool
) -> None:
    """Fine-tune all-MiniLM-L6-v2 for code search on the train projects; keep it only if it
    beats the base on the validation projects. Prints the report as JSON."""
    import json
    import shlex

    from lab.train.embedder_job import EmbedderJob, run_job

    setup_logging(2 if verbose else 1, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    argv = sys.argv[sys.argv.index("embedder") + 1 :] if "embedder" in sys.argv else []
    command = shlex.join(["python", "-m", "lab", "train", "embedder", *argv])
    report = run_job(EmbedderJob(out, grid, batch_size, data, mine_only, command))
    click.echo(json.dumps({k: v for k, v in report.items() if k != "projects"}, indent=2))


@train_group.command("ranker")
@click.option("--projects", multiple=True, metavar="NAME",
              help="Train projects, repeatable or comma-separated (default: every pinned one).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Model directory to write (default: the shipped llmc/models/ranker).")  # fmt: skip
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where archives, corpora and features are kept (default: $XDG_CACHE_HOME/llmc/train).")  # fmt: skip
@click.option("--max-queries", type=int, default=60, help="Docstring queries per project.")
@click.option("--max-doc-queries", type=int, default=30,
              help="Docs-intent queries (titles, questions, leading sentences) per train project.")  # fmt: skip
@click.option("--max-mention-queries", type=int, default=10,
              help="Doc sentences naming a definition (→ it and the section) per train project.")  # fmt: skip
@click.option("--valid-doc-queries", type=int, default=20,
              help="Docs-intent queries (titles, questions) per validation project.")  # fmt: skip
@click.option("--doc-weight", type=float, default=0.5,
              help="Weight of a docs-intent query in training (a docstring query weighs 1).")  # fmt: skip
@click.option("--kinds", multiple=True, metavar="KIND",
              help="Query kinds to train on: code, doc-title, doc-question, doc-sentence, doc-mention, "
              "test-name, readme-sentence, guide-sentence, report, or all (default: all but "
              "doc-mention).")  # fmt: skip
@click.option("--seed", type=int, default=0)
@click.option("--threads", type=int, default=2, help="LightGBM threads.")
@click.option("--ablate", is_flag=True, help="Also fit without each feature group (validation).")
@click.option("-v", "--verbose", is_flag=True)
def train_ranker_cmd(
    projects: tuple[str, ...], out: Path | None, cache_dir: Path | None, max_queries: int,
    max_doc_queries: int, max_mention_queries: int, valid_doc_queries: int,
    doc_weight: float, kinds: tuple[str, ...], seed: int, threads: int, ablate: bool, verbose: bool,
) -> None:  # fmt: skip
    """Train the learned ranker (LightGBM lambdarank) on pools mined from the pinned train
    projects, choose it on the protocol's validation projects; print its report as JSON."""
    import json

    from lab.train.ranker import RankerJob, run

    setup_logging(2 if verbose else 1, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    job = RankerJob(
        cache_dir=cache_dir, max_queries=max_queries, max_doc_queries=max_doc_queries,
        max_mention_queries=max_mention_queries, valid_doc_queries=valid_doc_queries,
        doc_weight=doc_weight, kinds=_ranker_kinds(_specs(kinds)), seed=seed, threads=threads,
        ablate=ablate, projects=_specs(projects),
        command=_train_command("ranker"),
        progress=lambda line: click.echo(line, err=True),
    )  # fmt: skip
    if out is not None:
        job.out = out
    click.echo(json.dumps(run(job), indent=2))


@train_group.command("file-ranker")
@click.option("--projects", multiple=True, metavar="NAME",
              help="Train histories, repeatable or comma-separated (default: every one with a mirror).")  # fmt: skip
@click.option("--validation", multiple=True, metavar="NAME",
              help="Validation projects to report on (their commits and long reports).")  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Model directory to write (default: the shipped llmc/models/file_ranker).")  # fmt: skip
@click.option("--seed", type=int, default=0)
@click.option("-v", "--verbose", is_flag=True)
def train_file_ranker_cmd(
    projects: tuple[str, ...], validation: tuple[str, ...], out: Path | None, seed: int,
    verbose: bool,
) -> None:  # fmt: skip
    """Train the learned file ranker (file-level answers) on the train projects' git
    histories (mirrors under $LLMC_MIRRORS); print its report as JSON."""
    import json

    from lab.protocol.commits import mirrors_dir
    from lab.train.file_ranker import FileRankerJob, run
    from llmc import corpora
    from llmc.config import load_config
    from llmc.eval.projects import default_cache_dir

    setup_logging(2 if verbose else 1, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    eval_cache = default_cache_dir(load_config(None).eval.cache_dir)
    job = FileRankerJob(
        mirrors=mirrors_dir(), cache_dir=corpora.default_cache_dir("train"), eval_cache=eval_cache,
        projects=_specs(projects), validation=_specs(validation), seed=seed,
        command=_train_command("file-ranker"),
        progress=lambda line: click.echo(line, err=True),
    )  # fmt: skip
    if out is not None:
        job.out = out
    click.echo(json.dumps(run(job), indent=2))
