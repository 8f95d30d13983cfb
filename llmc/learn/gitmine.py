"""Mine a graded query set from the repository's own git history.

Each kept commit becomes one query: its subject (conventional-commit prefix and issue
references removed) plus the first line of its body, judged against the non-test files
it changed and the spans its diff touched there. A span is the innermost span llmc's
chunker makes of the file as the commit left it (a method, not its class; a subsection,
not its chapter). The spans with the most changed lines get grade 3, the other touched
spans grade 2. A file unchanged since the commit is judged by those exact lines; a file
that changed since is judged by the span's qualified name (``symbol``; the eval runner
takes today's lines from the index), or, for a span without a stable name, at file level
with grade 1.

Skipped, each with a reason counted in ``MineResult.skipped``: merges, reverts, version
bumps, formatting-only commits (the diff is the same text once whitespace, quote style
and trailing commas are ignored, or the subject says format/lint/style), commits that
only touch tests, lock files, changelogs or files llmc does not index, commits touching
more than ``learn.max_commit_files`` files, and subjects of fewer than three words.

Leakage (docs/learning.md has the full list): a commit message is written by someone
looking at the diff, so it shares identifiers with the code far more than a question
would; the code judged relevant is the code as it is *now*; and later commits may have
copied the message's words into comments. Mined sets flatter BM25 and lexical matching,
and tuning on them learns commit-message style. ``tune`` therefore holds out the newest
commits (a split by time, not at random), and mined numbers should be read as a relative
signal, never as a quality claim next to hand-written sets.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmc.gitlog import (  # re-exported: gitmine's callers and tests take them from here
    _NOT_JUDGED,
    MAX_QUERY_CHARS,
    MIN_WORDS,
    Commit,
    FileDiff,
    _blob_id,
    _Blobs,
    clean_subject,
    formatting_only,
    git_toplevel,
    never_judged,
    query_text,
    read_commits,
    skip_reason,
    version_bump_only,
)

log = logging.getLogger(__name__)

_NAMED_KINDS = frozenset({"function", "method", "class", "section"})
MAX_JUDGMENTS = 8


@dataclass
class MineResult:
    """The mined queries (newest commit first), when each commit was made, what was skipped."""

    queries: list = field(default_factory=list)  # list[EvalQuery]
    times: dict[str, int] = field(default_factory=dict)  # query id → commit time (unix)
    skipped: Counter = field(default_factory=Counter)  # reason → commits
    read: int = 0  # commits read

    def summary(self) -> str:
        why = ", ".join(f"{n} {reason}" for reason, n in self.skipped.most_common())
        return f"{len(self.queries)} queries from {self.read} commits" + (
            f" (skipped: {why})" if why else ""
        )


def _judged_file(path: str) -> str | None:
    """The file's category (code / doc) when a commit's change to it can be judged."""
    from llmc.languages import detect_language
    from llmc.search.router import is_test_path

    if is_test_path(path) or _NOT_JUDGED.search(path):
        return None
    return detect_language(path)[1]


# -- mining -----------------------------------------------------------------------------
def _innermost(spans: Sequence, line: int):
    hits = [s for s in spans if s.start_line <= line <= s.end_line]
    return min(hits, key=lambda s: (s.end_line - s.start_line, s.start_line)) if hits else None


def _touched(spans: Sequence, ranges: Sequence[tuple[int, int]]) -> Counter:
    """Span → changed lines inside it (each line credited to its innermost span)."""
    out: Counter = Counter()
    for start, end in ranges:
        for line in range(start, min(end, start + 2000) + 1):
            span = _innermost(spans, line)
            if span is not None:
                out[span] += 1
    return out


def mine_git(root: Path, n: int = 300, max_files: int = 8) -> MineResult:
    """Mine up to ``n`` commits of ``root`` (see the module docstring)."""
    from llmc.config import IndexConfig
    from llmc.eval.queries import EvalQuery, Judgment
    from llmc.index.chunk import chunk_file
    from llmc.languages import detect_language

    root = Path(root).resolve()
    top = git_toplevel(root)
    prefix = root.relative_to(top).as_posix() + "/" if root != top else ""
    commits = read_commits(root, n)
    result = MineResult(read=len(commits))
    wanted: dict[str, list[tuple[FileDiff, str]]] = {}
    for c in commits:
        reason = skip_reason(c)
        if reason is None:
            files = []
            for f in c.files:
                if prefix and not f.path.startswith(prefix):
                    continue
                rel = f.path[len(prefix) :]
                category = _judged_file(rel)
                if category is not None and (root / rel).is_file():
                    files.append((FileDiff(rel, f.ranges, f.added, f.removed), category))
            if not files:
                reason = "no indexed non-test file changed"
            elif len(files) > max_files:
                reason = f"more than {max_files} files changed"
            else:
                wanted[c.sha] = files
        if reason is not None:
            result.skipped[reason] += 1
    blobs = _Blobs(top).read(
        [f"{sha}:{prefix}{f.path}" for sha, fs in wanted.items() for f, _ in fs]
    )
    index_cfg = IndexConfig()
    now_ids: dict[str, str | None] = {}
    for c in commits:
        if c.sha not in wanted:
            continue
        touched: list[tuple[int, str, object, bool]] = []  # (lines, category, span, same)
        file_level: list[tuple[str, str]] = []
        for f, category in wanted[c.sha]:
            content = blobs.get(f"{c.sha}:{prefix}{f.path}")
            if content is None:
                continue
            if f.path not in now_ids:
                try:
                    now_ids[f.path] = _blob_id((root / f.path).read_bytes())
                except OSError:
                    now_ids[f.path] = None
            same = now_ids[f.path] == _blob_id(content)
            text = content.decode("utf-8", "replace")
            lang, cat = detect_language(f.path, text.split("\n", 1)[0])
            spans = chunk_file(f.path, text, lang, cat, index_cfg)
            counts = _touched(spans, f.ranges)
            if not counts:
                file_level.append((f.path, category))
            for span, lines in counts.items():
                touched.append((lines, category, span, same))
        judgments, categories = _judgments(touched, file_level)
        if not judgments:
            result.skipped["no span could be judged"] += 1
            continue
        qid = f"git:{c.sha[:12]}"
        intent = "mixed" if len(categories) > 1 else ("docs" if categories == {"doc"} else "code")
        result.queries.append(
            EvalQuery(
                query=query_text(c),
                intent=intent,
                relevant=tuple(Judgment(**j) for j in judgments),
                source=f"git {c.sha[:12]}",
                id=qid,
                note=f"mined from commit {c.sha[:12]}",
            )
        )
        result.times[qid] = c.time
    return result


def _judgments(
    touched: Sequence[tuple[int, str, object, bool]], file_level: Sequence[tuple[str, str]]
) -> tuple[list[dict], set[str]]:
    touched = sorted(touched, key=lambda t: -t[0])[:MAX_JUDGMENTS]
    top = touched[0][0] if touched else 0
    out: list[dict] = []
    categories: set[str] = set()
    seen: set[tuple] = set()
    for lines, category, span, same in touched:
        grade = 3 if lines >= max(1, top // 2) else 2
        if same:
            item = {"path": span.path, "grade": grade, "start_line": span.start_line,
                    "end_line": span.end_line}  # fmt: skip
        elif span.kind in _NAMED_KINDS and span.qualname:
            item = {"path": span.path, "grade": grade, "symbol": span.qualname}
        else:
            item = {"path": span.path, "grade": 1}
        key = tuple(sorted(item.items()))
        if key in seen:
            continue
        seen.add(key)
        categories.add(category)
        out.append(item)
    for path, category in file_level:
        if not any(j["path"] == path for j in out):
            out.append({"path": path, "grade": 1})
            categories.add(category)
    return out, categories


__all__ = [
    "MAX_QUERY_CHARS",
    "MIN_WORDS",
    "Commit",
    "FileDiff",
    "MineResult",
    "clean_subject",
    "formatting_only",
    "git_toplevel",
    "mine_git",
    "never_judged",
    "query_text",
    "read_commits",
    "skip_reason",
    "version_bump_only",
]
