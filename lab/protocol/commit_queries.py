"""Task (c)'s queries: which commits of a history become queries (gitlog's filters, then
this task's own), the query a commit subject gives, and the files it changed judged by
class (source, docs, tests, config); the rules are in ``commits.py``'s docstring."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc.eval.queries import EvalQuery, Judgment

MAX_FILES = 10
MAX_QUERIES = 60
CONFIG_LANGS = frozenset(
    {"json", "yaml", "toml", "ini", "xml", "make", "cmake", "dockerfile", "hcl", "starlark"}
)
PROSE_LANGS = frozenset({"markdown", "rst"})
SOURCE, DOCS, TESTS, CONFIG = "source", "docs", "tests", "config"

# Commit kinds that change no behaviour a developer would search for.
_SKIP_TYPE = re.compile(
    r"^(?:ci|build|deps|test|tests|style|chore\(deps[^)]*\)|chore\(ci\)|chore\(release\))"
    r"(?:\([^)]*\))?!?:",
    re.IGNORECASE,
)
_TRIVIAL = re.compile(
    r"(?i)\b(?:typos?|misspell\w*|spelling|grammar|wording|whitespace)\b|"
    r"^\[?pre-commit|pre-commit autoupdate|^\[bot\]|dependabot|renovate|"
    r"^(?:update|upgrade|pin|unpin|bump)\s+(?:dev\s+|the\s+)?(?:dependenc|deps?\b|requirements)|"
    r"^(?:update|upgrade|pin|unpin)\s+\S+\s+(?:to|from)\s+v?\d|"
    r"^(?:update|edit|fix|improve)\s+(?:the\s+)?(?:readme|changelog|authors|docs?|documentation)"
    r"(?:\.\w+)?$|^(?:update|edit|create|add|fix|delete|remove)\s+[\w./-]+\.\w+$|"
    r"^merge\b|^initial commit|^wip\b|back to develop|development (?:mode|version)",
)
# Project-process documents: who triages, how releases and reports work. A change there is
# documentation, but not of the software; judged like configuration (grade 1).
_META_DOC = re.compile(
    r"(?i)(^|/)(contributing|security|release[-_]process|code[-_]of[-_]conduct|governance|"
    r"triager?[-_]guide|support|funding|maintainers|maintaining|pull[-_]request[-_]template|"
    r"issue[-_]template)(\.\w+)?$|(^|/)\.github/"
)
# Changelogs under other names than gitlog's (docs/versionhistory.rst, docs/change_log/,
# whatsnew): a documentation file there is a changelog, never judged.
_CHANGELOG_DOC = re.compile(
    r"(?i)(^|/)(change[-_]?logs?|version[-_]?history|history|changes|news|release[-_]?notes|"
    r"whats[-_]?new)(/|[-_.][^/]*$|$)"
)
_LEFTOVER = re.compile(
    r"^\[[^\]]*\]\s*|\s*\((?:(?:fix(?:es|ed)?|close[sd]?|see|refs?|issue)\s*)?[,\s]*\)|"
    r"\s+(?:fix(?:es|ed)?|close[sd]?)\s*$",
    re.IGNORECASE,
)


def file_class(path: str) -> str | None:
    """``source``, ``docs``, ``tests`` or ``config`` for a judged file; None when a change
    to it is never judged (changelogs, licences, lock files, unknown types)."""
    from llmc.gitlog import never_judged
    from llmc.languages import detect_language
    from llmc.search.router import is_test_path

    if never_judged(path):
        return None
    lang, category = detect_language(path)
    if lang is None:
        return None
    if lang in PROSE_LANGS | {"text"} and _CHANGELOG_DOC.search(path):
        return None
    if is_test_path(path):
        return TESTS
    if _META_DOC.search(path):
        return CONFIG
    if lang in PROSE_LANGS:
        return DOCS
    if category == "code" and lang not in CONFIG_LANGS:
        return SOURCE
    return CONFIG


def subject_query(subject: str) -> str:
    """The query of a commit subject: ``gitlog.clean_subject`` (conventional-commit prefix
    and issue references off), then what those leave behind (``[tag]`` prefixes, empty
    ``(fixes )``, a trailing ``closes``)."""
    from llmc.gitlog import clean_subject

    text = clean_subject(subject)
    for _ in range(2):
        text = _LEFTOVER.sub("", text).strip()
    return " ".join(text.rstrip(".").split())


def commit_skip_reason(commit: Any) -> str | None:
    """Why a commit gives no query, before looking at its files (gitlog's filters, then
    this task's own)."""
    from llmc.gitlog import skip_reason

    reason = skip_reason(commit)
    if reason is not None:
        return reason
    if _SKIP_TYPE.match(commit.subject.strip()):
        return "ci / build / deps / test / style commit"
    subject = subject_query(commit.subject)
    if _TRIVIAL.search(subject):
        return "trivial subject"
    if len(re.findall(r"\w+", subject)) < 3:
        return "subject too short"
    return None


def judge_commit(
    commit: Any, present: set[str], max_files: int = MAX_FILES
) -> tuple[list[Judgment], str] | str:
    """The file-level judgments and intent of a commit, or why it has none."""
    paths = list(dict.fromkeys(f.path for f in commit.files))
    if len(paths) > max_files:
        return f"more than {max_files} files changed"
    every = {p: file_class(p) for p in paths}
    if any(c in (SOURCE, DOCS) and p not in present for p, c in every.items()):
        return "changes source or docs the base does not have"
    classes = {p: c for p, c in every.items() if c is not None and p in present}
    kinds = set(classes.values())
    if not kinds & {SOURCE, DOCS}:
        return "no source or documentation file of the base changed"
    judged = []
    for p, c in classes.items():
        if c == SOURCE:
            grade = 3
        elif c == DOCS:
            grade = 2 if SOURCE in kinds else 3
        else:
            grade = 1
        judged.append(Judgment(path=p, grade=grade))
    judged.sort(key=lambda j: (-j.grade, j.path))
    intent = "mixed" if {SOURCE, DOCS} <= kinds else ("code" if SOURCE in kinds else "docs")
    return judged, intent


@dataclass
class Mined:
    queries: list[EvalQuery]
    read: int
    skipped: Counter

    def summary(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "kept": len(self.queries),
            "skipped": dict(self.skipped.most_common()),
        }


def mine_commits(
    git_dir: Path,
    base: str,
    head: str,
    present: set[str],
    *,
    max_queries: int = MAX_QUERIES,
    max_files: int = MAX_FILES,
) -> Mined:
    """The first ``max_queries`` kept commits of ``base..head``, oldest first."""
    from llmc.gitlog import read_commits

    commits = list(reversed(read_commits(git_dir, None, f"{base}..{head}")))
    commits = [c for c in commits if len(c.parents) <= 1]  # merges: not read as queries
    skipped: Counter = Counter()
    queries: list[EvalQuery] = []
    seen: set[str] = set()
    read = 0
    for c in commits:
        if len(queries) >= max_queries:
            break
        read += 1
        reason = commit_skip_reason(c)
        judged = judge_commit(c, present, max_files) if reason is None else reason
        if isinstance(judged, str):
            skipped[judged] += 1
            continue
        text = subject_query(c.subject)
        if text.lower() in seen:
            skipped["subject seen before"] += 1
            continue
        seen.add(text.lower())
        relevant, intent = judged
        queries.append(
            EvalQuery(
                query=text,
                intent=intent,
                relevant=tuple(relevant),
                id=f"commit:{c.sha[:12]}",
                note=f"commit {c.sha}",
            )
        )
    return Mined(queries, read, skipped)


__all__ = [
    "CONFIG",
    "DOCS",
    "MAX_FILES",
    "MAX_QUERIES",
    "SOURCE",
    "TESTS",
    "Mined",
    "commit_skip_reason",
    "file_class",
    "judge_commit",
    "mine_commits",
    "subject_query",
]
