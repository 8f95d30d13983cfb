"""Docs-intent training queries (``lab.train.docs_queries``): hand-made sections in,
queries, targets and cuts out; cuts keep every line."""

from __future__ import annotations

from pathlib import Path

from lab.train.docs_queries import (
    DOC_MENTION,
    DOC_QUESTION,
    DOC_SENTENCE,
    DOC_TITLE,
    Cut,
    apply_cuts,
    cut_lines,
    from_json,
    mine,
    paragraphs,
    sections,
    split_sentences,
    to_json,
)
from llmc.config import IndexConfig
from llmc.index.chunk import chunk_file

GUIDE = """\
# Guide

## Caching results

The cache keeps the results of expensive calls around so that repeated calls with
the same arguments return at once. Entries expire after a time to live, and the
oldest entries are dropped when the cache is full, so memory stays bounded.

## Hashing

Keys are hashed from the arguments of each call. Unhashable arguments such as lists
raise an error unless a key function turns them into something hashable first, which
is what most users of the library end up writing at some point.

## Clearing entries

Call ``cache_clear`` on a decorated function to drop every entry it holds right away.
Nothing else in the library keeps a reference to the entries, so they are freed at
once by the garbage collector, which matters for large values kept in memory.
"""
CODE = """\
def cache_clear(cache):
    cache.entries.clear()
    cache.hits = 0
    return cache


class TTLCache:
    def __init__(self, ttl):
        self.ttl = ttl
        self.entries = {}
"""


def spans():
    cfg = IndexConfig()
    return chunk_file("docs/guide.md", GUIDE, "markdown", "doc", cfg) + chunk_file(
        "src/cache.py", CODE, "python", "code", cfg
    )


def test_sections_are_doc_sections_with_full_ranges() -> None:
    found = sections(spans())
    titles = [s.span.symbol for s in found]
    assert "Caching results" in titles and "Clearing entries" in titles
    assert all(s.span.path == "docs/guide.md" for s in found)


def test_sentences_are_whole_tokens_of_the_paragraph() -> None:
    sec = next(s for s in sections(spans()) if s.span.symbol == "Hashing")
    (para,) = paragraphs(sec.span)
    sentences = split_sentences(para)
    assert sentences[0][2] == "Keys are hashed from the arguments of each call."
    assert sentences[0][:2] == (0, 9) and sentences[1][0] == 9


def test_mine_one_query_per_section_with_quotas_and_seed() -> None:
    found = mine(spans(), "cachelib", limit=4, mentions=1, seed=0)
    assert found == mine(spans(), "cachelib", limit=4, mentions=1, seed=0)  # seeded
    kinds = [d.kind for d in found]
    assert kinds.count(DOC_MENTION) == 1
    assert kinds.count(DOC_TITLE) <= 1 and kinds.count(DOC_QUESTION) <= 1
    targets = [d.targets[0] for d in found]
    assert len(set(targets)) == len(targets)  # one query per section
    mention = next(d for d in found if d.kind == DOC_MENTION)
    assert "cache_clear" in mention.query
    assert mention.targets[1].path == "src/cache.py" and mention.targets[1].start_line == 1
    assert mention.cut is not None
    for d in found:
        if d.kind == DOC_SENTENCE:
            assert d.cut is not None and d.cut.skip == 0
        if d.kind in (DOC_TITLE, DOC_QUESTION):
            assert d.cut is None  # the title stays in the corpus


def test_only_the_kinds_given_shares() -> None:
    found = mine(spans(), "cachelib", 4, 0, 0, {DOC_TITLE: 0.5, DOC_QUESTION: 0.5})
    assert found and {d.kind for d in found} <= {DOC_TITLE, DOC_QUESTION}
    assert all(d.cut is None for d in found)


def test_cut_blanks_the_sentence_and_keeps_every_line() -> None:
    lines = ["Title", "", "One two three.", "four five. Six", "seven.", ""]
    out = cut_lines(lines, Cut("f.md", 3, 5, 3, 2))  # "four five."
    assert out == ["Title", "", "One two three.", "Six", "seven.", ""]
    out = cut_lines(lines, Cut("f.md", 3, 5, 0, 3))
    assert out == ["Title", "", "", "four five. Six", "seven.", ""]


def test_apply_cuts_keeps_line_ends(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    f = tmp_path / "docs" / "a.rst"
    f.write_bytes(b"Head\r\n====\r\n\r\nFirst sentence here. Rest stays.\r\nmore\r\n")
    assert apply_cuts(tmp_path, [Cut("docs/a.rst", 4, 5, 0, 3)]) == 1
    assert f.read_bytes() == b"Head\r\n====\r\n\r\nRest stays.\r\nmore\r\n"


def test_json_round_trip() -> None:
    for d in mine(spans(), "cachelib", 4, 1, 0):
        assert from_json(to_json(d)) == d
