"""Reading a repository's git history: its commits with their zero-context patches
(``read_commits``), blobs at a revision, and the filters that say which commits and files
stand for a real change (merges, reverts, version bumps, formatting-only commits; changelogs
and lock files). Only git and the text of its log: no index, no model.

Shared by ``llmc/learn/gitmine.py`` (a query set mined from the repository's own history)
and ``lab/protocol/commits.py`` (the protocol's commits task), so evaluation need not
import the learning package for them.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmc.errors import LearnError

_REC, _SEP = "\x1e", "\x1f"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_CONVENTIONAL = re.compile(
    r"^(?:feat|fix|docs?|refactor|perf|chore|test|tests|build|ci|style|revert|impr|enh|bug)"
    r"(?:\([^)]*\))?!?:\s*",
    re.IGNORECASE,
)
_ISSUE_REF = re.compile(r"\s*\((?:#|gh-|GH-)\d+\)|\s*\[(?:skip ci|ci skip|#\d+)\]|(?<!\w)#\d+\b")
_REVERT = re.compile(r"^revert\b|^reapply\b", re.IGNORECASE)
_VERSION = r"v?\d+\.\d+(?:\.\d+)?(?:[.-]?(?:a|b|rc|dev|post)\d*)?"
_BUMP = re.compile(
    r"^(?:bump(?:ed)?\b|release\b|prepare (?:for )?release|releasing\b|back to development|"
    r"version bump|update version|set version|"
    + _VERSION
    + r"$|(?:version|release) "
    + _VERSION
    + ")",
    re.IGNORECASE,
)
_VERSION_LINE = re.compile(_VERSION)
_FORMAT_SUBJECT = re.compile(
    r"^(?:style\b|format\b|formatting\b|reformat|lint\b|linting\b|run (?:black|ruff|prettier|"
    r"isort|gofmt|rustfmt)|apply (?:black|ruff|prettier|isort)|(?:black|ruff|prettier|isort)\b)",
    re.IGNORECASE,
)
_TRAILER = re.compile(r"^[A-Za-z-]+: |^\s*[-*]\s*$|^(?:co-authored-by|signed-off-by)", re.I)
_NOT_JUDGED = re.compile(
    r"(?i)(^|/)(changelog|changes|history|news|release[-_]?notes|authors|contributors|"
    r"license|licence|copying|changelog\.d)([-_./]|$)|(^|/)[^/]*\.lock$|"
    r"(^|/)(package-lock\.json|poetry\.lock|uv\.lock|cargo\.lock|go\.sum|pnpm-lock\.yaml)$"
)
MIN_WORDS = 3
MAX_QUERY_CHARS = 300


@dataclass(frozen=True)
class FileDiff:
    path: str
    ranges: tuple[tuple[int, int], ...]  # new-side lines touched, 1-based inclusive
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    time: int
    subject: str
    body: str
    files: tuple[FileDiff, ...]


# -- git --------------------------------------------------------------------------------
def _git(root: Path, *args: str, input_bytes: bytes | None = None) -> bytes:
    try:
        out = subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=root,
            input=input_bytes,
            capture_output=True,
            timeout=300,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise LearnError(f"git failed: {e}") from e
    if out.returncode != 0:
        msg = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LearnError(f"git {args[0]} failed in {root}: {msg[-1] if msg else out.returncode}")
    return out.stdout


def git_toplevel(root: Path) -> Path:
    try:
        top = _git(root, "rev-parse", "--show-toplevel").decode().strip()
    except LearnError:
        raise LearnError(f"{root} is not a git repository: nothing to mine") from None
    return Path(top).resolve()


def _parse_patch(patch: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    path: str | None = None
    ranges: list[tuple[int, int]] = []
    added: list[str] = []
    removed: list[str] = []
    old_left = new_left = 0

    def flush() -> None:
        if path is not None and (ranges or added or removed):
            files.append(FileDiff(path, tuple(ranges), tuple(added), tuple(removed)))

    for line in patch.split("\n"):
        if old_left > 0 or new_left > 0:
            if line.startswith("+"):
                added.append(line[1:])
                new_left -= 1
                continue
            if line.startswith("-"):
                removed.append(line[1:])
                old_left -= 1
                continue
            if line.startswith("\\"):
                continue
            old_left = new_left = 0  # a malformed hunk: resynchronise on headers
        if line.startswith("diff --git "):
            flush()
            path, ranges, added, removed = None, [], [], []
        elif line.startswith("+++ "):
            target = line[4:].strip()
            path = None if target == "/dev/null" else target.removeprefix("b/")
        elif (m := _HUNK.match(line)) and path is not None:
            old_n = int(m.group(2)) if m.group(2) is not None else 1
            start = int(m.group(3))
            new_n = int(m.group(4)) if m.group(4) is not None else 1
            if new_n > 0:
                ranges.append((start, start + new_n - 1))
            else:  # a pure deletion: mark the line the removed text sat under
                ranges.append((max(start, 1), max(start, 1)))
            old_left, new_left = old_n, new_n
    flush()
    return files


def _records(raw: str) -> list[str]:
    """``git log``'s output split into commits. A file's text may hold the record mark
    itself (a repository is untrusted input): a piece that does not start with a commit
    id is the previous commit's patch, not a commit."""
    records: list[str] = []
    for piece in raw.split(_REC)[1:]:
        if records and not _SHA.fullmatch(piece.split(_SEP, 1)[0].strip()):
            records[-1] += _REC + piece
        else:
            records.append(piece)
    return records


