"""Searching the team store (a real PostgreSQL + pgvector) with the one search pipeline.

BM25 computed from a shard's posting lists scores exactly as the local tantivy index does;
a published repository answers with the same top 10 as its local index (spans and files);
two published repositories answer `llmc search --team` in one ranking, each result naming
its repository and commit; a warm searcher follows a newer publish (whose switch drops the
shard it was reading); a store that is down or names no repository is one clear line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from repo_fixtures import git, make_repo, user_config
from team_cli import run as _run

from llmc.cli import main

SOURCES = Path(__file__).resolve().parents[2]
CORPUS = [  # a real corpus: llmc's own search package and two of its docs
    *sorted(p.relative_to(SOURCES) for p in (SOURCES / "llmc" / "search").glob("*.py")),
    Path("docs/scale.md"),
    Path("docs/configuration.md"),
]
QUERIES = [
    "how does reciprocal rank fusion combine ranked lists",
    "Searcher answer",
    "latency budget for costly stages",
    "drop results whose file was deleted since the index run",
    "TunedOverlay",
    "which route does the router choose for a question about docs",
    "per-file cap on results",
    "embed the query once per model",
    "PostgreSQL pgvector replica",
    "HyDE hypothesis cache",
    "search/fusion.py",
    "ValueError: unknown group",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """An indexed copy of the corpus, with vectors (module-wide: indexing costs seconds)."""
    root = tmp_path_factory.mktemp("corpus") / "llmc-search"
    for rel in CORPUS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCES / rel, root / rel)
    make_repo(root, {})
    assert CliRunner().invoke(main, ["index", str(root), "-q"]).exit_code == 0
    return root


@pytest.fixture
def published(corpus, team_url) -> Path:
    user_config(f'[team]\nurl = "{team_url}"\n')
    _run(corpus, "team", "push", "--json")
    return corpus


def _team(team_url: str, ranking: str = "union"):
    from llmc.config import load_config
    from llmc.team.search import TeamSearch

    overrides = {"team.url": team_url, "team.ranking": ranking}
    cfg = load_config(Path.cwd(), overrides)
    return TeamSearch(cfg, lambda root: load_config(root, overrides))


def test_bm25_on_the_store_scores_as_tantivy(published, team_url, tmp_path):
    from llmc.paths import db_path, file_index_path
    from llmc.store.db import Store
    from llmc.store.file_lexical import FileIndex
    from llmc.store.lexical import LexicalIndex
    from llmc.team.lexical import ShardFiles, ShardLexical
    from llmc.team.reader import ShardReader

    store = Store(db_path(published), readonly=True)
    local = LexicalIndex(tmp_path / "lexical")  # built fresh: no deleted documents' stats
    local.rebuild(list(store.iter_spans()), 1)
    files = FileIndex(file_index_path(published), readonly=True)
    store.close()
    reader = ShardReader(psycopg.connect(team_url, autocommit=True), "llmc-search")
    team, team_files = ShardLexical(reader), ShardFiles(reader)
    try:
        assert team.num_docs() == local.num_docs()
        for query in QUERIES:
            for category in (None, "code", "doc"):
                want = local.search(query, 20, category=category)
                got = team.search(query, 20, category=category)
                assert [h.span_id for h in got] == [h.span_id for h in want], (query, category)
                np.testing.assert_allclose([h.score for h in got], [h.score for h in want],
                                           rtol=1e-5)  # fmt: skip
            boosted = {"symbol": 5.0, "text": 0.5}
            assert [h.span_id for h in team.search(query, 10, field_boosts=boosted)] == [
                h.span_id for h in local.search(query, 10, field_boosts=boosted)
            ]
            want_files, got_files = files.search(query, 10), team_files.search(query, 10)
            assert [m.path for m in got_files] == [m.path for m in want_files], query
            np.testing.assert_allclose([m.score for m in got_files],
                                       [m.score for m in want_files], rtol=1e-5)  # fmt: skip
            terms = local.query_terms(query)
            assert team.document_frequencies(terms) == local.document_frequencies(terms)
        message = "the index is not open"
        assert [h.span_id for h in team.containing_all(message, 5)] == [
            h.span_id for h in local.containing_all(message, 5)
        ]
        assert team.containing_all(message, 5), "the message is in sources.py"
    finally:
        reader.close()


def test_the_store_answers_with_the_local_top_10(published, team_url):
    from llmc.config import load_config
    from llmc.search import Searcher

    with Searcher(published, load_config(published)) as local, _team(team_url) as team:
        for query in QUERIES:
            want = local.answer(query, k=10).to_json()["results"]
            got = team.answer(query, ["llmc-search"], k=10)
            assert [(r["path"], r["start_line"], r["sources"]) for r in got["results"]] == [
                (r["path"], r["start_line"], r["sources"]) for r in want
            ], query
            want_files = local.answer(query, k=5, group="file").to_json()["files"]
            got_files = team.answer(query, ["llmc-search"], k=5, group="file")["files"]
            assert [f["path"] for f in got_files] == [f["path"] for f in want_files], query
        commit = git(published, "rev-parse", "HEAD").strip()
        assert {r["commit"] for r in got["results"]} == {commit}
        assert {r["repo"] for r in got["results"]} == {"llmc-search"}


SHOP = {
    "shop/discount.py": (
        "def apply_discount(total, code):\n"
        "    '''Take a discount code off the total.'''\n"
        "    return total * 0.9 if code else total\n"
    ),
    "docs/guide.md": "# Guide\n\nCarts hold items; discounts come off their total.\n",
}
BILLING = {
    "billing/invoice.py": (
        "def retry_invoice_webhook(event):\n"
        "    '''Retry the invoice webhook delivery with backoff.'''\n"
        "    return event\n"
    ),
}


def _two_repos(tmp_path: Path, team_url: str) -> tuple[Path, Path]:
    user_config(f'[team]\nurl = "{team_url}"\n')
    roots = make_repo(tmp_path / "shop", SHOP), make_repo(tmp_path / "billing", BILLING)
    for root in roots:
        assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
        _run(root, "team", "push", "--json")
    return roots


def test_llmc_search_team_ranks_two_repositories(tmp_path, team_url, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    shop, billing = _two_repos(tmp_path, team_url)
    out = _run(shop, "search", "--team", "retry the invoice webhook", "--json")
    top = out["results"][0]
    assert (top["repo"], top["path"], top["symbol"]) == (
        "billing", "billing/invoice.py", "retry_invoice_webhook",
    )  # fmt: skip
    assert top["commit"] == git(billing, "rev-parse", "HEAD").strip()
    assert {r["repo"] for r in out["repos"]} == {"shop", "billing"}
    out = _run(billing, "search", "--team", "apply a discount code", "--json")
    assert (out["results"][0]["repo"], out["results"][0]["path"]) == ("shop", "shop/discount.py")
    only = _run(shop, "search", "--team-repo", "shop", "retry the invoice webhook", "--json")
    assert {r["repo"] for r in only["results"]} <= {"shop"}
    files = _run(shop, "search", "--team", "--files", "invoice webhook", "--json")
    assert files["files"][0]["path"] == "billing/invoice.py"
    shown = _run(shop, "search", "--team", "retry the invoice webhook")
    assert "billing@" in shown and "billing/invoice.py:1-3" in shown
    missing = _run(shop, "search", "--team-repo", "nope", "x", ok=False)
    assert missing.count("\n") == 1 and "no repository 'nope' in the team store" in missing


def test_a_warm_searcher_follows_a_new_version(tmp_path, team_url):
    shop, _ = _two_repos(tmp_path, team_url)
    with _team(team_url) as team:
        before = team.answer("apply a discount code", ["shop"], k=3)
        (shop / "shop" / "discount.py").write_text(
            "def apply_coupon(total, coupon):\n    '''Take a coupon off the total.'''\n"
            "    return total - coupon\n"
        )
        assert CliRunner().invoke(main, ["index", str(shop), "-q", "--no-vectors"]).exit_code == 0
        pushed = _run(shop, "team", "push", "--json")  # switches, then drops the old shard
        after = team.answer("take a coupon off the total", ["shop"], k=3)
    assert before["results"][0]["symbol"] == "apply_discount"
    assert after["results"][0]["symbol"] == "apply_coupon"
    assert after["repos"][0]["generation"] == pushed["generation"] == 2


def test_a_store_that_cannot_answer_is_one_line(tmp_path, team_url, socket_dir, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "shop", SHOP)
    user_config(f'[team]\nurl = "{team_url}"\n')
    empty = _run(root, "search", "--team", "discount", ok=False)
    assert "holds no repository yet" in empty and empty.count("\n") == 1
    down = team_url.replace(str(socket_dir), str(tmp_path / "nowhere"))
    user_config(f'[team]\nurl = "{down}"\n')
    out = _run(root, "search", "--team", "discount", ok=False)
    assert "cannot reach the team store" in out and out.count("\n") == 1


def test_a_hostile_shard_name_in_the_store_is_refused(tmp_path, team_url, monkeypatch):
    """Whoever can publish can write ``llmc.repos``: a shard name there is never run as SQL."""
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    shop, _ = _two_repos(tmp_path, team_url)
    with psycopg.connect(team_url) as conn:
        conn.execute("CREATE TABLE canary (x int)")
        conn.execute(
            "UPDATE llmc.repos SET shard = 'pg_catalog.pg_class; DROP TABLE canary; --' "
            "WHERE name = 'shop'"
        )
    out = _run(shop, "search", "--team", "retry the invoice webhook", "--json")
    assert {r["repo"] for r in out["results"]} == {"billing"}
    assert any("shop" in w and "did not make" in w for w in out["warnings"]), out["warnings"]
    pushed = _run(shop, "team", "push", "--json", ok=False)
    assert "did not make" in pushed and pushed.count("\n") == 1
    with psycopg.connect(team_url) as conn:
        assert conn.execute("SELECT to_regclass('canary')").fetchone()[0] == "canary"


def test_a_span_holding_a_nul_is_published_and_found(tmp_path, team_url, monkeypatch):
    """PostgreSQL text holds no NUL; an indexed file may (astropy's FITS headers have one
    past the part of a file the binary sniff reads)."""
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    user_config(f'[team]\nurl = "{team_url}"\n')
    filler = "".join(f"# line {i} of the record format notes\n" for i in range(1500))
    code = (
        "def split_packed_record(raw):\n"
        '    """Split a packed record at its separator."""\n'
        "    return raw.split(SEP)\n\n\n" + filler + "SEP = 'a\x00b'\n"
    )
    root = make_repo(tmp_path / "nul", {"pack.py": code})
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    assert _run(root, "team", "push", "--json")["spans_sent"] >= 1
    found = _run(root, "search", "--team", "split a packed record", "--json")["results"]
    assert found[0]["symbol"] == "split_packed_record"
    with psycopg.connect(team_url) as conn:
        shard = conn.execute("SELECT shard FROM llmc.repos WHERE name = 'nul'").fetchone()[0]
        held = conn.execute(f"SELECT text FROM {shard}.spans WHERE text LIKE '%SEP = %'")
        texts = [t for (t,) in held.fetchall()]
    assert any("a\ufffdb" in t for t in texts), "the NUL became U+FFFD, the span is kept"


def test_each_repository_asked_for_a_share_gives_the_full_merge(tmp_path, team_url):
    """With ``ranking = "merge"``, a search of n repositories asks each for ceil(k / n) + 1
    results (the merge takes ranks level by level) and asks again for k when that left the
    answer short: the answer equals the merge of every repository's full top k."""
    from llmc.team.search import merged

    user_config(f'[team]\nurl = "{team_url}"\n')
    big = {
        f"billing/invoice_{i}.py": f"def send_invoice_{i}(invoice):\n"
        f"    '''Send invoice number {i} to the customer by mail.'''\n    return invoice\n"
        for i in range(12)
    }
    layout = {"big": big, "shop": SHOP, "billing": BILLING}
    for name, files in layout.items():
        root = make_repo(tmp_path / name, files)
        assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
        _run(root, "team", "push", "--json")
    with _team(team_url, "merge") as team:
        for query, k in (("send the invoice to the customer", 6), ("invoice", 4)):
            got = team.answer(query, list(layout), k=k)
            full = [(n, team.ask(n, {"query": query, "k": k}), None) for n in layout]
            want = merged(query, full, k)
            assert [(r["repo"], r["path"], r["start_line"]) for r in got["results"]] == [
                (r["repo"], r["path"], r["start_line"]) for r in want["results"]
            ], query
            assert len(got["results"]) == min(k, sum(len(a["results"]) for _, a, _ in full))


