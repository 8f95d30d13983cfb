"""File-level answers: the file score with hand numbers, grouping, and `llmc search --files`
end to end through CliRunner on the indexed fixture repo."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.search.files import FileHit, file_score, group_by_file


def span(path: str, start: int, score: float) -> SimpleNamespace:
    return SimpleNamespace(path=path, start_line=start, end_line=start + 2, score=score,
                           symbol="f", kind="function", snippet="def f(): ...")  # fmt: skip


def test_file_score_by_hand() -> None:
    assert file_score([3, 1, 7], "max") == 1.0
    assert file_score([4], "max") == 0.25
    assert file_score([5, 2, 4, 10], "max+0.25") == pytest.approx(1 / 2 + 0.25 * (1 / 4 + 1 / 5))
    assert file_score([1, 3], "rrf10") == pytest.approx(1 / 11 + 1 / 13)
    assert file_score([1, 3], "rrf60") == pytest.approx(1 / 61 + 1 / 63)
    assert file_score([], "max") == 0.0
    with pytest.raises(ValueError, match="unknown file score"):
        file_score([1], "mean")


def test_group_by_file_keeps_each_file_once_with_its_best_spans() -> None:
    spans = [span("a.py", 10, 0.9), span("a.py", 30, 0.8), span("b.py", 1, 0.7),
             span("a.py", 50, 0.6), span("a.py", 70, 0.5), span("c.py", 5, 0.4)]  # fmt: skip
    hits = group_by_file(spans, 2)
    assert [h.path for h in hits] == ["a.py", "b.py"]
    a = hits[0]
    assert a.matched == 4 and a.score == 1.0
    assert [s.start_line for s in a.spans] == [10, 30, 50]  # the best three, best first
    assert hits[1].score == pytest.approx(1 / 3)
    assert [s.start_line for s in group_by_file(spans, 1, spans_per_file=1)[0].spans] == [10]


def test_rrf_file_score_lets_spread_evidence_climb() -> None:
    # b.py's best span is second, but it holds ranks 2, 3, 4: sum 1/12+1/13+1/14 > 1/11
    spans = [span("a.py", 1, 0.9), span("b.py", 1, 0.8), span("b.py", 9, 0.7),
             span("b.py", 20, 0.6)]  # fmt: skip
    assert [h.path for h in group_by_file(spans, 2, method="max")] == ["a.py", "b.py"]
    assert [h.path for h in group_by_file(spans, 2, method="rrf10")] == ["b.py", "a.py"]


def test_a_file_answer_replaces_results_with_files() -> None:
    from llmc.daemon.answers import search_response
    from llmc.search.answer import Answer

    route = {"intent": "code", "p_code": 1.0, "confidence": 1.0}
    response = search_response({"query": "q", "route": route, "warnings": [],
                                "results": [span("x.md", 1, 0.5).__dict__]})  # fmt: skip
    hit = FileHit("x.md", 1.0, 1, response.results)
    out = Answer(response, group="file", files=(hit,)).to_json()
    assert "results" not in out and out["group"] == "file" and out["query"] == "q"
    assert out["files"] == [hit.to_json()] and out["file_ranker"] == "fusion"
    assert out["files"][0]["spans"][0] == {"start_line": 1, "end_line": 3, "symbol": "f",
        "kind": "function", "score": 0.5, "snippet": "def f(): ..."}  # fmt: skip
    assert "results" in Answer(response).to_json()


def test_cli_files_answers_a_file_once_with_its_spans(runner: CliRunner, indexed_repo) -> None:
    args = ["search", "--json", "--files", "--repo", str(indexed_repo), "-k", "3"]
    result = runner.invoke(main, [*args, "ShoppingCart total_price apply_discount"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip())
    assert out["group"] == "file" and "results" not in out
    paths = [f["path"] for f in out["files"]]
    assert paths[0] == "src/shop/cart.py"
    assert len(paths) == len(set(paths)) <= 3
    cart = out["files"][0]
    assert 1 <= len(cart["spans"]) <= 3 and cart["matched_spans"] >= len(cart["spans"])
    assert all(s["start_line"] <= s["end_line"] for s in cart["spans"])
    assert any(s["symbol"] in ("ShoppingCart", "total_price", "apply_discount")
               for s in cart["spans"])  # fmt: skip


def test_cli_files_human_output(runner: CliRunner, indexed_repo) -> None:
    args = ["search", "--files", "--repo", str(indexed_repo), "-k", "2", "apply_discount"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.lstrip().startswith("1.") and "src/shop/cart.py" in first
    assert "--files" in runner.invoke(main, ["search", "--help"]).stdout


def test_cli_files_batch_mode(runner: CliRunner, indexed_repo) -> None:
    args = ["search", "--json", "--files", "--repo", str(indexed_repo), "-k", "2", "-"]
    result = runner.invoke(main, args, input="apply_discount\nfetchOrders\n")
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in result.stdout.strip().split("\n")]
    assert [a["files"][0]["path"] for a in answers] == ["src/shop/cart.py", "web/orders.js"]


def test_whole_file_list_fuses_in_and_brings_files_without_spans() -> None:
    spans = [span("a.py", 1, 0.9), span("b.py", 1, 0.8), span("c.py", 1, 0.7)]
    assert group_by_file(spans, 3, whole=["c.py"], whole_weight=0.0) == group_by_file(spans, 3)
    hits = group_by_file(spans, 4, whole=["c.py", "kw.py", "a.py"], whole_weight=0.25)
    # a.py 1/11 + 0.25/13; c.py 1/13 + 0.25/11 climbs over b.py's 1/12; kw.py has no span
    assert [h.path for h in hits] == ["a.py", "c.py", "b.py", "kw.py"]
    assert hits[1].score == pytest.approx(1 / 13 + 0.25 / 11)
    assert (
        hits[3].matched == 0 and hits[3].spans == () and hits[3].score == pytest.approx(0.25 / 12)
    )
    # a weight that cannot outweigh one rank of the span list keeps its order
    assert [h.path for h in group_by_file(spans, 3, whole=["c.py"], whole_weight=0.001)] == [
        "a.py", "b.py", "c.py"]  # fmt: skip


def test_cli_files_finds_a_file_whose_terms_are_spread_over_it(runner: CliRunner, tmp_path) -> None:
    """A keyword table matches a report as a whole file, though none of its spans ranks
    for it; the file-level answer brings it, and `file_bm25_weight = 0` does not."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    table = "".join(f"    'KW{i}': Keyword,\n" for i in range(400))
    (repo / "pkg" / "keywords.py").write_text(
        f"KEYWORDS = {{\n{table}    'ROW_FORMAT': Keyword,\n}}\nPUNCTUATION = {{}}\n"
    )
    for i in range(12):
        (repo / "pkg" / f"statement{i}.py").write_text(
            f"def recognize_statement_{i}(sql):\n"
            f"    '''Recognize a keyword in statement {i} of the SQL.'''\n"
            f"    return [t for t in sql.split() if t.isupper()]\n"
        )
    assert runner.invoke(main, ["index", "--no-vectors", str(repo)]).exit_code == 0
    assert (repo / ".llmc" / "files" / "hashes.json").is_file()
    query = "Recognize ROW_FORMAT as a keyword"
    args = ["search", "--json", "--files", "--repo", str(repo), "-k", "20", query]
    out = json.loads(runner.invoke(main, args).stdout.strip())
    paths = [f["path"] for f in out["files"]]
    assert out["whole_file_weight"] > 0
    (repo / "llmc.toml").write_text("[search]\nfile_bm25_weight = 0.0\n")
    flat = json.loads(runner.invoke(main, args).stdout.strip())
    assert flat["whole_file_weight"] == 0.0
    spans_only = [f["path"] for f in flat["files"]]
    kw = "pkg/keywords.py"
    assert kw in paths[:10], paths
    assert paths.index(kw) < (spans_only.index(kw) if kw in spans_only else len(spans_only))
