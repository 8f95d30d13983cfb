"""Task (c) of the protocol: a commit's subject → the files it changed, from real git
histories (docs/evaluation.md, "Commit subjects → files").

Per project, ``commits/projects.json`` (package data) pins the repository (URL and the
mirror directory name ``owner+name``), a **base** commit and the **head** the commits were
mined up to; ``commits/<project>.jsonl`` holds the mined queries (the eval JSON Lines
format, file-level judgments), committed so they are reproducible and reviewable.

- **Corpus:** ``git archive <base>`` of a local mirror of the repository, unpacked under
  ``<eval cache>/protocol/commits/<name>-<base[:12]>/corpus`` and made its own git work
  tree. Nothing is stripped (a subject written after the base is not in it). Mirrors are
  looked up under ``$LLMC_MIRRORS`` (default ``<eval cache>/mirrors``) as
  ``<owner>+<name>/repo``, ``<owner>+<name>`` or ``<owner>+<name>.git`` (bare or not);
  without one holding the base commit the task stops with one EvalError line.
- **Queries** (``mine_project``): the non-merge commits of ``base..head``, oldest first.
  A commit is skipped (the reason counted) when ``llmc.gitlog.skip_reason`` says so
  (merge, revert, version bump, formatting only, fewer than three words) or its subject,
  cleaned by ``gitlog.clean_subject``, is trivial (typo / spelling / wording fixes,
  pre-commit or dependency updates, "Update README.md"-style subjects naming only a file;
  conventional ``ci``, ``build``, ``deps``, ``test``, ``style``, ``chore(deps)``
  commits), when it changes more than ``MAX_FILES`` files, when it changes a source or
  documentation file the base snapshot does not have (it adds the very thing the subject
  names: the corpus cannot answer it), or when none of the files it changed that exist
  in the base snapshot and llmc would index there is source code or documentation. The
  query is the cleaned subject alone (no body; ``subject_query``: also without ``[tag]``
  prefixes, an emptied ``(fixes )`` or a trailing ``closes``); a subject seen before in
  the project is dropped.
- **Judgments, file level:** each changed file present (and indexable) in the base
  snapshot: grade 3 for source code (a code language other than configuration formats:
  JSON, YAML, TOML, INI, XML, make, Dockerfile...) outside tests; grade 3 for
  documentation (Markdown, reStructuredText) when the commit changed no source file,
  else grade 2; grade 1 for tests, configuration files and project-process documents
  (CONTRIBUTING, SECURITY, Release-Process, code of conduct, governance...). Changelogs, authors, licence
  and lock files are never judged (``gitlog.never_judged``). Intent: ``code`` when
  source changed and no documentation, ``docs`` when only documentation (besides tests
  and configuration), ``mixed`` when both.
- **Sample:** the first ``MAX_QUERIES`` (60) kept commits after the base, so the
  judged files are as close as possible to the corpus. ``--max-queries`` takes the first
  N of those.
- **Scoring, file level:** a system's spans are deduplicated by file in rank order (a
  file counts once, at the rank of its best span); MRR@10, nDCG@10, Hit@5 and Code@3 are
  computed over those files (``FileLevelSearcher``). Each system is asked for
  ``SPANS_PER_QUERY`` spans so that ten distinct files are usually there.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lab.protocol.commit_queries import (  # re-exported: callers and tests use commits
    CONFIG,
    DOCS,
    MAX_FILES,
    MAX_QUERIES,
    SOURCE,
    TESTS,
    Mined,
    commit_skip_reason,
    file_class,
    judge_commit,
    mine_commits,
    subject_query,
)
from llmc.errors import EvalError
from llmc.eval.queries import EvalQuery, load_queries, write_eval_queries

log = logging.getLogger(__name__)

TASK = "commits"
TASK_VERSION = "1"
SETS_DIR = Path(__file__).parent / "commits"
PROJECTS_FILE = SETS_DIR / "projects.json"
MIRRORS_ENV = "LLMC_MIRRORS"
SPANS_PER_QUERY = 50
SNAPSHOT_MARKER = ".llmc-commits-base"


# -- pinned sets --------------------------------------------------------------------------
@dataclass(frozen=True)
class CommitProject:
    """One project's pinned history: where it lives, its base and head, its query file."""

    name: str
    repo: str  # https://github.com/owner/name
    base: str  # 40 hex: the corpus
    head: str  # 40 hex: commits mined from base..head
    base_ref: str = ""  # a tag naming the base, when it has one
    mined: dict = field(default_factory=dict, compare=False)  # read / skipped / kept

    @property
    def mirror_name(self) -> str:
        parts = self.repo.rstrip("/").removesuffix(".git").split("/")
        return f"{parts[-2]}+{parts[-1]}"

    @property
    def queries_path(self) -> Path:
        return SETS_DIR / f"{self.name}.jsonl"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "repo": self.repo, "base": self.base}
        if self.base_ref:
            out["base_ref"] = self.base_ref
        out["head"] = self.head
        if self.mined:
            out["mined"] = self.mined
        return out


