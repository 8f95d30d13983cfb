"""llmc.corpora: one fetch for eval and train, with a local archive instead of PyPI."""

from __future__ import annotations

import hashlib
import io
import logging
import tarfile
from pathlib import Path

import pytest

from lab.train.projects import TRAIN_PROJECTS, check_allowed, reserved_names
from llmc import corpora
from llmc.corpora import Project
from llmc.errors import EvalError, TrainError
from llmc.eval.projects import PROJECTS, RESERVED


def _sdist(path: Path, files: dict[str, str]) -> str:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _downloader(src: Path, calls: list[str]):
    def download(requirement: str, dest: Path) -> None:
        calls.append(requirement)
        dest.mkdir(parents=True)
        (dest / src.name).write_bytes(src.read_bytes())

    return download


def test_unpinned_fetch_warns_records_its_sha_and_is_reused(tmp_path, caplog):
    src = tmp_path / "toy-2.0.tar.gz"
    digest = _sdist(src, {"toy-2.0/toy.py": "x = 1\n"})
    calls: list[str] = []
    download = _downloader(src, calls)
    with caplog.at_level(logging.WARNING, logger="llmc.corpora"):
        root = corpora.fetch(Project("toy", "2.0"), tmp_path, marker=".m", download=download)
    assert "not pinned" in caplog.text and digest in caplog.text
    assert corpora.source_sha256(root, ".m") == digest
    assert corpora.fetch(Project("toy", "2.0"), tmp_path, marker=".m", download=download) == root
    assert calls == ["toy==2.0"]
    # pinned to something else: the cached copy does not fit, the new download neither
    with pytest.raises(TrainError, match="does not match the pinned"):
        corpora.fetch(
            Project("toy", "2.0", "0" * 64), tmp_path, marker=".m", error=TrainError,
            download=download,
        )  # fmt: skip


def test_errors_are_the_callers_and_npm_requirements_use_at(tmp_path):
    with pytest.raises(EvalError, match="unknown ecosystem"):
        corpora.fetch(Project("x", "1", "a" * 64, "cargo"), tmp_path, marker=".m", error=EvalError)
    assert Project("left-pad", "1.3.0", ecosystem=corpora.NPM).requirement == "left-pad@1.3.0"
    assert Project("attrs", "25.3.0").requirement == "attrs==25.3.0"
    assert Project("attrs", "25.3.0").dir_name == Project("attrs", "25.3.0").set_name


def test_one_list_of_what_training_may_not_use():
    assert set(PROJECTS) <= corpora.reserved_for_eval() and RESERVED <= reserved_names()
    assert not {p.name for p in TRAIN_PROJECTS} & corpora.reserved_for_eval()
    with pytest.raises(TrainError, match="reserved"):
        check_allowed([Project("attrs", "25.3.0")])
    assert corpora.default_cache_dir("train", "~/x") == Path("~/x").expanduser()
