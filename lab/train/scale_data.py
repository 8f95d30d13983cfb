"""Training data at scale (issue 37): public repositories pinned in a manifest, mined into
pairs of every query kind the product answers, kept clear of every evaluation project.

    python -m lab.train.scale_data pin OWNER/NAME ... [--mirrors DIR]
    python -m lab.train.scale_data mine [--mirrors DIR] [--out DIR] [--only NAME,...]

``pin`` adds repositories (git mirrors from the ``fetch`` tool, under ``--mirrors``,
default ``$LLMC_MIRRORS``) to ``lab/train/scale_manifest.json``: each one's head commit, a
base about 250 commits before it (``commits.pick_base``), the sha256 of ``git archive`` at
the base (the corpus mined) and its main language. A repository whose name is reserved, a
validation or test project of the protocol or an evaluation commit history is refused
(``check_clean``).

``mine`` unpacks each base and writes, under ``--out`` (a cache directory, never the
repository or the wheel), ``<name>/pairs.jsonl`` (a docstring's or doc comment's first
sentence → its function with that documentation removed, in Python, JavaScript/TypeScript,
Go, Rust and Java; a section title or first sentence → the section, each
with a BM25 hard negative from the same repository: ``embedder_data``'s miner),
``<name>/commits.jsonl`` (commit subjects of base..head → the files they changed:
``commit_queries``) and ``<name>/reports.jsonl`` (long commit messages and merged pull
requests → their files: ``report_queries``), and ``counts.json`` per kind and language
(each repository's too: a run again skips what is mined at the pinned commits).

Decontamination, beyond names: every file of every evaluation project's unpacked archive
and pinned snapshot under the eval cache is hashed (sha256 of its bytes); a pair whose
answer lies in a file with one of those hashes is dropped, and such a file is never an
answer of a commit or report query; nor is a file under a folder named after a reserved or
evaluation project (a vendored copy). Near duplicates (a file edited slightly) are not
caught; the checks by name and owner are the line against those.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tarfile
from collections import Counter
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

MANIFEST = Path(__file__).with_name("scale_manifest.json")
LANGUAGES = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".ts": "typescript",
             ".tsx": "typescript", ".go": "go", ".rs": "rust", ".java": "java"}  # fmt: skip
MAX_HASHED_BYTES = 2_000_000


@dataclass(frozen=True)
class Source:
    """One pinned repository of the manifest."""

    repo: str  # owner/name
    head: str  # 40 hex: commits mined from base..head
    base: str  # 40 hex: the corpus
    archive_sha256: str  # of `git archive --format=tar <base>`
    language: str

    @property
    def name(self) -> str:
        return self.repo.replace("/", "+")


def read_manifest(path: Path = MANIFEST) -> list[Source]:
    if not path.is_file():
        return []
    return [Source(**row) for row in json.loads(path.read_text(encoding="utf-8"))["sources"]]


def write_manifest(sources: list[Source], path: Path = MANIFEST) -> None:
    doc = {"note": "issue 37's training repositories, pinned (lab/train/scale_data.py)",
           "sources": [asdict(s) for s in sorted(sources, key=lambda s: s.repo.lower())]}  # fmt: skip
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def evaluation_names() -> frozenset[str]:
    """Names no training repository may carry: reserved, every validation and test project
    of the protocol, every evaluation commit history's repository (its train split is what
    training may read)."""
    from lab.protocol.commits import commit_projects
    from lab.protocol.splits import protocol_projects
    from lab.train.projects import reserved_names

    names = set(reserved_names())
    names |= {p.name.lower() for p in protocol_projects() if p.split != "train"}
    for cp in commit_projects().values():
        names |= {cp.name.lower(), cp.repo.rstrip("/").split("/")[-1].lower()}
    return frozenset(n.replace("_", "-") for n in names)


# owners of evaluation projects that have no pinned commit history (so no repository URL
# in lab/protocol/commits/projects.json): their repositories are as near as the others'
OWNERS_WITHOUT_HISTORY = {"ladjs": "superagent", "koajs": "koa", "websockets": "ws",
                          "grantjenks": "sortedcontainers", "sethmmorton": "natsort",
                          "axios": "axios"}  # fmt: skip


# the owners of the reserved projects (pallets, Django, requests' psf, ...) and their authors
RESERVED_OWNERS = frozenset({"pallets", "pallets-eco", "mitsuhiko", "django", "sympy",
                             "matplotlib", "scikit-learn", "pytest-dev", "sphinx-doc",
                             "astropy", "psf", "pylint-dev", "pydata", "mwaskom"})  # fmt: skip


def evaluation_owners() -> frozenset[str]:
    """The owners of the evaluation projects' repositories: their other repositories (a
    library's author's next one) are kept out too, as near relatives."""
    from lab.protocol.commits import commit_projects

    owners = {cp.repo.rstrip("/").split("/")[-2].lower() for cp in commit_projects().values()}
    return frozenset(owners | set(OWNERS_WITHOUT_HISTORY) | RESERVED_OWNERS)


def train_split_names() -> frozenset[str]:
    from lab.protocol.splits import protocol_projects

    return frozenset(p.name.lower() for p in protocol_projects() if p.split == "train")


def _stem(name: str) -> str:
    """A project's name without a language's mark: markdown-it-py is markdown-it's port,
    go-humanize humanize's."""
    for prefix in ("python-", "py-", "node-", "go-", "rust-"):
        name = name.removeprefix(prefix)
    for suffix in (".js", "-js", ".py", "-py", "-go", "-rs"):
        name = name.removesuffix(suffix)
    return name


