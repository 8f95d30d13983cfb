"""Find the files to index, and say why each other file is skipped.

In a git work tree the file list is git's own (tracked plus untracked-not-ignored), so
llmc sees exactly what the developer sees. Elsewhere ``.gitignore`` files are honoured
with pathspec. This step costs one ``stat`` per file; content checks (binary,
undecodable, generated, minified) happen only for files whose stat changed (see
``read_text``). Generated, minified and translation files are judged by
``llmc.index.generated``: here from their path, in ``read_text`` from the text it read.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

from llmc.config import IndexConfig
from llmc.index import secrets
from llmc.index.generated import Detector, drop_inline_source_map
from llmc.paths import STATE_DIR
from llmc.safe_read import OutsideRepo, read_inside, within
from llmc.types import SkippedFile

log = logging.getLogger(__name__)

SECRET_PATTERNS = [
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    ".git-credentials",
    "credentials",
    "credentials.json",
    "credentials.yml",
    "credentials.yaml",
    "secrets.json",
    "secrets.yml",
    "secrets.yaml",
    "secrets.toml",
    "*.secret",
    "*.secrets",
    "service-account*.json",
    "*.tfstate",
    "terraform.tfstate*",
    "*.tfvars",
    ".terraformrc",
    ".vault-token",
    ".dockercfg",
    "kubeconfig",
    "*.kubeconfig",
    "*.ppk",
    ".s3cfg",
    ".boto",
    "*-key.json",
    "deploy_key",
    ".github_token",
]
# Matched against the end of a path: a name that is a secret only in its directory.
SECRET_PATHS = (".docker/config.json", ".kube/config")

# Reasons, as counted in the summary and printed by `llmc index -v`.
VENDORED = "vendored-or-generated-dir"
SECRET = "secret"
EXCLUDED = "excluded-by-config"
TOO_LARGE = "too-large"
BINARY = "binary"
UNDECODABLE = "undecodable"
SYMLINK_OUTSIDE = "symlink-outside-repo"
OUTSIDE = "outside-repo"  # a directory on its path, or the file opened, leads out of the repo
BAD_NAME = "undecodable-name"  # not UTF-8: no output or database could hold it as it is
SECRET_CONTENT = secrets.SECRET_CONTENT
UNREADABLE = "unreadable"
NOT_A_FILE = "not-a-regular-file"
EMPTY = "empty"


@dataclass(frozen=True)
class WalkedFile:
    path: str  # repo-relative, posix
    size: int
    mtime_ns: int


@dataclass
class WalkResult:
    files: list[WalkedFile]
    skipped: list[SkippedFile]
    used_git: bool
    detector: Detector | None = None  # the content rules, knowing every path the walk saw


def _git_files(root: Path) -> list[str] | None:
    """git's view of ``root``, when ``root`` is the top of a work tree (else None)."""
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
            return None
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    names = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    return sorted({n for n in names if n})


def _gitignore_files(root: Path, skip_dirs: set[str]) -> list[str]:
    """Walk without git, honouring every .gitignore relative to its own directory."""
    specs: list[tuple[str, pathspec.PathSpec]] = []
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        if ".gitignore" in filenames:
            try:
                lines = (Path(dirpath) / ".gitignore").read_text("utf-8", "replace").splitlines()
                specs.append((rel_dir, _gitignore_spec(lines)))
            except OSError:
                pass

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1 :] if base else rel
                if spec.match_file(sub + "/" if is_dir else sub):
                    return True
            return False

        keep = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not rel_dir and d in (".git", STATE_DIR):
                continue  # the VCS's and llmc's own state: not content, never reported
            if d in skip_dirs or d == ".git":
                out.append(rel + "/")  # reported as a vendored dir below
            elif not ignored(rel, True):
                keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            rel = f"{rel_dir}/{f}" if rel_dir else f
            if not ignored(rel, False):
                out.append(rel)
    return out


