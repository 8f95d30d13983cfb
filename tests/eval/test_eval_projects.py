"""Shipped-set resolution and the sdist cache, with a local archive instead of PyPI."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from llmc.errors import EvalError
from llmc.eval.projects import (
    MARKER,
    PROJECTS,
    Project,
    extract_sdist,
    fetch_project,
    llmc_checkout,
    resolve_set,
)


def make_sdist(path: Path, files: dict[str, str]) -> str:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_resolve_names_and_files(tmp_path):
    attrs = PROJECTS["attrs"]
    for spec in ("attrs", f"attrs-{attrs.version}", "ATTRS"):
        got = resolve_set(spec)
        assert got.project == attrs and got.root is None and got.queries_path.is_file()
    assert resolve_set("attrs", repo=tmp_path).root == tmp_path
    own = resolve_set("llmc")
    assert own.root == llmc_checkout() and own.queries_path.name == "llmc.jsonl"
    q = tmp_path / "mine.jsonl"
    q.write_text("{}\n")
    assert resolve_set(str(q)).queries_path == q
    with pytest.raises(EvalError, match="no such query file"):
        resolve_set(str(tmp_path / "missing.jsonl"))
    with pytest.raises(EvalError, match="shipped: "):
        resolve_set("requestz")
    with pytest.raises(EvalError, match="reserved"):
        resolve_set("flask")


def test_fetch_verifies_unpacks_and_caches(tmp_path):
    src = tmp_path / "toy-1.0.tar.gz"
    digest = make_sdist(src, {"toy-1.0/toy.py": "def f():\n    pass\n", "toy-1.0/README.md": "# t"})
    calls = []

    def download(req: str, dest: Path) -> None:
        calls.append(req)
        dest.mkdir(parents=True)
        (dest / src.name).write_bytes(src.read_bytes())

    project = Project("toy", "1.0", digest)
    root = fetch_project(project, tmp_path / "cache", download)
    assert root == tmp_path / "cache" / "toy-1.0"
    assert (root / "toy.py").read_text().startswith("def f")
    assert (root / MARKER).read_text().strip() == digest
    assert fetch_project(project, tmp_path / "cache", download) == root
    assert calls == ["toy==1.0"]  # the second call used the cache
    leftovers = [p.name for p in (tmp_path / "cache").iterdir()]
    assert leftovers == ["toy-1.0"]

    with pytest.raises(EvalError, match="does not match the pinned"):
        fetch_project(Project("toy", "1.0", "0" * 64), tmp_path / "other", download)


def test_extract_refuses_escaping_members(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    make_sdist(bad, {"pkg-1/ok.py": "", "../evil.py": "x"})
    with pytest.raises(EvalError, match="refusing"):
        extract_sdist(bad, tmp_path / "out")
    two = tmp_path / "two.tar.gz"
    make_sdist(two, {"a/x.py": "", "b/y.py": ""})
    with pytest.raises(EvalError, match="one top-level directory"):
        extract_sdist(two, tmp_path / "out2")