def check_clean(repo: str, names: frozenset[str] | None = None) -> None:
    """Refuse ``repo`` when its name is an evaluation or reserved project's (or names a
    reserved one: ``flask-smorest``), or its owner owns an evaluation or reserved project
    (unless it is a project of the protocol's train split)."""
    from lab.train.projects import reserved_names
    from llmc.errors import TrainError

    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise TrainError(f"{repo!r} is not OWNER/NAME")
    plain = name.lower().replace("_", "-")
    base = _stem(plain)
    known = names or evaluation_names()
    if {plain, base} & (known | {_stem(n) for n in known}) or set(plain.split("-")) & set(
        reserved_names()
    ):
        raise TrainError(f"{repo}: an evaluation or reserved project, never trained on")
    if owner.lower() in evaluation_owners() and not {plain, base} & train_split_names():
        raise TrainError(f"{repo}: its owner's evaluation project is near, never trained on")


def mirror_of(repo: str, mirrors: Path) -> Path:
    from lab.protocol.commits import _git_dir_of
    from llmc.errors import TrainError

    stem = repo.replace("/", "+")
    for cand in (mirrors / stem / "repo", mirrors / stem, mirrors / f"{stem}.git"):
        git_dir = _git_dir_of(cand)
        if git_dir is not None:
            return git_dir
    raise TrainError(f"no git mirror of {repo} under {mirrors} (fetch it first)")


def pin(repo: str, mirrors: Path) -> Source:
    from lab.protocol.commits import _git, pick_base

    check_clean(repo)
    git_dir = mirror_of(repo, mirrors)
    head = _git(git_dir, "rev-parse", "HEAD^{commit}").strip()
    base, _ = pick_base(git_dir, head)
    archive = hashlib.sha256(_git(git_dir, "archive", "--format=tar", base, text=False))
    counts = Counter(
        LANGUAGES.get(Path(p).suffix, "")
        for p in _git(git_dir, "ls-tree", "-r", "--name-only", base).splitlines()
    )
    counts.pop("", None)
    language = counts.most_common(1)[0][0] if counts else "docs"
    return Source(repo, head, base, archive.hexdigest(), language)


def file_hash(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_HASHED_BYTES:
            return None
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def evaluation_hashes(eval_cache: Path) -> set[str]:
    """The content hash of every file under the eval cache (every evaluation project's
    unpacked archive, corpus and pinned snapshot)."""
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(eval_cache):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".llmc", "node_modules")]
        for f in filenames:
            h = file_hash(Path(dirpath) / f)
            if h is not None:
                out.add(h)
    return out


def _vendored(path: str) -> bool:
    """A file under a folder named after a reserved or evaluation project (a vendored copy,
    ``pip/_vendor/requests/``): never an answer."""
    return bool({part.lower() for part in Path(path).parts[:-1]} & _reserved_folders())


@lru_cache(maxsize=1)
def _reserved_folders() -> frozenset[str]:
    return evaluation_names() | {n.replace("-", "_") for n in evaluation_names()}


