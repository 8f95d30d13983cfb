"""The runner, variants and report with a scripted searcher (no index, no models)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from llmc.config import Config
from llmc.errors import EvalError
from llmc.eval import tables as fmt
from llmc.eval.queries import EvalQuery, Judgment
from llmc.eval.runner import (
    VARIANTS,
    available_variants,
    register_variant,
    run_eval,
    variant_config,
)


@dataclass(frozen=True)
class Res:
    path: str
    start_line: int
    end_line: int
    lang: str = "python"


@dataclass(frozen=True)
class Resp:
    results: tuple[Res, ...]


class Scripted:
    """Finds the answer first with dense on, third without; always lists the query file."""

    def __init__(self, root: Path, cfg: Config):
        self.cfg = cfg
        self.calls: list[str] = []
        self.closed = False

    def search(self, query: str, k: int | None = None) -> Resp:
        self.calls.append(query)
        answer = Res(f"{query}.py", 1, 5)
        noise = [Res("queries.jsonl", 1, 1, "text"), Res("n1.py", 1, 2), Res("n2.py", 1, 2)]
        ranked = [answer, *noise] if self.cfg.search.dense else [*noise, answer]
        return Resp(tuple(ranked[:k]))

    def close(self) -> None:
        self.closed = True


QUERIES = [
    EvalQuery(f"q{i}", "code" if i % 2 else "docs", (Judgment(f"q{i}.py", 3, 1, 10),))
    for i in range(12)
]


def run(tmp_path, variants, **kw):
    made: list[Scripted] = []

    def factory(root, cfg):
        made.append(Scripted(root, cfg))
        return made[-1]

    rep = run_eval(QUERIES, tmp_path, Config(), variants, index=False, searcher_factory=factory,
                   **kw)  # fmt: skip
    return rep, made


def test_variants_change_a_copy():
    cfg = Config()
    bm25 = variant_config(cfg, "bm25-only")
    assert (bm25.search.bm25, bm25.search.dense, bm25.search.exact_symbol) == (True, False, False)
    assert bm25.sources["search.dense"] == "eval variant"
    dense = variant_config(cfg, "dense-only")
    assert (dense.search.bm25, dense.search.dense) == (False, True)
    assert variant_config(cfg, "no-routing").search.routing is False
    assert (cfg.search.dense, cfg.search.bm25, cfg.search.routing) == (True, True, True)
    with pytest.raises(EvalError, match="unknown variant"):
        variant_config(cfg, "no-such")


def test_variants_for_missing_stages_are_skipped(tmp_path):
    register_variant("no-teleport", ("search.teleport",))(lambda c: c)
    try:
        assert "no-teleport" not in available_variants(Config())
        assert {"default", "bm25-only", "dense-only", "no-routing"} <= set(
            available_variants(Config())
        )
        rep, _ = run(tmp_path, ["default", "no-teleport"])
        assert rep.skipped_variants == ["no-teleport"]
        assert list(rep.variants) == ["default"]
    finally:
        del VARIANTS["no-teleport"]


def test_run_scores_compares_and_ignores_the_query_file(tmp_path):
    rep, made = run(tmp_path, ["default", "bm25-only"], ignore_paths=["queries.jsonl"])
    assert all(s.closed for s in made)
    # one warm-up query per variant, then every query once
    assert [len(s.calls) for s in made] == [13, 13]
    default, bm25 = rep.variants["default"], rep.variants["bm25-only"]
    assert default.summary["all"].mrr == 1.0
    # without dense: n1, n2, answer (the query file is dropped) -> rank 3
    assert bm25.summary["all"].mrr == pytest.approx(1 / 3)
    assert all("queries.jsonl" not in [r.path for r in q.results] for q in bm25.runs)
    assert default.summary["code"].code_3 == 1.0 and default.summary["docs"].code_3 is None
    (c,) = rep.comparisons
    assert (c.a, c.b, c.n) == ("default", "bm25-only", 12)
    # every pair favours default: exact Wilcoxon p = 2 / 2^12; hit@5 ties everywhere
    assert c.wilcoxon_rr.p_value == pytest.approx(2 / 2**12)
    assert c.mcnemar_hit5.p_value == 1.0
    data = rep.to_json()
    assert data["variants"]["default"]["all"]["mrr@10"] == 1.0
    assert len(data["per_query"]["bm25-only"]) == 12
    assert data["comparisons"][0]["wilcoxon_rr"]["p_value"] < 0.001


def test_compare_pair_adds_its_variants(tmp_path):
    rep, _ = run(tmp_path, ["default"], compare_pairs=[("dense-only", "bm25-only")])
    assert list(rep.variants) == ["default", "dense-only", "bm25-only"]
    assert [(c.a, c.b) for c in rep.comparisons] == [("dense-only", "bm25-only")]
    assert fmt.comparison_rows(rep)[0][:3] == ("dense-only", "bm25-only", "12")


def test_report_rows_and_markdown(tmp_path):
    rep, _ = run(tmp_path, ["default", "bm25-only"], set_name="toy")
    rows = fmt.summary_rows(rep)
    assert [r[0] for r in rows] == ["default", "bm25-only"]
    assert rows[0][2] == "1.000" and rows[0][-1] == "-"
    assert rows[1][2] == "0.250" and rows[1][-2] == "<0.001"  # query file kept: rank 4
    assert len(rows[0]) == len(fmt.SUMMARY_COLUMNS)
    md = fmt.markdown(rep)
    assert md.startswith("### toy (12 queries, k=10)")
    assert "| default | code | 6 | 1.000 |" in md


def test_bad_k_and_unknown_variant(tmp_path):
    with pytest.raises(EvalError, match="-k must be at least 1"):
        run(tmp_path, ["default"], k=0)
    with pytest.raises(EvalError, match="unknown variant"):
        run(tmp_path, ["nope"])


def test_symbol_judgments_cover_nested_spans():
    from llmc.eval.runner import _within

    assert _within("Store", "Store")
    assert _within("Store.get_meta", "Store")
    assert _within("Guide > Install > Linux", "Guide > Install")
    assert not _within("StoreKeeper.get", "Store")
    assert not _within("Guide > Installation", "Guide > Install")
