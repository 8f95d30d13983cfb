"""Task (d)'s queries: which commits of a history read like an issue report (a long body,
a traceback, a merged pull request's description), the report text they give, and the
files that answer it (the non-test source and documentation files the change touched);
the rules are in ``reports.py``'s docstring."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from llmc.eval.queries import EvalQuery, Judgment

MIN_BODY_WORDS = 40
MAX_REPORT_CHARS = 4000
MAX_FILES = 10
MAX_QUERIES = 60

# A Python traceback, a Python frame line, a JavaScript stack frame, an error line.
_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|"
    r"^\s+at \S.*:\d+:\d+\)?\s*$",
    re.MULTILINE,
)
_TRAILER = re.compile(
    r"^\s*(?:signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|"
    r"suggested-by|helped-by|cc)\s*:",
    re.IGNORECASE,
)
_MERGE_PR = re.compile(r"^Merge pull request #\d+ from \S+")
_SKIP_CI = re.compile(r"\[(?:skip ci|ci skip)\]", re.IGNORECASE)
# A squash merge's body lists its commits' subjects ("* fix tests", "* Update Readme.md"):
# such short bullets are a changelog of the branch, not a report, and do not count.
_SHORT_BULLET = re.compile(r"^\s*[*-]\s+(?:\S+\s+){0,11}\S+\s*$")


def report_body(body: str) -> str:
    """A commit body without its trailers (Signed-off-by, Co-authored-by, ...) and
    ``[skip ci]`` markers, blank runs squeezed."""
    lines = [_SKIP_CI.sub("", ln).rstrip() for ln in body.splitlines() if not _TRAILER.match(ln)]
    text = "\n".join(ln for ln in lines if not re.fullmatch(r"-{3,}", ln.strip())).strip()
    return re.sub(r"\n{3,}", "\n\n", text)


def prose_words(body: str) -> int:
    """Words of ``body`` outside short bullet lines (a squash merge's commit list)."""
    lines = [ln for ln in body.splitlines() if not _SHORT_BULLET.match(ln)]
    return len(re.findall(r"\w+", "\n".join(lines)))


def has_traceback(text: str) -> bool:
    return _TRACEBACK.search(text) is not None


def report_kind(body: str) -> str | None:
    """``traceback`` or ``long body`` when a (cleaned) body reads as a report, else None."""
    if has_traceback(body):
        return "traceback"
    if prose_words(body) >= MIN_BODY_WORDS:
        return "long body"
    return None


def title_and_body(commit: Any) -> tuple[str, str]:
    """The report's title and body: a merged pull request's title is the first line of the
    merge's body and its description the rest; any other commit's title is its cleaned
    subject and its description its body."""
    from llmc.gitlog import clean_subject

    body = report_body(commit.body)
    if _MERGE_PR.match(commit.subject):
        title, _, rest = body.partition("\n")
        return title.strip(), rest.strip()
    return clean_subject(commit.subject), body


def report_text(title: str, body: str, limit: int = MAX_REPORT_CHARS) -> str:
    """Title, a blank line, body; cut at ``limit`` characters on a line boundary."""
    text = f"{title}\n\n{body}".strip()
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip()


def report_skip_reason(commit: Any) -> str | None:
    """Why a commit gives no report, before looking at its files."""
    from lab.protocol.commit_queries import commit_skip_reason

    if len(commit.parents) > 1 and not _MERGE_PR.match(commit.subject):
        return "merge without a pull request description"
    if len(commit.parents) <= 1:
        reason = commit_skip_reason(commit)
        if reason is not None and reason != "subject too short":  # the body speaks for it
            return reason
    title, body = title_and_body(commit)
    if report_kind(body) is None:
        return "body shorter than 40 words, no traceback"
    return None


def answer_files(
    commit: Any, present: set[str], max_files: int = MAX_FILES
) -> tuple[list[Judgment], str] | str:
    """The judged non-test source and documentation files of a commit (task (c)'s grades:
    tests and configuration are left out of the answer), its intent, or why it has none."""
    from lab.protocol.commit_queries import judge_commit

    judged = judge_commit(commit, present, max_files)
    if isinstance(judged, str):
        return judged
    relevant, intent = judged
    return [j for j in relevant if j.grade >= 2], intent


def merge_files(git_dir: Path, merge: Any) -> Any:
    """A merge commit with its files: those changed against its first parent."""
    from lab.protocol.commits import _git

    names = _git(git_dir, "diff", "--name-only", "--no-renames", merge.parents[0], merge.sha)
    files = tuple(SimpleNamespace(path=p) for p in names.splitlines() if p.strip())
    return SimpleNamespace(
        sha=merge.sha, parents=merge.parents, subject=merge.subject, body=merge.body,
        files=files,
    )  # fmt: skip


@dataclass
class MinedReports:
    queries: list[EvalQuery]
    read: int
    skipped: Counter
    kinds: Counter

    def summary(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "kept": len(self.queries),
            "kinds": dict(self.kinds.most_common()),
            "skipped": dict(self.skipped.most_common()),
        }


def mine_reports(
    commits: Sequence[Any],
    present: set[str],
    *,
    git_dir: Path | None = None,
    max_queries: int = MAX_QUERIES,
    max_files: int = MAX_FILES,
) -> MinedReports:
    """The first ``max_queries`` reports of ``commits`` (oldest first). Merges get their
    files from ``git_dir`` (first-parent diff); without one they have none."""
    skipped: Counter = Counter()
    kinds: Counter = Counter()
    queries: list[EvalQuery] = []
    seen: set[str] = set()
    read = 0
    for c in commits:
        if len(queries) >= max_queries:
            break
        read += 1
        reason = report_skip_reason(c)
        if reason is not None:
            skipped[reason] += 1
            continue
        merge = len(c.parents) > 1
        if merge and git_dir is not None:
            c = merge_files(git_dir, c)
        judged = answer_files(c, present, max_files)
        if isinstance(judged, str):
            skipped[judged] += 1
            continue
        title, body = title_and_body(c)
        text = report_text(title, body)
        if text.lower() in seen:
            skipped["report seen before"] += 1
            continue
        seen.add(text.lower())
        kind = "pull request" if merge else report_kind(body)
        kinds[kind] += 1
        relevant, intent = judged
        queries.append(
            EvalQuery(
                query=text,
                intent=intent,
                relevant=tuple(relevant),
                id=f"report:{c.sha[:12]}",
                note=f"{'merge' if merge else 'commit'} {c.sha} ({kind})",
            )
        )
    return MinedReports(queries, read, skipped, kinds)


__all__ = [
    "MAX_FILES",
    "MAX_QUERIES",
    "MAX_REPORT_CHARS",
    "MIN_BODY_WORDS",
    "MinedReports",
    "answer_files",
    "has_traceback",
    "merge_files",
    "mine_reports",
    "prose_words",
    "report_body",
    "report_kind",
    "report_skip_reason",
    "report_text",
    "title_and_body",
]