def test_a_repository_without_vectors_leaves_the_others_dense(published, tmp_path, team_url):
    """The query is embedded once for every repository; one that has no vectors (published
    from a `--no-vectors` index) must not hand its "no vector" to the others."""
    root = make_repo(tmp_path / "plain", SHOP)
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    _run(root, "team", "push", "--json")
    query = "how does reciprocal rank fusion combine ranked lists"
    with _team(team_url) as team:
        team.ask("plain", {"query": query, "k": 10})  # asked first: it has nothing to embed for
        found = team.ask("llmc-search", {"query": query, "k": 10})
    assert any(s.startswith("dense") for r in found["results"] for s in r["sources"])


SECOND = [  # a second repository: llmc's team package and a doc
    *sorted(p.relative_to(SOURCES) for p in (SOURCES / "llmc" / "team").glob("*.py")),
    Path("docs/daemon-api.md"),
]


def _copy(files: list[Path], root: Path, under: str = "") -> None:
    for rel in files:
        target = root / under / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCES / rel, target)


def test_two_repositories_are_scored_as_one_index(published, team_url, tmp_path):
    """Several repositories read as one index: BM25 with their statistics summed scores
    every span as a fresh tantivy index over one tree holding both (each repository a
    top-level directory) does, and whole-file BM25 likewise. Scored on symbols and text:
    a shard's paths (and the headers that begin with them) are its repository's own,
    without the directory, so those fields differ from such a tree's by design."""
    from llmc.paths import db_path, file_index_path
    from llmc.store.db import Store
    from llmc.store.file_lexical import FileIndex
    from llmc.store.lexical import FIELD_BOOSTS, LexicalIndex
    from llmc.team.lexical import ShardFiles, ShardLexical
    from llmc.team.reader import ShardReader

    second = tmp_path / "team-code"
    _copy(SECOND, second)
    make_repo(second, {})
    assert CliRunner().invoke(main, ["index", str(second), "-q", "--no-vectors"]).exit_code == 0
    _run(second, "team", "push", "--json")
    both = tmp_path / "both"
    _copy(CORPUS, both, "llmc-search")
    _copy(SECOND, both, "team-code")
    make_repo(both, {})
    assert CliRunner().invoke(main, ["index", str(both), "-q", "--no-vectors"]).exit_code == 0
    store = Store(db_path(both), readonly=True)
    spans = {s.id: (s.span.path, s.span.start_line, s.span.part) for s in store.iter_spans()}
    local = LexicalIndex(tmp_path / "lexical")
    local.rebuild(list(store.iter_spans()), 1)
    store.close()
    files = FileIndex(file_index_path(both), readonly=True)
    reader = ShardReader(psycopg.connect(team_url, autocommit=True), ["llmc-search", "team-code"])
    team, team_files = ShardLexical(reader), ShardFiles(reader)
    boosts = {f: b for f, b in FIELD_BOOSTS.items() if f in ("symbol", "text")}
    try:
        assert team.num_docs() == local.num_docs() == len(spans)
        shown = {i: (s.span.path, s.span.start_line, s.span.part)
                 for i, s in reader.spans_by_ids(list(team.stats().ids)).items()}  # fmt: skip
        assert sorted(shown.values()) == sorted(spans.values())
        for query in [*QUERIES, "publish a repository to the team store", "ShardReader"]:
            for category in (None, "code", "doc"):
                want = {spans[h.span_id]: h.score
                        for h in local.search(query, 5000, category, field_boosts=boosts)}  # fmt: skip
                got = {shown[h.span_id]: h.score
                       for h in team.search(query, 5000, category, field_boosts=boosts)}  # fmt: skip
                assert got.keys() == want.keys(), (query, category)
                np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=1e-5)
            want_files = {m.path: m.score for m in files.search(query, 500)}
            got_files = {m.path: m.score for m in team_files.search(query, 500)}
            assert got_files.keys() == want_files.keys(), query
            np.testing.assert_allclose([got_files[p] for p in want_files],
                                       list(want_files.values()), rtol=1e-5)  # fmt: skip
        assert any(p.startswith("team-code/") for p in got_files), "both repositories answer"
    finally:
        reader.close()


