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


# -- containment: every component of a path, and the file opened --------------------------


def _index(root, *args: str):
    from click.testing import CliRunner

    from llmc.cli import main

    return CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json", *args])


def _search_text(root, query: str) -> str:
    """The results of a search, as JSON text."""
    import json

    from click.testing import CliRunner

    from llmc.cli import main

    args = ["search", "--json", "--no-dense", "--no-hyde", "-k", "50", "--repo", str(root), query]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return json.dumps(json.loads(result.stdout)["results"])  # the query itself is echoed


def test_tracked_directory_replaced_by_a_symlink_out_of_the_repo_is_not_indexed(tmp_path):
    import json

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:glorbvexoutside:/root\n")
    root = make_repo(
        tmp_path / "r", {"etc/passwd": "placeholder\n", "a.py": "def a():\n    pass\n"}
    )
    for p in (root / "etc").iterdir():
        p.unlink()
    (root / "etc").rmdir()
    os.symlink(outside, root / "etc")  # git still lists etc/passwd
    reasons = _reasons(walk(root, IndexConfig()))
    assert reasons["etc/passwd"] == "outside-repo"
    result = _index(root)
    assert result.exit_code == 0, result.output
    skipped = {s["path"]: s for s in json.loads(result.stdout)["skipped"]}
    assert skipped["etc/passwd"]["reason"] == "outside-repo"
    for f in (root / ".llmc").rglob("*"):  # before a search logs its query there
        if f.is_file():
            assert b"glorbvexoutside" not in f.read_bytes(), f
    assert "glorbvexoutside" not in _search_text(root, "glorbvexoutside")


def test_a_path_swapped_for_a_symlink_after_the_walk_is_refused(tmp_path):
    from llmc.index.walk import read_text

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.py").write_text("leaked = 1\n")
    (outside / "g.py").write_text("leaked = 2\n")
    root = make_repo(tmp_path / "r", {"sub/f.py": "inside = 1\n", "g.py": "inside = 2\n"})
    assert {"sub/f.py", "g.py"} <= {f.path for f in walk(root, IndexConfig()).files}
    # after the walk: the file itself, then a directory on its path, become symlinks out
    (root / "g.py").unlink()
    os.symlink(outside / "g.py", root / "g.py")
    assert read_text(root, "g.py").skipped.reason == "outside-repo"
    (root / "sub" / "f.py").unlink()
    (root / "sub").rmdir()
    os.symlink(outside, root / "sub")
    got = read_text(root, "sub/f.py")
    assert got.text is None and got.skipped.reason == "outside-repo"


def test_a_directory_swapped_between_resolving_and_opening_is_refused(tmp_path, monkeypatch):
    import pytest

    from llmc import safe_read

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.py").write_text("leaked = 1\n")
    root = make_repo(tmp_path / "r", {"sub/f.py": "inside = 1\n"}, use_git=False).resolve()
    real = safe_read._real
    swapped = []

    def resolve_then_swap(path: str) -> str:
        got = real(path)
        if not swapped:  # the attacker wins the race once: right after the check
            swapped.append(path)
            (root / "sub" / "f.py").unlink()
            (root / "sub").rmdir()
            os.symlink(outside, root / "sub")
        return got

    monkeypatch.setattr(safe_read, "_real", resolve_then_swap)
    with pytest.raises(safe_read.OutsideRepo):
        safe_read.read_inside(root, "sub/f.py")
    assert swapped


def test_safe_read_refuses_fifos_and_reads_inner_symlinks(tmp_path):
    import pytest

    from llmc.safe_read import read_inside

    root = make_repo(tmp_path / "r", {"a.py": "a = 1\n"}, use_git=False)
    os.symlink("a.py", root / "inner.py")
    assert read_inside(root, "inner.py") == b"a = 1\n"
    os.mkfifo(root / "pipe.py")
    with pytest.raises(OSError):
        read_inside(root, "pipe.py")  # would block on open without O_NONBLOCK


def test_a_name_that_is_not_utf8_is_skipped_and_the_rest_is_indexed(tmp_path):
    import json

    root = make_repo(
        tmp_path / "r", {"good.py": "def wimbleshank():\n    return 1\n"}, use_git=False
    )
    fd = os.open(os.path.join(os.fsencode(root), b"bad\xffname.py"), os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"def undecodable_name():\n    return 2\n")
    os.close(fd)
    from repo_fixtures import git

    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "names")
    result = _index(root)
    assert result.exit_code == 0, result.output
    skipped = {s["path"]: s["reason"] for s in json.loads(result.stdout)["skipped"]}
    assert skipped == {"bad\\xffname.py": "undecodable-name"}
    assert "good.py" in _search_text(root, "wimbleshank")
    verbose = _index(root, "-v")
    assert verbose.exit_code == 0, verbose.output


def test_more_secret_file_names_are_skipped(tmp_path):
    names = [
        ".docker/config.json",
        "home/.docker/config.json",
        ".dockercfg",
        "kubeconfig",
        "ops/.kube/config",
        "keys/server.ppk",
        ".s3cfg",
        ".boto",
        "infra/terraform.tfstate",
        "infra/terraform.tfstate.backup",
        ".vault-token",
        ".terraformrc",
        "gcp/project-123-key.json",
        "deploy_key",
        ".github_token",
    ]
    kept = ["docker/config.json", "app/config", "src/keys.py"]
    root = make_repo(tmp_path / "r", {n: "x\n" for n in names + kept}, use_git=False)
    result = walk(root, IndexConfig())
    reasons = _reasons(result)
    for name in names:
        assert reasons.get(name) == "secret", name
    assert set(kept) <= {f.path for f in result.files}
