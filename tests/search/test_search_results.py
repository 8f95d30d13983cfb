"""Result selection and snippets, on spans built by hand."""

from __future__ import annotations

from pathlib import Path

from llmc.search.results import best_window, code_within, select, snippet
from llmc.search.types import Candidate
from llmc.types import Span, StoredSpan


def stored(i: int, path: str, start: int, end: int, text: str = "", **kw) -> StoredSpan:
    lines = text.split("\n") if text else [f"line {n}" for n in range(start, end + 1)]
    span = Span(
        path=path, lang=kw.pop("lang", "python"), category=kw.pop("category", "code"),
        kind=kw.pop("kind", "function"), symbol=kw.pop("symbol", f"f{i}"),
        qualname=kw.pop("qualname", f"f{i}"), start_line=start, end_line=end,
        text="\n".join(lines), header="", part=kw.pop("part", 0),
    )  # fmt: skip
    return StoredSpan(i, span)


def test_best_window_covers_most_query_words() -> None:
    lines = ["def f():", "    a = 1", "    b = 2", "    cache = load()", "    save(cache)",
             "    return vector_cache", "    x", "    y"]  # fmt: skip
    assert best_window(lines, [("cache",), ("vector",)], 3) == (3, 5)
    assert best_window(lines, [("nothing",)], 3) == (0, 2)  # no match: the head
    assert best_window(lines, [("def",)], 3) == (0, 2)  # the head covers as much
    assert best_window(lines, [("cache",)], 20) == (0, 7)  # short span: all of it


def test_words_match_at_word_starts_and_camel_humps() -> None:
    lines = ["x = 1", "mycache = 2", "y = 3", "vectorCache = 4", "z = 5", "w = 6"]
    assert best_window(lines, [("cache",)], 2) == (2, 3)  # not inside "mycache"
    lines = ["a", "b", "c", "CACHE_SIZE = 4", "d", "e"]
    assert best_window(lines, [("cache",)], 2) == (2, 3)  # case-insensitive


def test_snippet_line_numbers_are_file_lines() -> None:
    text = "\n".join(["def big():"] + [f"    step_{n}()" for n in range(1, 30)] + ["    finish()"])
    s = stored(1, "a.py", 100, 130, text)
    snip, first = snippet(s, [("finish",)], 5)
    assert first == 100 + 26  # two lines of context before the match at offset 30, window 5
    assert snip.split("\n")[-1] == "    finish()"
    assert snip.split("\n")[0] == text.split("\n")[first - 100]


def test_select_drops_missing_ids_and_deleted_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x")
    spans = {1: stored(1, "a.py", 1, 3), 3: stored(3, "gone.py", 1, 3), 4: stored(4, "a.py", 5, 9)}
    cands = [Candidate(i, 1.0 / i) for i in (1, 2, 3, 4)]
    sel = select(cands, lambda ids: {i: spans[i] for i in ids if i in spans}, tmp_path, 10, 3)
    assert [s.id for _, s in sel.chosen] == [1, 4]
    assert sel.missing_ids == (2,)
    assert sel.deleted_paths == ("gone.py",)


def test_select_caps_per_file_but_backfills_to_k(tmp_path: Path) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x")
    spans = {i: stored(i, "a.py", i * 10, i * 10 + 5) for i in range(1, 6)}
    spans[6] = stored(6, "b.py", 1, 2)
    cands = [Candidate(i, 1.0 / i) for i in range(1, 7)]
    fetch = lambda ids: {i: spans[i] for i in ids}  # noqa: E731
    sel = select(cands, fetch, tmp_path, k=3, max_per_file=2)
    assert [s.id for _, s in sel.chosen] == [1, 2, 6]
    sel = select(cands, fetch, tmp_path, k=5, max_per_file=2)
    assert [s.id for _, s in sel.chosen] == [1, 2, 6, 3, 4]
    assert sel.held_back == 2


def test_select_merges_split_parts_but_keeps_members(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x")
    spans = {
        1: stored(1, "a.py", 1, 50, kind="class", qualname="C"),
        2: stored(2, "a.py", 10, 20, kind="method", qualname="C.m"),
        3: stored(3, "a.py", 60, 180, qualname="big", part=0),
        4: stored(4, "a.py", 170, 290, qualname="big", part=1),
    }
    cands = [Candidate(i, 1.0 / i) for i in (1, 2, 3, 4)]
    sel = select(cands, lambda ids: {i: spans[i] for i in ids}, tmp_path, 10, 0)
    assert [s.id for _, s in sel.chosen] == [1, 2, 3]
    assert sel.merged == 1


def test_select_reads_more_batches_before_backfilling(tmp_path: Path) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x")
    spans = {1: stored(1, "a.py", 1, 2), 2: stored(2, "a.py", 5, 6), 3: stored(3, "a.py", 9, 9)}
    spans[4] = stored(4, "b.py", 1, 2)
    calls: list[list[int]] = []

    def fetch(ids: list[int]) -> dict[int, StoredSpan]:
        calls.append(ids)
        return {i: spans[i] for i in ids}

    cands = [Candidate(i, 1.0 / i) for i in (1, 2, 3, 4)]
    sel = select(cands, fetch, tmp_path, k=3, max_per_file=2, batch=2)
    assert [s.id for _, s in sel.chosen] == [1, 2, 4]
    assert calls == [[1, 2], [3, 4]]


def _chosen(*langs: str) -> tuple[tuple[Candidate, StoredSpan], ...]:
    return tuple(
        (Candidate(i, 1.0 / i), stored(i, f"f{i}.{'md' if lang == 'markdown' else 'py'}", 1, 2, lang=lang))
        for i, lang in enumerate(langs, start=1)
    )  # fmt: skip


def test_code_within_moves_the_first_code_span_to_rank_n() -> None:
    chosen = _chosen("markdown", "markdown", "rst", "text", "python", "markdown", "python")
    moved, from_rank = code_within(chosen, 3)
    assert [s.id for _, s in moved] == [1, 2, 5, 3, 4, 6, 7]  # 5 to rank 3, the rest shift
    assert from_rank == 5
    assert len(moved) == len(chosen)


def test_code_within_leaves_order_alone_when_it_need_not_or_cannot() -> None:
    some_code = _chosen("markdown", "python", "markdown", "python")
    assert code_within(some_code, 3) == (some_code, 0)  # code already in the top 3
    prose = _chosen("markdown", "markdown", "markdown", "rst")
    assert code_within(prose, 3) == (prose, 0)  # no code anywhere: nothing to move
    late = _chosen("markdown", "markdown", "python")
    assert code_within(late, 2)[0][1][1].id == 3 and code_within(late, 2)[1] == 3
    assert code_within(late, 0) == (late, 0)  # 0: off
    assert code_within(_chosen("markdown", "python"), 3) == (_chosen("markdown", "python"), 0)