def test_a_team_search_ranks_the_repositories_in_one_pass(published, tmp_path, team_url):
    """The default ranking reads the searched repositories as one index: one searcher
    answers; each result has its repository's own path and commit; a repository without
    vectors leaves the others' dense retrieval on; one that is not in the store is one
    warning while the others answer. (A repository published without vectors competes
    with BM25 and exact matches only: publish every repository with vectors.)"""
    root = make_repo(tmp_path / "plain", SHOP)
    assert CliRunner().invoke(main, ["index", str(root), "-q", "--no-vectors"]).exit_code == 0
    _run(root, "team", "push", "--json")
    query = "how does reciprocal rank fusion combine ranked lists"
    with _team(team_url) as team:
        found = team.answer(query, ["plain", "llmc-search", "nope"], k=10)
        assert found["ranking"] == "union"
        assert list(team._searchers) == [("llmc-search", "plain")], "one searcher for both"
        top = found["results"][0]
        assert (top["repo"], top["path"]) == ("llmc-search", "llmc/search/fusion.py")
        assert top["commit"] == git(published, "rev-parse", "HEAD").strip()
        assert any(s.startswith("dense") for r in found["results"] for s in r["sources"])
        assert any("nope left out" in w for w in found["warnings"]), found["warnings"]
        counts = {r["repo"]: r.get("results") for r in found["repos"]}
        assert counts["llmc-search"] == len(found["results"]) and counts["plain"] == 0
    billing = make_repo(tmp_path / "billing", BILLING)  # with vectors, as llmc-search
    assert CliRunner().invoke(main, ["index", str(billing), "-q"]).exit_code == 0
    _run(billing, "team", "push", "--json")
    with _team(team_url) as team:
        found = team.answer("retry the invoice webhook", ["billing", "llmc-search"], k=5)
        top = found["results"][0]
        assert (top["repo"], top["path"], top["symbol"]) == (
            "billing", "billing/invoice.py", "retry_invoice_webhook",
        )  # fmt: skip
        assert top["commit"] == git(billing, "rev-parse", "HEAD").strip()
        files = team.answer("invoice webhook", ["billing", "llmc-search"], k=3, group="file")
        assert (files["files"][0]["repo"], files["files"][0]["path"]) == (
            "billing", "billing/invoice.py",
        )  # fmt: skip
