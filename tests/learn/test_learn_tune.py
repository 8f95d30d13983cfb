"""`llmc tune`: the weight search, the split, .llmc/tuned/ as search reads it, --reset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import user_config

from llmc.cli import main
from llmc.config import load_config
from llmc.eval.queries import EvalQuery, Judgment
from llmc.learn.intent_model import IntentModel
from llmc.learn.sets import QuerySet
from llmc.learn.tune import better, search_weights, sign_p, split_queries
from llmc.learn.tuned import TUNED_FILE, tuned_path, write_tuned
from llmc.search import Searcher


def _j(path: str, symbol: str = "", grade: int = 3) -> dict:
    return {"path": path, "grade": grade, **({"symbol": symbol} if symbol else {})}


QUERIES = [
    ("save_session", "code", [_j("app/store.py", "SessionStore.save_session")]),
    ("open the session store", "code", [_j("app/store.py", "open_store")]),
    ("startServer port", "code", [_j("app/server.js", "startServer")]),
    ("Router addRoute", "code", [_j("app/server.js", "Router")]),
    ("handle a path in the Go server", "code", [_j("cmd/main.go", "Server.Handle")]),
    ("compute invoice total with tax", "code",
     [_j("app/billing.py", "compute_invoice_total"), _j("docs/billing.md", "Billing > Taxes", 1)]),
    ("issue a refund", "code",
     [_j("app/billing.py", "issue_refund"), _j("docs/billing.md", "Billing > Refund policy", 2)]),
    ("test for invoice total", "code", [_j("tests/test_billing.py")]),
    ("print hello from main", "code", [_j("cmd/main.go", "main")]),
    ("how do I install the app", "docs", [_j("docs/guide.md", "Guide > Installation")]),
    ("where are sessions configured", "docs",
     [_j("docs/guide.md", "Guide > Configuration > Sessions"), _j("app/store.py", "", 1)]),
    ("refund policy", "docs", [_j("docs/billing.md", "Billing > Refund policy")]),
    ("how long do customers have to ask for their money back", "docs",
     [_j("docs/billing.md", "Billing > Refund policy")]),
    ("what does the sample app do", "docs", [_j("README.txt"), _j("docs/guide.md", "Guide", 2)]),
    ("how are taxes added to invoices", "mixed",
     [_j("docs/billing.md", "Billing > Taxes"), _j("app/billing.py", "compute_invoice_total", 2)]),
    ("where are user sessions stored", "mixed",
     [_j("docs/guide.md", "Guide > Configuration > Sessions"), _j("app/store.py", "SessionStore", 2)]),
]  # fmt: skip


def write_queries(path: Path) -> Path:
    lines = [json.dumps({"query": q, "intent": i, "relevant": r}) for q, i, r in QUERIES]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_search_weights_by_hand():
    # eight training queries; their scores under each setting of (a, b)
    table = {
        (1, 1): [0.5] * 8,
        (2, 1): [0.9] * 4 + [0.4] * 4,  # +0.15 on average, but 4 wins, 4 losses: chance
        (3, 1): [0.7] * 6 + [0.5] * 2,  # +0.15, 6 wins, no loss: sign test p 1/64
        (4, 1): [0.6] * 8,  # +0.1, 8 wins: p 1/256, a move, but not the best one
        (3, 2): [0.8] * 5 + [0.7] * 3,  # +0.1125 over (3, 1), 5 wins, 0 losses: p 1/32
        (1, 2): [0.5] * 8,
        (2, 2): [0.5] * 8,
        (4, 2): [0.5] * 8,
        (3, 3): [1.0, 0.7, 0.7, 0.7, 0.7, 0.7, 0.5, 0.5],  # +0.0375, 1 win: not a move
    }
    calls = []

    def score(p):
        calls.append(p)
        return table.get((p["a"], p["b"]), [0.0] * 8)

    best, mean, evals = search_weights(score, {"a": 1, "b": 1}, {"a": (1, 2, 3, 4), "b": (1, 2, 3)})
    assert best == {"a": 3, "b": 2}
    assert mean == pytest.approx(0.7625)
    assert evals == len(calls) == len({tuple(sorted(c.items())) for c in calls})  # memoised
    assert sign_p(6, 0) == pytest.approx(1 / 64) and sign_p(4, 4) == pytest.approx(163 / 256)
    assert better([0.6] * 8, [0.5] * 8) and not better([0.9] * 4 + [0.4] * 4, [0.5] * 8)
    # few queries can never clear the test: 4 wins of 4 is p 1/16
    assert not better([0.9] * 4, [0.5] * 4)


def _q(text: str, intent: str = "code", qid: str = "") -> EvalQuery:
    return EvalQuery(text, intent, (Judgment("a.py", 3),), id=qid)


def test_split_holds_out_newest_commits_and_stratifies_the_rest():
    qs = QuerySet()
    qs.add([_q(f"commit {i}", qid=f"git:{i}") for i in range(10)], "git",
           {f"git:{i}": 1000 + i for i in range(10)})  # fmt: skip
    qs.add([_q(f"code {i}") for i in range(6)] + [_q(f"doc {i}", "docs") for i in range(4)], "x")
    split = split_queries(qs, 0.3, seed=1)
    test = {q.query for q in split.test}
    assert {"commit 7", "commit 8", "commit 9"} <= test  # the newest 30% of the history
    assert not {f"commit {i}" for i in range(7)} & test
    assert sum(q.query.startswith("code") for q in split.test) == 2  # round(6 * 0.3)
    assert sum(q.query.startswith("doc") for q in split.test) == 1  # round(4 * 0.3)
    assert len(split.train) + len(split.test) == 20
    assert split_queries(qs, 0.3, seed=1) == split  # seeded


FUSION = {"search.ranker": "fusion"}  # tuned weights are fusion's (the learned ranker has none)


def _decision(root: Path, query: str = "where are user sessions stored"):
    with Searcher(root, load_config(root, FUSION)) as s:
        return s.search(query, k=5).route


def test_search_uses_tuned_dir_until_reset(learn_repo, learn_config):
    directory = tuned_path(learn_repo)
    docs_always = IntentModel(classes=("code", "docs", "mixed"), weights={},
                              intercept=(0.0, 6.0, 0.0), gate=0.6, allowed=("docs",))  # fmt: skip
    write_tuned(
        directory,
        {"params": {"search.bm25_weight": 2.5, "search.k": 3, "search.test_weight": "x"}},
        docs_always,
    )
    route = _decision(learn_repo)
    assert route.list_weights["bm25"] == pytest.approx(2.5)  # a tuned weight
    assert route.source == "learned" and route.intent == "docs"
    assert any("learned intent model" in r for r in route.reasons)
    with Searcher(learn_repo, load_config(learn_repo)) as s:
        assert s.cfg.search.k == 10  # not a tunable key: ignored
        assert s.cfg.search.test_weight == 0.5  # wrong type: ignored
        assert s.cfg.sources["search.bm25_weight"].startswith("tuned")
        # a config file value always wins over a tuned one
        (learn_repo / "llmc.toml").write_text("[search]\nbm25_weight = 1.5\n")
    assert _decision(learn_repo).list_weights["bm25"] == pytest.approx(1.5)
    # learn.use_tuned = false: untuned, the heuristic router decides
    (learn_repo / "llmc.toml").unlink()
    user_config(learn_config.replace("[learn]\n", "[learn]\nuse_tuned = false\n"))
    assert _decision(learn_repo).source == "router"
    user_config(learn_config)
    # a Searcher that is already open picks up a reset at its next query
    with Searcher(learn_repo, load_config(learn_repo, FUSION)) as s:
        assert s.search("refund", k=3).route.source == "learned"
        result = CliRunner().invoke(main, ["tune", "--reset", "--repo", str(learn_repo)])
        assert result.exit_code == 0, result.output
        assert "search runs untuned" in result.output
        assert not directory.exists()
        after = s.search("refund", k=3).route
        assert after.source == "router" and after.list_weights["bm25"] == 1.0
    result = CliRunner().invoke(main, ["tune", "--reset", "--repo", str(learn_repo)])
    assert "nothing to reset" in result.output


def test_broken_tuned_file_means_untuned(learn_repo):
    directory = tuned_path(learn_repo)
    directory.mkdir(parents=True)
    (directory / TUNED_FILE).write_text("{not json")
    assert _decision(learn_repo).source == "router"


def test_tune_end_to_end(learn_repo):
    runner = CliRunner()
    queries = write_queries(learn_repo / "queries.jsonl")
    base = ["tune", "--queries", str(queries), "--no-judgments", "--repo", str(learn_repo)]
    result = runner.invoke(main, [*base, "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "16 queries (10 training, 6 held out)" in result.output and "roughly" in result.output
    assert not tuned_path(learn_repo).exists()
    result = runner.invoke(main, [*base, "--json", "--force"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["train_queries"], report["heldout_queries"]) == (10, 6)
    assert set(report["heldout"]) == {"untuned", "tuned weights", "tuned"}
    assert report["evaluations"] >= 1 + len(report["params"]["before"])
    for c in report["comparisons"]:
        assert 0.0 <= c["p_ndcg"] <= 1.0 and c["n"] == 6
    assert "heuristic_acc" in report["intent"]
    train = report["train"]
    assert train["tuned weights"]["ndcg@10"] >= train["untuned"]["ndcg@10"]
    changed = {
        k: v for k, v in report["params"]["after"].items() if report["params"]["before"][k] != v
    }
    assert report["saved"] == bool(changed or report["intent"].get("kept")), report
    if report["saved"]:
        data = json.loads((tuned_path(learn_repo) / TUNED_FILE).read_text())
        assert data["params"] == changed
        assert data["heldout"]["tuned"] == report["heldout"]["tuned"]
        # search now runs with the tuned values
        with Searcher(learn_repo, load_config(learn_repo)) as s:
            for key, value in changed.items():
                section, _, name = key.partition(".")
                assert getattr(getattr(s.cfg, section), name) == value
    # the human report
    result = runner.invoke(main, [*base, "--no-save", "--no-intent", "--no-index"])
    assert result.exit_code == 0, result.output
    assert "held-out queries" in result.output and "untuned" in result.output
    assert "not saved" in result.output


def test_tune_needs_enough_queries(learn_repo):
    result = CliRunner().invoke(main, ["tune", "--repo", str(learn_repo)])
    assert result.exit_code == 1
    assert "0 judged queries; tuning needs at least 8" in result.output


def test_finetune_reranker_short_real_run(learn_repo, tmp_path):
    from llmc.learn.finetune import finetune_reranker, repo_groups
    from llmc.models.reranker import CrossEncoderReranker

    train = [EvalQuery("issue a refund", "code", (Judgment("app/billing.py", 3, 10, 12),))]
    groups, counts = repo_groups(learn_repo, load_config(learn_repo), train)
    assert counts["judged"] == 1 and len(groups) == counts["judged"] + counts["docstring/heading"]
    query, texts = next(g for g in groups if g[0] == "issue a refund")
    assert texts[0].startswith("app/billing.py\n") and "issue_refund" in texts[0]
    assert len(texts) >= 2  # the positive, then the top results that are not it
    stats = finetune_reranker(groups, tmp_path / "rr", steps=3, batch_size=4, device="cpu")
    assert stats["steps"] == 3 and stats["device"] == "cpu"
    reranker = CrossEncoderReranker(str(tmp_path / "rr"), device="cpu")
    assert len(reranker.score(query, list(texts))) == len(texts)