def _is_sha(value: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{40}", value))


def parse_commit_projects(doc: dict) -> dict[str, CommitProject]:
    """The projects of a ``commits/projects.json`` document, checked."""
    from llmc.eval.projects import RESERVED

    out: dict[str, CommitProject] = {}
    for i, row in enumerate(doc.get("projects", [])):
        where = f"commits/projects.json: projects[{i}]"
        try:
            cp = CommitProject(
                str(row["name"]), str(row["repo"]), str(row["base"]), str(row["head"]),
                str(row.get("base_ref", "")), dict(row.get("mined", {})),
            )  # fmt: skip
        except (KeyError, TypeError) as e:
            raise EvalError(f"{where}: missing key {e}") from None
        if not (_is_sha(cp.base) and _is_sha(cp.head)):
            raise EvalError(f"{where}: base and head must be 40-hex commit ids")
        if not cp.repo.startswith("https://") or cp.repo.count("/") < 4:
            raise EvalError(f"{where}: repo must be an https URL ending in owner/name")
        if cp.name.lower() in RESERVED:
            raise EvalError(f"{where}: {cp.name} is reserved for independent evaluation")
        out[cp.name.lower()] = cp
    return out


def commit_projects(path: Path | None = None) -> dict[str, CommitProject]:
    """Every pinned commit set, by lower-cased project name ({} when the file is absent)."""
    path = path or PROJECTS_FILE
    if not path.is_file():
        return {}
    return parse_commit_projects(json.loads(path.read_text(encoding="utf-8")))


def write_commit_projects(projects: Iterable[CommitProject], path: Path | None = None) -> None:
    path = path or PROJECTS_FILE
    rows = sorted((p.to_json() for p in projects), key=lambda r: r["name"])
    doc = {"task": TASK, "task_version": TASK_VERSION, "projects": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load_commit_queries(cp: CommitProject, max_queries: int | None = None) -> list[EvalQuery]:
    """The pinned queries of ``cp`` (the first ``max_queries``: they are oldest first)."""
    queries = load_queries(cp.queries_path)
    return queries[:max_queries] if max_queries else queries


# -- mirrors and the base snapshot --------------------------------------------------------
def _git(git_dir: Path, *args: str, text: bool = True) -> Any:
    try:
        out = subprocess.run(
            ["git", "--git-dir", str(git_dir), "-c", "core.quotepath=off", *args],
            capture_output=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise EvalError(f"git failed: {e}") from e
    if out.returncode != 0:
        msg = out.stderr.decode("utf-8", "replace").strip().splitlines()
        raise EvalError(f"git {args[0]} failed in {git_dir}: {msg[-1] if msg else out.returncode}")
    return out.stdout.decode("utf-8", "replace") if text else out.stdout


def _git_dir_of(path: Path) -> Path | None:
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path  # bare
    if (path / ".git").is_dir():
        return path / ".git"
    return None


def _has_commit(git_dir: Path, sha: str) -> bool:
    try:
        _git(git_dir, "cat-file", "-e", f"{sha}^{{commit}}")
    except EvalError:
        return False
    return True


def mirrors_dir(cache_dir: Path | None = None) -> Path:
    """Where mirrors are looked up: ``$LLMC_MIRRORS``, else ``<eval cache>/mirrors``."""
    env = os.environ.get(MIRRORS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    if cache_dir is None:
        from llmc.config import load_config
        from llmc.eval.projects import default_cache_dir

        cache_dir = default_cache_dir(load_config(None).eval.cache_dir)
    return cache_dir / "mirrors"


def find_mirror(cp: CommitProject, mirrors: Path) -> Path:
    """The git directory of a local mirror of ``cp.repo`` holding its base (and head)."""
    owner_name = cp.mirror_name
    for cand in (
        mirrors / owner_name / "repo",
        mirrors / owner_name,
        mirrors / f"{owner_name}.git",
    ):
        git_dir = _git_dir_of(cand)
        if git_dir is not None and _has_commit(git_dir, cp.base):
            return git_dir
    raise EvalError(
        f"commits task, {cp.name}: no git mirror of {cp.repo} holding base commit "
        f"{cp.base[:12]} under {mirrors} (clone one: git clone --mirror {cp.repo} "
        f"{mirrors / owner_name}; or set {MIRRORS_ENV})"
    )


def _safe_extract(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = []
        for m in tar.getmembers():
            name = m.name
            if name.startswith("/") or ".." in Path(name).parts:
                raise EvalError(f"git archive: unsafe member {name!r}")
            if m.issym() or m.islnk() or not (m.isfile() or m.isdir()):
                continue  # symlinks and specials: the snapshot keeps regular files only
            members.append(m)
        tar.extractall(dest, members=members, filter="data")


def base_snapshot(git_dir: Path, base: str, dest: Path) -> Path:
    """``git archive <base>`` unpacked at ``dest`` (reused when its marker names ``base``),
    made its own git work tree; regular files only (symlinks are left out)."""
    from lab.protocol.corpus import replace_corpus

    marker = dest / SNAPSHOT_MARKER
    want = f"{TASK_VERSION} {base}"
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == want:
        return dest
    data = _git(git_dir, "archive", "--format=tar", base, text=False)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".snapshot-", dir=dest.parent) as tmp:
        out = Path(tmp) / "corpus"
        out.mkdir()
        _safe_extract(data, out)
        replace_corpus(out, dest, SNAPSHOT_MARKER, want)
    log.info("unpacked %s at %s", base[:12], dest)
    return dest


def indexable_files(root: Path) -> set[str]:
    """The files llmc's walker would index under ``root`` (default index config)."""
    from llmc.config import IndexConfig
    from llmc.index.walk import walk

    return {f.path for f in walk(root, IndexConfig()).files}


# -- pinning a project --------------------------------------------------------------------
def pick_base(git_dir: Path, head: str, after: int = 250) -> tuple[str, str]:
    """A base about ``after`` non-merge commits before ``head`` on its first-parent line:
    the newest tag at or before that point when one is within another ``after`` commits,
    else that commit. Returns (sha, tag or "")."""
    line = _git(git_dir, "rev-list", "--first-parent", head).split()
    point = line[-1]
    for sha in line[::5]:
        n = int(_git(git_dir, "rev-list", "--count", "--no-merges", f"{sha}..{head}").strip())
        if n >= after:
            point = sha
            break
    try:
        tag = _git(git_dir, "describe", "--tags", "--abbrev=0", point).strip()
    except EvalError:
        tag = ""
    if tag:
        tag_sha = _git(git_dir, "rev-parse", f"{tag}^{{commit}}").strip()
        extra = int(_git(git_dir, "rev-list", "--count", "--no-merges", f"{tag_sha}..{point}"))
        if extra <= after:
            return tag_sha, tag
    return point, ""


def mine_project(
    name: str,
    repo: str,
    git_dir: Path,
    work: Path,
    *,
    base: str | None = None,
    head: str = "HEAD",
    after: int = 250,
    max_queries: int = MAX_QUERIES,
) -> CommitProject:
    """Pin a project: choose its base (``pick_base`` unless given), unpack it, mine its
    queries into ``commits/<name>.jsonl``; returns the entry for ``commits/projects.json``."""
    head_sha = _git(git_dir, "rev-parse", f"{head}^{{commit}}").strip()
    tag = ""
    if base is None:
        base, tag = pick_base(git_dir, head_sha, after)
    else:
        base = _git(git_dir, "rev-parse", f"{base}^{{commit}}").strip()
        tags = _git(git_dir, "tag", "--points-at", base).split()
        tag = sorted(tags)[0] if tags else ""
    snapshot = base_snapshot(git_dir, base, work / f"{name}-{base[:12]}" / "corpus")
    mined = mine_commits(
        git_dir, base, head_sha, indexable_files(snapshot), max_queries=max_queries
    )
    cp = CommitProject(name, repo, base, head_sha, tag, mined.summary())
    write_eval_queries(mined.queries, cp.queries_path)
    log.info("%s: %s", name, mined.summary())
    return cp


# -- running -------------------------------------------------------------------------------
def prepare(
    name: str, cache_dir: Path, max_queries: int
) -> tuple[CommitProject, Path, list[EvalQuery]]:
    """The pinned set of ``name``, its base snapshot (from a local mirror) and its queries."""
    cp = commit_projects().get(name.lower())
    if cp is None:
        raise EvalError(f"commits task: no pinned history for {name} (see {PROJECTS_FILE})")
    queries = load_commit_queries(cp, max_queries)
    git_dir = find_mirror(cp, mirrors_dir(cache_dir))
    corpus = base_snapshot(
        git_dir,
        cp.base,
        cache_dir / "protocol" / "commits" / f"{cp.name}-{cp.base[:12]}" / "corpus",
    )
    return cp, corpus, queries


def dedupe_by_file(results: Sequence[Any], k: int) -> list[Any]:
    """The first result of each file, in rank order, at most ``k``."""
    out, seen = [], set()
    for r in results:
        if r.path in seen:
            continue
        seen.add(r.path)
        out.append(r)
        if len(out) >= k:
            break
    return out


class FileLevelSearcher:
    """A searcher whose results are files: it asks ``inner`` for ``spans`` spans and keeps
    each file's best-ranked one (so a file counts once, at the rank of its best span)."""

    def __init__(self, inner: Any, spans: int = SPANS_PER_QUERY):
        self.inner = inner
        self.spans = spans

    def warm(self) -> None:
        warm = getattr(self.inner, "warm", None)
        if callable(warm):
            warm()

    def search(self, query: str, k: int | None = None) -> Any:
        want = k or 10
        response = self.inner.search(query, k=max(self.spans, want))
        return SimpleNamespace(
            results=dedupe_by_file(response.results, want),
            route=getattr(response, "route", None),
        )

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.protocol.commits NAME=https://github.com/owner/repo[@BASE] ...``:
    (re)pin those projects from the mirrors under ``$LLMC_MIRRORS``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m lab.protocol.commits")
    ap.add_argument("specs", nargs="+", metavar="NAME=URL[@BASE]")
    ap.add_argument("--after", type=int, default=250, help="commits between base and head")
    ap.add_argument("--max-queries", type=int, default=MAX_QUERIES)
    ap.add_argument("--work", type=Path, default=None, help="where base snapshots go")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    mirrors = mirrors_dir()
    work = args.work or Path(tempfile.gettempdir()) / "llmc-commits-mine"
    pinned = commit_projects()
    for spec in args.specs:
        name, _, rest = spec.partition("=")
        url, _, base = rest.partition("@")
        probe = CommitProject(name, url, "0" * 40, "0" * 40)
        git_dir = next(
            (
                g
                for c in (mirrors / probe.mirror_name / "repo", mirrors / probe.mirror_name)
                if (g := _git_dir_of(c)) is not None
            ),
            None,
        )
        if git_dir is None:
            raise EvalError(f"{name}: no mirror {probe.mirror_name} under {mirrors}")
        cp = mine_project(
            name, url, git_dir, work, base=base or None, after=args.after,
            max_queries=args.max_queries,
        )  # fmt: skip
        pinned[name.lower()] = cp
        print(f"{name}: base {cp.base[:12]} {cp.base_ref} head {cp.head[:12]} {cp.mined}")
    write_commit_projects(pinned.values())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "CONFIG",
    "DOCS",
    "MAX_FILES",
    "MAX_QUERIES",
    "MIRRORS_ENV",
    "PROJECTS_FILE",
    "SOURCE",
    "SPANS_PER_QUERY",
    "TASK",
    "TESTS",
    "CommitProject",
    "FileLevelSearcher",
    "Mined",
    "base_snapshot",
    "commit_projects",
    "commit_skip_reason",
    "dedupe_by_file",
    "file_class",
    "find_mirror",
    "indexable_files",
    "judge_commit",
    "load_commit_queries",
    "mine_commits",
    "mine_project",
    "mirrors_dir",
    "pick_base",
    "prepare",
    "subject_query",
]
