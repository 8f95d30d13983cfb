"""Searchable first, vectors after: the backfill of embeddings (llmc/index/backfill.py).

`llmc index` commits spans, BM25, exact symbols and the graph before a single vector exists,
then embeds in chunks, each committed on its own. A SIGKILL in the middle of that loses
nothing committed, the index answers meanwhile (BM25 over all spans, dense over the
embedded ones, saying how many), and the next run embeds only what is missing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import make_repo
from test_indexer import run_index
from waiting import wait_for

from llmc.cli import main
from llmc.config import load_config
from llmc.index.backfill import CHUNK_ENV, Coverage
from llmc.index.indexer import Indexer
from llmc.paths import db_path, lexical_path
from llmc.search.pipeline import Searcher
from llmc.store.db import VEC_TABLES, Store, embed_hash
from llmc.store.lexical import LexicalIndex

SYLLABLES = ("ka", "lo", "mi", "ten", "sur", "vo", "dra", "pel", "qui", "zan")
KILL_DEADLINE_S = 600.0  # only a hang gets there


def word(n: int) -> str:
    out = ""
    for _ in range(3):
        n, r = divmod(n, len(SYLLABLES))
        out += SYLLABLES[r]
    return out


def repo_files(n_files: int = 40, per_file: int = 6) -> dict[str, str]:
    """Distinct functions (every embedded text differs) and a few doc pages."""
    files = {}
    for i in range(n_files):
        body = [f'"""Module {i}: {word(i)} helpers."""\n\n']
        for j in range(per_file):
            w = word(i * per_file + j + 7)
            body.append(
                f"def {w}_{i}_{j}(items, limit={j}):\n"
                f'    """Keep the {w} items under the limit ({i}, {j})."""\n'
                f"    return [x for x in items if x < limit * {i + 1}]\n\n\n"
            )
        files[f"pkg{i % 4}/mod_{i}.py"] = "".join(body)
    for i in range(4):
        files[f"docs/page_{i}.md"] = f"# Page {i}\n\n{word(900 + i)} guide number {i}.\n"
    files["billing/invoice.py"] = "def parse_invoice(text):\n    return text.split()\n"
    return files


def counts(root: Path) -> Coverage:
    store = Store(db_path(root), readonly=True)
    try:
        return Coverage.of(store.vector_counts())
    finally:
        store.close()


def embedded_now(root: Path) -> int:
    """Spans with a vector, or 0 while the database is not there or mid-creation."""
    try:
        return counts(root).embedded
    except Exception:  # noqa: BLE001 - a reader racing the writer: ask again
        return 0


def vectors_of(root: Path) -> dict[int, bytes]:
    store = Store(db_path(root), readonly=True)
    try:
        out: dict[int, bytes] = {}
        for table in VEC_TABLES.values():
            rows = store.conn.execute(f"SELECT span_id, embedding FROM {table}")
            out.update((int(i), bytes(b)) for i, b in rows)
        return out
    finally:
        store.close()


def assert_partial_index_consistent(root: Path) -> None:
    """Like ``assert_index_consistent``, except that some spans may lack a vector: every
    vector belongs to a live span of its table's category and equals that span's entry in
    the embedding cache (both were written in one transaction); the lexical index and the
    graph hold every span at the store's generation."""
    from llmc.graph.query import load_graph

    store = Store(db_path(root), readonly=True)
    try:
        spans = {s.id: s.span for s in store.iter_spans()}
        for category, table in VEC_TABLES.items():
            model = store.vector_space(category).model_id
            for span_id, blob in store.conn.execute(f"SELECT span_id, embedding FROM {table}"):
                span = spans[span_id]
                assert span.category == category
                cached = store.cached_vectors(model, [embed_hash(span)])
                assert bytes(cached[embed_hash(span)]) == bytes(blob), span.path
        lexical = LexicalIndex(lexical_path(root), readonly=True)
        assert lexical.generation == store.generation
        assert lexical.num_docs() == len(spans)
        assert load_graph(root).generation == store.generation
    finally:
        store.close()