def _pairs(src: Source, root: Path, dirty: set[str], seed: int) -> list:
    from lab.train.embedder_data import _headers, pairs_of
    from llmc.learn.mine import CODE_LANGUAGES, mine_project

    rng = random.Random(f"{seed}:{src.name}")
    mined = mine_project(src.name, root, rng, n_hard=3, n_random=1, languages=CODE_LANGUAGES)
    path_of = {p.pid: p.path for p in mined.passages}
    mined = replace(mined, examples=[e for e in mined.examples if path_of[e.positive] not in dirty])
    return pairs_of(mined, _headers(root), rng)


def mine_source(src: Source, git_dir: Path, out: Path, clean: set[str], seed: int = 42) -> dict:
    """``src`` mined into ``out/<name>/``: its counts per kind."""
    from lab.protocol.commit_queries import mine_commits
    from lab.protocol.commits import base_snapshot, indexable_files
    from lab.protocol.report_queries import mine_reports
    from lab.train.embedder_data import write_jsonl
    from llmc.eval.queries import write_eval_queries
    from llmc.gitlog import read_commits

    root = base_snapshot(git_dir, src.base, out / "snapshots" / src.name)
    present = indexable_files(root)
    dirty = {p for p in present if file_hash(root / p) in clean or _vendored(p)}
    pairs = _pairs(src, root, dirty, seed)
    kept = present - dirty
    commits = mine_commits(git_dir, src.base, src.head, kept, max_queries=10**6)
    history = list(reversed(read_commits(git_dir, None, f"{src.base}..{src.head}")))
    reports = mine_reports(history, kept, git_dir=git_dir, max_queries=10**6)
    here = out / src.name
    write_jsonl(here / "pairs.jsonl", pairs)
    write_eval_queries(commits.queries, here / "commits.jsonl")
    write_eval_queries(reports.queries, here / "reports.jsonl")
    kinds = Counter(p.kind for p in pairs)
    counts = {"repo": src.repo, "head": src.head, "base": src.base, "language": src.language,
              "files": len(present), "contaminated_files": len(dirty),
              **{f"pairs:{k}": n for k, n in kinds.items()},
              "commits": len(commits.queries), "reports": len(reports.queries)}  # fmt: skip
    (here / "counts.json").write_text(json.dumps(counts) + "\n", encoding="utf-8")
    return counts


def _mined(src: Source, out: Path) -> dict | None:
    """``src``'s counts when ``out`` holds its mining at the pinned commits (a resumed run)."""
    try:
        counts = json.loads((out / src.name / "counts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return counts if (counts.get("head"), counts.get("base")) == (src.head, src.base) else None


def main(argv: list[str] | None = None) -> int:
    from lab.protocol.commits import mirrors_dir
    from llmc.config import load_config
    from llmc.corpora import default_cache_dir
    from llmc.errors import LlmcError
    from llmc.eval.projects import default_cache_dir as eval_cache_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("pin", "mine"))
    ap.add_argument("repos", nargs="*", help="pin: OWNER/NAME ...")
    ap.add_argument("--mirrors", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="default: the train cache")
    ap.add_argument("--only", default="", help="mine: comma-separated OWNER/NAME")
    args = ap.parse_args(argv)
    eval_cache = eval_cache_dir(load_config(None).eval.cache_dir)
    mirrors = args.mirrors or mirrors_dir(eval_cache)
    sources = {s.repo: s for s in read_manifest()}
    if args.action == "pin":
        for repo in args.repos:
            try:
                src = pin(repo, mirrors)
            except LlmcError as e:  # a mirror missing objects, a refused name: the rest go on
                print(f"{repo}: left out: {e}", file=sys.stderr)
                continue
            twin = next((s.repo for s in sources.values() if s.head == src.head), None)
            if twin is not None and twin != repo:  # a renamed repository fetched twice
                print(f"{repo}: the same history as {twin}, left out", file=sys.stderr)
                continue
            sources[repo] = src
            print(json.dumps(asdict(src)), file=sys.stderr)
        write_manifest(list(sources.values()))
        return 0
    out = args.out or default_cache_dir("train-scale")
    only = {r for r in args.only.split(",") if r}
    clean = evaluation_hashes(eval_cache)
    counts = []
    for src in sources.values():
        if only and src.repo not in only:
            continue
        check_clean(src.repo)
        done = _mined(src, out)
        try:
            counts.append(done or mine_source(src, mirror_of(src.repo, mirrors), out, clean))
        except (LlmcError, tarfile.TarError) as e:  # a mirror missing objects: the rest go on
            print(f"{src.repo}: not mined: {e}", file=sys.stderr)
            continue
        print(json.dumps(counts[-1]), file=sys.stderr)
        (out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