def read_commits(root: Path, n: int | None, rev: str = "HEAD") -> list[Commit]:
    """The ``n`` newest commits of ``rev`` (a revision or a range such as ``A..B``; every
    one when ``n`` is None) with their zero-context patches, newest first. ``root`` may be
    a work tree or a bare repository."""
    fmt = f"{_REC}%H{_SEP}%P{_SEP}%ct{_SEP}%s{_SEP}%b{_SEP}"
    limit = [f"-n{int(n)}"] if n is not None else []
    raw = _git(
        root, "log", *limit, "-p", "-U0", "-M", "--no-color", "--no-ext-diff",
        f"--format={fmt}", rev, "--",
    ).decode("utf-8", "replace")  # fmt: skip
    out = []
    for record in _records(raw):
        parts = record.split(_SEP, 5)
        if len(parts) < 6:
            continue
        sha, parents, ct, subject, body, patch = parts
        out.append(
            Commit(
                sha=sha.strip(),
                parents=tuple(parents.split()),
                time=int(ct) if ct.strip().isdigit() else 0,
                subject=subject.strip(),
                body=body.strip(),
                files=tuple(_parse_patch(patch)),
            )
        )
    return out


class _Blobs:
    """``git cat-file --batch`` reads of ``<rev>:<path>``, all in one process call."""

    def __init__(self, root: Path):
        self.root = root

    def read(self, specs: Sequence[str]) -> dict[str, bytes | None]:
        if not specs:
            return {}
        data = _git(self.root, "cat-file", "--batch", input_bytes="".join(
            s + "\n" for s in specs).encode())  # fmt: skip
        out: dict[str, bytes | None] = {}
        pos = 0
        for spec in specs:
            end = data.index(b"\n", pos)
            header = data[pos:end].decode("utf-8", "replace")
            pos = end + 1
            if header.endswith(" missing") or header.endswith(" ambiguous"):
                out[spec] = None
                continue
            size = int(header.rsplit(" ", 1)[1])
            out[spec] = data[pos : pos + size]
            pos += size + 1
        return out


def _blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


# -- filters ----------------------------------------------------------------------------
def clean_subject(subject: str) -> str:
    s = _CONVENTIONAL.sub("", subject.strip())
    s = _ISSUE_REF.sub("", s).strip()
    return s.rstrip(".").strip()


def query_text(commit: Commit) -> str:
    subject = clean_subject(commit.subject)
    first = next((ln.strip() for ln in commit.body.splitlines() if ln.strip()), "")
    if first and not _TRAILER.match(first) and not _REVERT.match(first):
        subject = f"{subject}: {first.rstrip('.')}" if subject else first
    return " ".join(subject.split())[:MAX_QUERY_CHARS]


def _squash(lines: Sequence[str]) -> str:
    text = "".join("".join(line.split()) for line in lines).replace("'", '"')
    return re.sub(r",(?=[)\]}])", "", text)


def formatting_only(files: Sequence[FileDiff]) -> bool:
    """Every file's removed and added text are equal once layout is ignored."""
    changed = [f for f in files if f.added or f.removed]
    return bool(changed) and all(_squash(f.removed) == _squash(f.added) for f in changed)


def version_bump_only(files: Sequence[FileDiff]) -> bool:
    """Every changed line carries a version number (``1.2.3``) and nothing else changed."""
    lines = [ln for f in files for ln in (*f.added, *f.removed) if ln.strip()]
    return bool(lines) and all(_VERSION_LINE.search(ln) for ln in lines)


def skip_reason(commit: Commit) -> str | None:
    """Why a commit gives no query, or None when it does (before looking at its files)."""
    if len(commit.parents) > 1:
        return "merge"
    if _REVERT.match(commit.subject) or "This reverts commit" in commit.body:
        return "revert"
    subject = clean_subject(commit.subject)
    if _BUMP.match(subject) or version_bump_only(commit.files):
        return "version bump"
    if _FORMAT_SUBJECT.match(subject) or formatting_only(commit.files):
        return "formatting only"
    if len(re.findall(r"\w+", query_text(commit))) < MIN_WORDS:
        return "subject too short"
    return None


def never_judged(path: str) -> bool:
    """Changelogs, authors and licence files, lock files: a change to them answers nothing."""
    return bool(_NOT_JUDGED.search(path))


__all__ = [
    "MAX_QUERY_CHARS",
    "MIN_WORDS",
    "Commit",
    "FileDiff",
    "clean_subject",
    "formatting_only",
    "git_toplevel",
    "never_judged",
    "query_text",
    "read_commits",
    "skip_reason",
    "version_bump_only",
]