def search_json(root: Path, query: str, *args: str) -> dict:
    result = CliRunner().invoke(
        main, ["search", "--json", "--no-hyde", "--repo", str(root), *args, query]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def status_json(root: Path) -> dict:
    result = CliRunner().invoke(main, ["status", "--json", "--repo", str(root)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_coverage_line_with_hand_numbers():
    assert Coverage(1203, 3540).line() == "dense: 34% of spans embedded (1,203 of 3,540)"
    assert Coverage(0, 10).percent == 0 and Coverage(10, 10).percent == 100
    assert Coverage(1, 1000).percent == 1  # some, however few, is never "0%"
    assert Coverage(999, 1000).percent == 99  # not all is never "100%"
    assert Coverage(0, 0).complete and Coverage(0, 0).percent == 100
    both = Coverage.of({"code": (3, 4), "doc": (0, 2)})
    assert (both.embedded, both.total, both.missing) == (3, 6, 3)


@pytest.mark.slow
def test_sigkill_during_backfill_loses_nothing_and_a_rerun_embeds_only_the_rest(tmp_path):
    root = make_repo(tmp_path / "r", repo_files())
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        CHUNK_ENV: "8",  # many small commits: the kill lands between two of them
    }
    args = [sys.executable, "-m", "llmc", "index", str(root), "--quiet"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: embedded_now(root) > 0, KILL_DEADLINE_S, "the first vectors")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    killed = counts(root)
    assert 0 < killed.embedded < killed.total, "the kill must land mid-backfill"
    assert_partial_index_consistent(root)
    before = vectors_of(root)

    # searchable: BM25 and exact over every span, dense over the embedded ones, and it says so
    line = f"dense: {killed.percent}% of spans embedded ({killed.embedded:,} of {killed.total:,})"
    answer = search_json(root, "parse_invoice")
    assert answer["results"] and answer["results"][0]["path"] == "billing/invoice.py"
    assert any(w.startswith(line) for w in answer["warnings"]), answer["warnings"]
    st = status_json(root)
    assert st["vectors"]["embedded"] == killed.embedded and st["dense"] == line
    assert not st["vectors"]["complete"] and st["files"] == len(repo_files())

    # the rerun parses nothing and embeds exactly the missing spans (all texts differ)
    rerun = run_index(root)
    assert rerun["files_indexed"] == 0 and rerun["backfill"] == "done"
    assert rerun["embedded"] == killed.missing
    assert rerun["vectors"]["complete"] and rerun["vectors"]["total"] == killed.total
    after = vectors_of(root)
    assert {i: after[i] for i in before} == before  # what was committed stayed as it was
    assert len(after) == killed.total
    assert not search_json(root, "parse_invoice")["warnings"]


def test_no_vectors_is_searchable_and_the_next_run_embeds(tmp_path):
    root = make_repo(tmp_path / "r", repo_files(n_files=6, per_file=3))
    deferred = run_index(root, "--no-vectors")
    assert deferred["backfill"] == "deferred" and deferred["embedded"] == 0
    assert deferred["vectors"]["embedded"] == 0
    assert deferred["vectors"]["total"] == deferred["spans_total"] > 0
    assert 0 <= deferred["searchable_seconds"] <= deferred["seconds"]

    # 0%: no crash, no empty answer where BM25 finds the words; exact symbols still pin
    answer = search_json(root, "parse_invoice")
    assert answer["results"][0]["path"] == "billing/invoice.py"
    zero = f"dense: 0% of spans embedded (0 of {deferred['spans_total']:,})"
    assert any(w.startswith(zero) for w in answer["warnings"]), answer["warnings"]
    words = search_json(root, "keep the items under the limit")
    dense = lambda r: any(s.split(".")[0] == "dense" for s in r["sources"])  # noqa: E731
    assert words["results"] and not any(dense(r) for r in words["results"])
    explained = search_json(root, "items limit", "--explain")
    notes = [s["note"] for s in explained["explain"]["stages"] if s["stage"] == "coverage"]
    assert notes == [zero]
    human = CliRunner().invoke(main, ["status", "--repo", str(root)])
    assert "dense: 0% of spans embedded" in human.output

    done = run_index(root)
    assert done["files_indexed"] == 0 and done["embedded"] == deferred["spans_total"]
    assert done["vectors"]["complete"]
    answer = search_json(root, "keep the items under the limit")
    assert not answer["warnings"]
    assert any(dense(r) for r in answer["results"])  # dense, or dense.code / dense.doc
    assert status_json(root)["dense"].startswith("dense: 100% of spans embedded")


def test_a_stopped_backfill_searches_dense_over_the_embedded_spans_only(tmp_path):
    """The daemon's way: ``Indexer.backfill(stop)`` commits chunk by chunk and stops when
    asked; a search meanwhile ranks dense hits among the embedded spans alone."""
    root = make_repo(tmp_path / "r", repo_files(n_files=8, per_file=3))
    run_index(root, "--no-vectors")
    cfg = load_config(root)
    with Searcher(root, cfg) as searcher:  # opened at 0%, kept across the backfill
        assert searcher.search("items under the limit").results
        indexer = Indexer(root, cfg)
        indexer.chunk_spans = 5
        chunks = iter(range(3))
        report = indexer.backfill(stop=lambda: next(chunks, None) is None)
        assert report.backfill == "stopped" and report.vectors is not None
        assert report.vectors.embedded == report.embedded == 15
        embedded = set(vectors_of(root))
        response = searcher.search("items under the limit", explain=True)
        assert response.explain is not None
        dense = [n for n in response.explain.lists if n.startswith("dense")]
        assert dense, response.explain.lists.keys()
        for name in dense:
            assert {h.span_id for h in response.explain.lists[name]} <= embedded
        line = report.vectors.line()
        assert any(w.startswith(line) for w in response.warnings), response.warnings
    resumed = run_index(root)
    assert resumed["embedded"] == report.vectors.missing and resumed["vectors"]["complete"]
