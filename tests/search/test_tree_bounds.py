"""A ranker model file is checked before it is walked (issue 41, item 3).

Reproduced: a tree node that is its own child hung search (and every daemon worker that
ran it); 1.4 MB of JSON asked for 2.7 GB; `/dev/zero` as the intent model was a MemoryError;
a malformed file a traceback. Each is now one warning, and search answers on its fallback.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.errors import ModelError
from llmc.search.learned import DEFAULT_MODEL, load_trees, model_from_json
from llmc.search.tuned import FORMAT, TUNED_FILE, TunedOverlay, read_tuned

SHIPPED = json.loads(DEFAULT_MODEL.read_text())


def _split_node(tree: dict) -> int:
    return next(j for j, f in enumerate(tree["feature"]) if f >= 0)


def _with(change) -> dict:
    data = copy.deepcopy(SHIPPED)
    change(data["trees"][0])
    return data


def test_the_shipped_models_pass():
    from llmc.search.file_ranker import load_file_model

    assert model_from_json(SHIPPED).trees == len(SHIPPED["trees"])
    assert load_file_model().trees > 0


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda t: t["left"].__setitem__(_split_node(t), _split_node(t)), "cycle"),
        (lambda t: t["right"].__setitem__(_split_node(t), 0), "cycle"),
        (lambda t: t["left"].__setitem__(_split_node(t), 10**6), "dangling"),
        (lambda t: t["left"].__setitem__(_split_node(t), "1"), "not a number"),
        (lambda t: t.pop("threshold"), "node lists"),
        (lambda t: t["value"].pop(), "unequal"),
        (lambda t: t["value"].__setitem__(0, None), "not a number"),
    ],
)
def test_a_bad_tree_is_refused_before_it_is_walked(change, said):
    with pytest.raises(ModelError, match=said):
        model_from_json(_with(change))


def test_too_many_nodes_are_refused_before_arrays_are_made():
    data = copy.deepcopy(SHIPPED)
    big = {k: [0.0] * 5000 for k in ("threshold", "value")}
    big.update(feature=[-1] * 5000, left=[0] * 5000, right=[0] * 5000)
    data["trees"] = [big] + data["trees"] * 11  # ~1,000 trees, one of 5,000 nodes
    with pytest.raises(ModelError, match="nodes"):
        model_from_json(data)


def test_dev_zero_a_fifo_and_malformed_json_are_one_line(tmp_path):
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "llmc-ranker-v1", "trees": [')
    for path, said in ((Path("/dev/zero"), "regular file"), (fifo, "regular file"), (bad, "JSON")):
        with pytest.raises(ModelError, match=said):
            load_trees(path, SHIPPED["features"], "ranker model", "llmc train ranker")


def test_a_cyclic_ranker_model_answers_with_one_warning_not_a_hang(tmp_path):
    cyclic = tmp_path / "cyclic.json"
    cyclic.write_text(json.dumps(_with(lambda t: t["left"].__setitem__(0, 0))))
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(LLMC_NO_DAEMON="1", LLMC_SEARCH__RANKER_MODEL=str(cyclic))
    run = [sys.executable, "-m", "llmc"]
    subprocess.run([*run, "index", str(root), "--no-vectors", "-q"], env=env, check=True,
                   timeout=300)  # fmt: skip
    found = subprocess.run(
        [*run, "search", "--repo", str(root), "--json", "--no-dense", "--no-hyde", "--explain",
         "open the session store"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["results"][0]["path"] == "app/store.py"
    assert "Traceback" not in found.stderr
    assert any("cycle" in w for w in answer["warnings"]) or "cycle" in found.stderr


def test_a_tuned_file_cannot_name_dev_zero_or_a_fifo_as_its_intent_model(tmp_path, caplog):
    from llmc.config import Config

    directory = tmp_path / "tuned"
    directory.mkdir()
    os.mkfifo(directory / "intent.json")
    for name in ("/dev/zero", "../../../etc/passwd", "intent.json"):
        (directory / TUNED_FILE).write_text(
            json.dumps({"format": FORMAT, "params": {}, "intent_model": name})
        )
        cfg = Config()
        cfg.learn.tuned_dir = str(directory)
        overlay = TunedOverlay(tmp_path, cfg)
        assert overlay.intent is None, name
    (directory / TUNED_FILE).unlink()
    os.mkfifo(directory / TUNED_FILE)
    assert read_tuned(directory) is None  # a FIFO as tuned.json: refused, never waited on