def _gitignore_spec(lines: list[str]) -> pathspec.PathSpec:
    """A spec of the valid lines: git ignores a malformed pattern (e.g. a bare ``!``)."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # noqa: BLE001 - pathspec raises its own error types per version
        valid = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except Exception:  # noqa: BLE001
                continue
            valid.append(line)
        return pathspec.GitIgnoreSpec.from_lines(valid)


def is_secret(rel_path: str) -> bool:
    if rel_path.endswith(SECRET_PATHS) and (
        rel_path in SECRET_PATHS or any(rel_path.endswith("/" + p) for p in SECRET_PATHS)
    ):
        return True
    return _secret_name(rel_path.rsplit("/", 1)[-1])


@functools.lru_cache(maxsize=1 << 16)
def _secret_name(name: str) -> bool:
    """The fixed patterns match a file's name alone; the daemon walks the same names on
    every reindex (pathspec's per-name matching was ~0.1 s of each walk of Django)."""
    return _secret_spec().match_file(name)


_SECRET_SPEC: pathspec.PathSpec | None = None


def _secret_spec() -> pathspec.PathSpec:
    global _SECRET_SPEC
    if _SECRET_SPEC is None:
        _SECRET_SPEC = pathspec.GitIgnoreSpec.from_lines(SECRET_PATTERNS)
    return _SECRET_SPEC


def walk(root: Path, cfg: IndexConfig) -> WalkResult:
    """List indexable files under ``root`` with their stat; every other file gets a reason."""
    root = root.resolve()
    skip_dirs = set(cfg.skip_dirs)
    names = _git_files(root)
    used_git = names is not None
    if names is None:
        names = _gitignore_files(root, skip_dirs)
    include = pathspec.GitIgnoreSpec.from_lines(cfg.include) if cfg.include else None
    detector = Detector(cfg, names, root)
    exclude = pathspec.GitIgnoreSpec.from_lines(cfg.exclude) if cfg.exclude else None
    files: list[WalkedFile] = []
    skipped: list[SkippedFile] = []
    reported_dirs: set[str] = set()
    real_dir = _RealDirs(root)
    for rel in names:
        if not _decodable(rel):
            skipped.append(SkippedFile(display_name(rel), BAD_NAME, "the name is not UTF-8"))
            continue
        if rel.endswith("/"):
            if rel not in reported_dirs:
                reported_dirs.add(rel)
                skipped.append(SkippedFile(rel, VENDORED, "directory not walked"))
            continue
        parts = rel.split("/")
        vendored = next((p for p in parts[:-1] if p in skip_dirs), None)
        if vendored is not None:
            prefix = "/".join(parts[: parts.index(vendored) + 1]) + "/"
            if prefix not in reported_dirs:
                reported_dirs.add(prefix)
                skipped.append(SkippedFile(prefix, VENDORED, f"{vendored}/ is in index.skip_dirs"))
            continue
        if not cfg.index_secrets and is_secret(rel):
            skipped.append(SkippedFile(rel, SECRET, "matches a secret-file pattern"))
            continue
        if exclude is not None and exclude.match_file(rel):
            skipped.append(SkippedFile(rel, EXCLUDED, "matches index.exclude"))
            continue
        if include is not None and not include.match_file(rel):
            skipped.append(SkippedFile(rel, EXCLUDED, "does not match index.include"))
            continue
        verdict = detector.by_path(rel)
        if verdict is not None:
            skipped.append(SkippedFile(rel, verdict.reason, verdict.detail))
            continue
        outside = real_dir.outside(rel.rpartition("/")[0])
        if outside is not None:
            skipped.append(SkippedFile(rel, OUTSIDE, outside))
            continue
        full = root / rel
        try:
            st = full.lstat()
        except OSError:
            continue  # deleted in the work tree but still in git's index: not a file now
        if full.is_symlink():
            try:
                target = full.resolve(strict=True)
            except (OSError, RuntimeError):
                skipped.append(SkippedFile(rel, UNREADABLE, "broken symlink"))
                continue
            if not target.is_relative_to(root):
                skipped.append(SkippedFile(rel, SYMLINK_OUTSIDE, f"points to {target}"))
                continue
            try:
                st = target.stat()
            except OSError:
                skipped.append(SkippedFile(rel, UNREADABLE, "cannot stat symlink target"))
                continue
            if not target.is_file():
                skipped.append(SkippedFile(rel, NOT_A_FILE, "symlink to a directory"))
                continue
        elif not full.is_file():
            skipped.append(SkippedFile(rel, NOT_A_FILE, "not a regular file"))
            continue
        if st.st_size > cfg.max_file_size:
            skipped.append(SkippedFile(rel, TOO_LARGE, f"{st.st_size} bytes > {cfg.max_file_size}"))
            continue
        files.append(WalkedFile(rel, st.st_size, st.st_mtime_ns))
    return WalkResult(files, skipped, used_git, detector)


class _RealDirs:
    """Whether each directory of the walk resolves inside the root, every component
    followed (git lists ``etc/passwd`` after ``etc`` became a symlink to ``/etc``); one
    ``realpath`` per directory, not per file."""

    def __init__(self, root: Path):
        self.base = str(root)
        self._seen: dict[str, str | None] = {"": None}

    def outside(self, rel_dir: str) -> str | None:
        """None when ``rel_dir`` is inside the root; else why not, for the skip's detail."""
        if rel_dir not in self._seen:
            real = os.path.realpath(os.path.join(self.base, rel_dir))
            inside = within(real, self.base)
            self._seen[rel_dir] = None if inside else f"{rel_dir}/ resolves to {real}"
        return self._seen[rel_dir]


def _decodable(rel: str) -> bool:
    """Whether a name decoded with ``surrogateescape`` was UTF-8 (no lone surrogate)."""
    if rel.isascii():
        return True
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def display_name(rel: str) -> str:
    """A name that is not UTF-8, printable: its bad bytes as ``\\xff`` escapes."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class FileText:
    text: str | None
    skipped: SkippedFile | None


SKIP_SECRETS, REDACT_SECRETS, KEEP_SECRETS = "skip", "redact", "keep"


def secrets_mode(cfg: IndexConfig) -> str:
    """What ``read_text`` does with a file holding a secret, by the config: skip it (the
    default; documentation pages are redacted instead, ``DOC_PAGES``), index it redacted
    (``redact_secrets``), or as it is (``index_secrets``)."""
    if cfg.index_secrets:
        return KEEP_SECRETS
    return REDACT_SECRETS if getattr(cfg, "redact_secrets", False) else SKIP_SECRETS


def skip_policy(cfg: IndexConfig) -> str:
    """The content rules an index is built under (generated files, secrets and what is done
    with them): when it changes, the indexer reads every file again."""
    return f"{Detector(cfg).policy};{secrets.policy()}:{secrets_mode(cfg)}"


def read_text(
    root: Path, rel: str, detector: Detector | None = None, secrets_as: str = SKIP_SECRETS
) -> FileText:
    """Read a file as UTF-8 text, or say why it is not indexable text; with a
    ``detector``, a generated or minified file is not indexable either (judged from the
    text read here, so no file is read twice). An inline source map's payload is left out
    of the text (``generated.drop_inline_source_map``; lines keep their numbers). The file
    is opened only inside the root (``safe_read``); a text with a secret is skipped, or
    redacted, as ``secrets_as`` says (``secrets_mode``)."""
    try:
        data = read_inside(root, rel)
    except OutsideRepo as e:
        return FileText(None, SkippedFile(rel, OUTSIDE, e.strerror or str(e)))
    except OSError as e:
        return FileText(None, SkippedFile(rel, UNREADABLE, e.strerror or str(e)))
    if b"\0" in data[:8192]:
        return FileText(None, SkippedFile(rel, BINARY, "NUL byte in the first 8 KiB"))
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return FileText(None, SkippedFile(rel, UNDECODABLE, f"not UTF-8 at byte {e.start}"))
    if not text.strip():
        return FileText(None, SkippedFile(rel, EMPTY, "no text"))
    if detector is not None:
        verdict = detector.by_content(rel, text)
        if verdict is not None:
            return FileText(None, SkippedFile(rel, verdict.reason, verdict.detail))
    text = drop_inline_source_map(rel, text)
    if secrets_as != KEEP_SECRETS:
        found = secrets.scan(rel, text)
        if found and (secrets_as == REDACT_SECRETS or _documentation(rel)):
            log.info("%s: %s redacted", rel, secrets.describe(found))
            return FileText(secrets.redact(text, found), None)
        if found:
            return FileText(None, SkippedFile(rel, SECRET_CONTENT, secrets.describe(found)))
    return FileText(text, None)


# Pages whose secrets are redacted even when files with secrets are skipped: a docs page that
# shows one example ``SECRET_KEY = "..."`` would otherwise lose all of its text (a config
# reference, a deployment tutorial). The value is still kept out of the index.
DOC_PAGES = (".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc")


def _documentation(rel: str) -> bool:
    return rel.lower().endswith(DOC_PAGES)


def skipped_paths(skipped: Iterable[SkippedFile]) -> set[str]:
    return {s.path for s in skipped}


__all__ = [
    "FileText",
    "WalkResult",
    "WalkedFile",
    "display_name",
    "is_secret",
    "read_text",
    "secrets_mode",
    "skip_policy",
    "walk",
]
