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

import hashlib
import logging
import re
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmc.errors import LearnError

log = logging.getLogger(__name__)

_REC, _SEP = "\x1e", "\x1f"
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
_NAMED_KINDS = frozenset({"function", "method", "class", "section"})
MIN_WORDS = 3
MAX_QUERY_CHARS = 300
MAX_JUDGMENTS = 8


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
    for record in raw.split(_REC)[1:]:
        parts = record.split(_SEP, 5)
        if len(parts) < 6:
            continue
        sha, parents, ct, subject, body, patch = parts
        out.append(
            Commit(
                sha=sha.strip(),
                parents=tuple(parents.split()),
                time=int(ct or 0),
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
    "Commit",
    "FileDiff",
    "MineResult",
    "clean_subject",
    "formatting_only",
    "mine_git",
    "query_text",
    "read_commits",
    "skip_reason",
    "version_bump_only",
]
