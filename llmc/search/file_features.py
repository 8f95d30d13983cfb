"""The features of the learned **file** ranker (file-level answers: ``llmc search --files``,
``"group": "file"``): one row per candidate file of one query, from what a file-level answer
already has, with no further search: the span list (its files' ranks and span counts), the
whole-file BM25 list, the plain BM25 + dense RRF order of the same retrieval
(``Searcher.plain_files``), the query's text and the file's path.

Candidates are the first ``CANDIDATES`` files of the fused order ``files.group_by_file``
gives without the ranker (span list by best span, fused with the whole-file list), so the
learned order only reorders what the plain order holds. Pure functions: the training code
(``lab.train.file_ranker``) builds its rows with these very functions, so a model never
sees features computed another way at query time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from llmc.search.evidence import is_changelog
from llmc.search.query import parse

CANDIDATES = 40  # files of the plain fused order the ranker reorders
PLAIN_ABSENT = 101  # the rank a file outside the plain order's 100 spans reads as

FILE_FEATURES = (
    "file:fused_rank",  # its place in the plain fused order (1 = first)
    "file:best_span_log",  # log of its best span's rank in the span list (absent: list + 1)
    "file:spans",  # how many spans of the list lie in it
    "file:spans_top20",
    "file:spans_top10",
    "file:span_rr",  # sum of 1 / (10 + rank) over its spans
    "file:whole_rank",  # its whole-file BM25 rank (absent: 21)
    "file:in_whole",
    "path:test",
    "path:changelog",
    "path:doc",
    "path:config",
    "path:code",
    "query:names_stem",  # the query has the file's name without extension as a word
    "query:names_dir",  # ... or one of its directories' names
    "query:names_path",  # ... or its path (a traceback frame's tail, a path in prose)
    "query:words_log",
    "query:traceback",
    "file:same_dir_as_first",  # in the directory of the plain order's first file
    "path:depth",
    "plain:best_rank_log",  # log of its best span's rank in the plain BM25 + dense RRF order
    "plain:spans",  # how many of that order's spans lie in it
)
_WORD = re.compile(r"[a-z_][a-z0-9_]{2,}")
_TEST = re.compile(
    r"(^|/)(tests?|testing|__tests__|spec)/|(^|/)test_|_test\.|\.test\.|\.spec\.|conftest"
)
_DOC_EXT = (".md", ".rst", ".txt", ".adoc", ".markdown")
_CONFIG_EXT = (".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".lock")


def path_class(path: str) -> str:
    """``test``, ``changelog``, ``doc``, ``config`` or ``code``."""
    low = path.lower()
    if _TEST.search(low):
        return "test"
    if is_changelog(path):
        return "changelog"
    if low.endswith(_DOC_EXT) or low.startswith(("docs/", "doc/")):
        return "doc"
    if low.endswith(_CONFIG_EXT) or low.rsplit("/", 1)[-1] in ("setup.py", "noxfile.py"):
        return "config"
    return "code"


def _path_suffix(longer: str, shorter: str) -> bool:
    """``shorter`` is ``longer`` or its tail at a directory boundary (``pkg/mod.py`` of
    ``/home/x/proj/pkg/mod.py``, never ``a.py`` of ``data.py``)."""
    return longer == shorter or longer.endswith("/" + shorter)


def names_path(low_query: str, low_path: str, frame_paths: Sequence[str]) -> bool:
    """Whether the (lowercased) query names the repository path: in prose, as a whole path
    or a path's tail (not inside a longer name: ``a.py`` is not named by ``data.py``), or
    as a traceback frame's file (the frame's path ends with the repository path, or the
    other way round)."""
    if any(_path_suffix(fp, low_path) or _path_suffix(low_path, fp) for fp in frame_paths):
        return True
    pattern = r"(?<![\w.-])" + re.escape(low_path) + r"(?![\w-])"
    return re.search(pattern, low_query.replace("\\", "/")) is not None


def _ranks(paths: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, p in enumerate(paths, start=1):
        out.setdefault(p, []).append(i)
    return out


def feature_rows(
    query: str, span_paths: Sequence[str], whole: Sequence[str], order: Sequence[str],
    plain: Sequence[str] = (),
) -> list[list[float]]:  # fmt: skip
    """One row of ``FILE_FEATURES`` per file of ``order`` (the plain fused order, at most
    ``CANDIDATES``), from the span list's paths (best first), the whole-file list and the
    paths of the plain BM25 + dense RRF order of the same retrieval (``plain``: empty when
    the searcher has none, then every file reads as absent from it)."""
    n = len(span_paths)
    ranks = _ranks(span_paths)
    plain_ranks = _ranks(plain)
    absent = math.log(PLAIN_ABSENT)
    whole_rank = {p: i for i, p in enumerate(dict.fromkeys(whole), start=1)}
    low = query.lower()
    words = set(_WORD.findall(low))
    frame_paths = [f.path.lower() for f in parse(query).frames]
    n_words = len(query.split())
    traceback = 1.0 if frame_paths else 0.0
    first_dir = order[0].rsplit("/", 1)[0] if order and "/" in order[0] else ""
    rows = []
    for i, path in enumerate(order, start=1):
        mine = ranks.get(path, [])
        lowp = path.lower()
        stem = lowp.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        dirs = [d for d in lowp.split("/")[:-1] if len(d) >= 3]
        cls = path_class(path)
        named_path = names_path(low, lowp, frame_paths)
        here = path.rsplit("/", 1)[0] if "/" in path else ""
        rows.append(
            [
                float(i),
                math.log(min(mine) if mine else n + 1),
                float(len(mine)),
                float(sum(1 for r in mine if r <= 20)),
                float(sum(1 for r in mine if r <= 10)),
                sum(1.0 / (10 + r) for r in mine),
                float(whole_rank.get(path, 21)),
                1.0 if path in whole_rank else 0.0,
                *(1.0 if cls == c else 0.0 for c in ("test", "changelog", "doc", "config", "code")),
                1.0 if len(stem) >= 3 and stem in words else 0.0,
                1.0 if any(d in words for d in dirs) else 0.0,
                1.0 if named_path else 0.0,
                math.log(n_words + 1),
                traceback,
                1.0 if here == first_dir else 0.0,
                float(path.count("/")),
                math.log(min(plain_ranks[path])) if path in plain_ranks else absent,
                float(len(plain_ranks.get(path, ()))),
            ]
        )
    return rows


__all__ = ["CANDIDATES", "FILE_FEATURES", "feature_rows", "names_path", "path_class"]
