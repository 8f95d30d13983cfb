"""The walker: git's file list or .gitignore rules, and a reason for every skipped file."""

from __future__ import annotations

import os

from repo_fixtures import make_repo

from llmc.config import IndexConfig
from llmc.index.walk import read_text, walk

BAD_FILES: dict[str, str | bytes] = {
    "src/ok.py": "def ok():\n    return 1\n",
    "src/big.py": "x = 1\n" * 400_000,  # ~2.4 MB
    "src/blob.bin": b"\x00\x01\x02binary",
    "src/latin1.txt": "café".encode("latin-1"),
    "src/empty.py": "",
    ".env": "SECRET=1\n",
    ".env.production": "SECRET=2\n",
    "deploy/server.pem": "-----BEGIN CERTIFICATE-----\n",
    "keys/id_rsa": "-----BEGIN RSA PRIVATE KEY-----\n",
    "keys/app.key": "k\n",
    "certs/bundle.p12": "p12\n",
    "node_modules/lib/index.js": "module.exports = 1;\n",
    "build/out.js": "var x;\n",
    "pkg/__pycache__/m.py": "x = 1\n",
    "ignored.log": "log line\n",
    ".gitignore": "*.log\n",
}


def _reasons(result) -> dict[str, str]:
    return {s.path: s.reason for s in result.skipped}


def _check(result, root) -> None:
    paths = {f.path for f in result.files}
    reasons = _reasons(result)
    assert "src/ok.py" in paths
    assert reasons["src/big.py"] == "too-large"
    for secret in (
        ".env",
        ".env.production",
        "deploy/server.pem",
        "keys/id_rsa",
        "keys/app.key",
        "certs/bundle.p12",
    ):
        assert reasons[secret] == "secret", secret
        assert secret not in paths
    assert reasons["node_modules/"] == "vendored-or-generated-dir"
    assert reasons["build/"] == "vendored-or-generated-dir"
    assert reasons["pkg/__pycache__/"] == "vendored-or-generated-dir"
    assert "ignored.log" not in paths and "ignored.log" not in reasons
    # content checks happen when a changed file is read
    assert read_text(root, "src/blob.bin").skipped.reason == "binary"
    assert read_text(root, "src/latin1.txt").skipped.reason == "undecodable"
    assert read_text(root, "src/empty.py").skipped.reason == "empty"
    assert read_text(root, "src/ok.py").text.startswith("def ok")


def test_git_repo_uses_git_file_list(tmp_path):
    root = make_repo(tmp_path / "r", BAD_FILES, use_git=False)
    from repo_fixtures import git

    git(root, "init", "-q")
    # node_modules etc. are untracked and not ignored: git lists them, the walker skips them
    result = walk(root, IndexConfig())
    assert result.used_git
    _check(result, root)


def test_plain_directory_uses_gitignore_rules(tmp_path):
    root = make_repo(
        tmp_path / "r",
        {
            **BAD_FILES,
            "sub/.gitignore": "local.txt\n",
            "sub/local.txt": "x\n",
            "sub/kept.txt": "y\n",
        },
        use_git=False,
    )
    result = walk(root, IndexConfig())
    assert not result.used_git
    _check(result, root)
    paths = {f.path for f in result.files}
    assert "sub/kept.txt" in paths and "sub/local.txt" not in paths


def test_symlink_leaving_the_repo_is_skipped(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    root = make_repo(tmp_path / "r", {"a.py": "a = 1\n"}, use_git=False)
    os.symlink(outside, root / "link.py")
    os.symlink(root / "a.py", root / "inner_link.py")
    result = walk(root, IndexConfig())
    reasons = _reasons(result)
    assert reasons["link.py"] == "symlink-outside-repo"
    assert "inner_link.py" in {f.path for f in result.files}


def test_include_and_exclude_globs(tmp_path):
    root = make_repo(
        tmp_path / "r",
        {"src/a.py": "a\n", "src/gen/b.py": "b\n", "docs/c.md": "# c\n", "d.txt": "d\n"},
        use_git=False,
    )
    cfg = IndexConfig(include=["src/", "docs/*.md"], exclude=["src/gen/"])
    result = walk(root, cfg)
    assert sorted(f.path for f in result.files) == ["docs/c.md", "src/a.py"]
    reasons = _reasons(result)
    assert reasons["src/gen/b.py"] == "excluded-by-config"
    assert reasons["d.txt"] == "excluded-by-config"


def test_secrets_can_be_opted_in(tmp_path):
    root = make_repo(tmp_path / "r", {".env": "A=1\n", "a.py": "a\n"}, use_git=False)
    result = walk(root, IndexConfig(index_secrets=True))
    assert ".env" in {f.path for f in result.files}


def test_directory_ignored_by_an_enclosing_repo_is_walked_by_its_own_rules(tmp_path):
    outer = make_repo(tmp_path / "outer", {".gitignore": "cache/\n", "o.py": "o\n"})
    inner = outer / "cache" / "project"
    inner.mkdir(parents=True)
    (inner / "m.py").write_text("def m():\n    pass\n")
    result = walk(inner, IndexConfig())
    assert not result.used_git
    assert [f.path for f in result.files] == ["m.py"]


def test_malformed_gitignore_line_is_ignored_like_git_does(tmp_path):
    root = make_repo(
        tmp_path / "r", {".gitignore": "!\n*.log\n", "a.py": "a\n", "b.log": "b\n"}, use_git=False
    )
    result = walk(root, IndexConfig())
    assert sorted(f.path for f in result.files) == [".gitignore", "a.py"]
