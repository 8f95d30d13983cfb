"""A hostile repository, cloned and indexed as a user would: crafted names, symlinks out of
the tree, a pickle in `.llmc/`, secrets in ordinary files, escape sequences. It must index
with zero tracebacks, zero escapes, no code run, and no secret in the index."""

from __future__ import annotations

import json
import os
import pickle  # the attacker's side of the test only: llmc itself never imports it
import subprocess
import sys
from pathlib import Path

from repo_fixtures import git

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEYq9"
OUTSIDE_CANARY = "zqxoutsidecanary"


class _Payload:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _llmc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LLMC_NO_DAEMON": "1", "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "llmc", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=600,
    )


def _hostile_repo(tmp_path: Path, marker: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0:{OUTSIDE_CANARY}:/root:/bin/sh\n")
    (outside / "notes.py").write_text(f"def {OUTSIDE_CANARY}():\n    return 1\n")

    root = tmp_path / "origin"
    root.mkdir()
    (root / "app.py").write_text(
        "def reconcile_ledger(entries):\n"
        '    """Balance the ledger entries against the bank statement."""\n'
        "    return sum(entries)\n"
    )
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("placeholder\n")
    (root / "esc\x1b]0;title\x07.py").write_text("def titled():\n    return '\x1b]52;c;eA==\x07'\n")
    with open(os.path.join(os.fsencode(root), b"bad\xffname.py"), "w") as fh:
        fh.write("def undecodable_name():\n    return 2\n")
    (root / "config").mkdir()
    (root / "config" / "settings_local.py").write_text(
        "DEBUG = True\n"
        'AWS_ACCESS_KEY_ID = "AKIAIOSFODNN7REALKEY"\n'
        f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\n'
    )
    (root / ".kube").mkdir()
    (root / ".kube" / "config").write_text("users:\n- name: admin\n  token: kubetokenvalue\n")
    os.symlink(outside / "notes.py", root / "link_out.py")
    os.symlink(".", root / "loop")
    state = root / ".llmc"
    state.mkdir()
    for name in ("graph_facts.pickle", "graph_facts.journal"):
        (state / name).write_bytes(pickle.dumps(_Payload(marker)))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "add", "-f", ".llmc")
    git(root, "commit", "-q", "-m", "hostile")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    # The tracked directory becomes a symlink out of the tree (git still lists etc/passwd).
    for p in (clone / "etc").iterdir():
        p.unlink()
    (clone / "etc").rmdir()
    os.symlink(outside, clone / "etc")
    return clone


def test_a_hostile_clone_indexes_without_tracebacks_escapes_or_code_execution(tmp_path):
    marker = tmp_path / "PWNED"
    clone = _hostile_repo(tmp_path, marker)

    indexed = _llmc("index", "--no-vectors", "--json", cwd=clone)
    err = indexed.stderr.decode("utf-8", "replace")
    assert indexed.returncode == 0, err
    assert "Traceback" not in err
    assert not marker.exists(), "a pickle under .llmc/ ran code"

    # Before any search: the query log would hold the queries themselves.
    state = clone / ".llmc"
    for f in state.rglob("*"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            assert OUTSIDE_CANARY.encode() not in data, f
            assert AWS_SECRET.encode() not in data, f

    found = _llmc("search", "--json", "--no-hyde", "-k", "20", "reconcile ledger bank", cwd=clone)
    assert found.returncode == 0, found.stderr.decode("utf-8", "replace")
    results = json.loads(found.stdout)["results"]
    assert results[0]["path"] == "app.py"

    for query in (OUTSIDE_CANARY, "root x 0 0", "AWS secret access key", "kube token admin"):
        out = _llmc("search", "--json", "--no-hyde", "-k", "50", query, cwd=clone)
        assert out.returncode == 0
        results = json.loads(out.stdout)["results"]
        text = json.dumps(results)  # the answer, not the query echoed back
        assert OUTSIDE_CANARY not in text
        assert AWS_SECRET not in text and "kubetokenvalue" not in text
        paths = {r["path"] for r in results}
        assert not paths & {"etc/passwd", "link_out.py", "config/settings_local.py", ".kube/config"}

    plain = _llmc("search", "--no-hyde", "-k", "20", "titled", cwd=clone)
    assert plain.returncode == 0
    assert b"\x1b" not in plain.stdout and b"\x07" not in plain.stdout
    assert not marker.exists()
