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
            load_trees(path, SHIPPED["features"], "ranker model", "python -m lab train ranker")


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


def _leaf() -> dict:
    return {"feature": [-1], "threshold": [0.0], "left": [0], "right": [0], "value": [0.0]}


def _wide_tree(nodes: int) -> dict:
    """A valid, shallow tree of ``nodes`` nodes (heap order: node j splits into 2j+1, 2j+2)."""
    tree: dict = {k: [] for k in ("feature", "threshold", "left", "right", "value")}
    for j in range(nodes):
        split = 2 * j + 2 < nodes
        tree["feature"].append(0 if split else -1)
        tree["threshold"].append(0.5)
        tree["left"].append(2 * j + 1 if split else 0)
        tree["right"].append(2 * j + 2 if split else 0)
        tree["value"].append(0.0)
    return tree


def test_a_small_file_that_asks_for_large_arrays_is_refused(tmp_path):
    """One wide tree and many one-leaf trees: ~170 KB of JSON that, padded to the widest
    tree, asked for 900 x 4,095 cells (~200 MB of arrays); refused before any is made."""
    data = {"format": SHIPPED["format"], "features": SHIPPED["features"],
            "trees": [_wide_tree(4095)] + [_leaf() for _ in range(900)]}  # fmt: skip
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(data))
    assert path.stat().st_size < 200_000
    with pytest.raises(ModelError, match="too big"):
        load_trees(path, SHIPPED["features"], "ranker model", "python -m lab train ranker")


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_a_value_or_threshold_that_is_not_finite_is_refused(tmp_path, bad):
    for column in ("value", "threshold"):
        text = json.dumps(_with(lambda t, c=column: t[c].__setitem__(_split_node(t), 0.125)))
        path = tmp_path / f"{column}.json"
        path.write_text(text.replace("0.125", bad, 1))
        with pytest.raises(ModelError, match="not a finite number"):
            load_trees(path, SHIPPED["features"], "ranker model", "python -m lab train ranker")


def _tuned_dir(tmp_path: Path, params: dict, intent: str | None = None) -> Path:
    directory = tmp_path / "tuned"
    directory.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, "params": params, "intent_model": intent}
    (directory / TUNED_FILE).write_text(json.dumps(body))
    return directory


def _overlay(tmp_path: Path, directory: Path) -> TunedOverlay:
    from llmc.config import Config

    cfg = Config()
    cfg.learn.tuned_dir = str(directory)
    return TunedOverlay(tmp_path, cfg)


def test_a_tuned_file_that_is_a_link_is_not_followed(tmp_path, caplog):
    """tuned.json and its intent model live under .llmc/: a link there was not made by
    llmc (a pull, a race) and is refused, like every other state file."""
    elsewhere = _tuned_dir(tmp_path / "elsewhere", {"search.rrf_k": 7})
    directory = tmp_path / "state" / "tuned"
    directory.mkdir(parents=True)
    (directory / TUNED_FILE).symlink_to(elsewhere / TUNED_FILE)
    assert _overlay(tmp_path, directory).applied == {}
    assert any("link" in r.getMessage() for r in caplog.records)


def test_an_intent_model_that_is_a_link_is_not_followed(tmp_path):
    directory = _tuned_dir(tmp_path, {}, intent="intent.json")
    real = tmp_path / "real-intent.json"
    real.write_text(json.dumps({"format": "llmc-intent-v1", "classes": ["code", "docs"],
                                "intercept": [0.0, 0.0], "weights": {}}))  # fmt: skip
    (directory / "intent.json").symlink_to(real)
    assert _overlay(tmp_path, directory).intent is None
    (directory / "intent.json").unlink()
    (directory / "intent.json").write_text(real.read_text())
    assert _overlay(tmp_path, directory).intent is not None  # the same model, not linked


def test_a_tuned_value_cannot_name_a_path_outside_its_folder(tmp_path):
    """``tuned:NAME`` names a file of the tuned folder (the fine-tuned reranker):
    ``tuned:../../x`` would have made rerank.model any folder of the disk."""
    outside = tmp_path / "outside-model"
    outside.mkdir()
    directory = _tuned_dir(tmp_path / "t", {"rerank.model": "tuned:../../outside-model"})
    assert (directory / "../../outside-model").exists()
    overlay = _overlay(tmp_path, directory)
    assert "rerank.model" not in overlay.applied
    (directory / "reranker").mkdir()
    directory = _tuned_dir(tmp_path / "t", {"rerank.model": "tuned:reranker"})
    assert _overlay(tmp_path, directory).applied["rerank.model"] == str(directory / "reranker")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.__setitem__("intercept", [float("nan"), 0.0]),
        lambda m: m["weights"].__setitem__("w:x", [float("inf"), 0.0]),
        lambda m: m.__setitem__("classes", ["code", "code"]),
        lambda m: m.__setitem__("classes", ["code", "rm -rf"]),
        lambda m: m.__setitem__("temperature", float("nan")),
        lambda m: m.__setitem__("weights", [1, 2]),
    ],
)
def test_an_intent_model_with_values_search_cannot_use_is_refused(tmp_path, change):
    model = {"format": "llmc-intent-v1", "classes": ["code", "docs"], "intercept": [0.0, 0.0],
             "weights": {"w:x": [0.5, -0.5]}}  # fmt: skip
    change(model)
    directory = _tuned_dir(tmp_path, {}, intent="intent.json")
    (directory / "intent.json").write_text(json.dumps(model))
    assert _overlay(tmp_path, directory).intent is None


def _bad_models(tmp_path: Path) -> dict[str, Path]:
    wide = {"format": SHIPPED["format"], "features": SHIPPED["features"],
            "trees": [_wide_tree(4095)] + [_leaf() for _ in range(900)]}  # fmt: skip
    files = {
        "self-child": json.dumps(_with(lambda t: t["left"].__setitem__(0, 0))),
        "cycle": json.dumps(_with(lambda t: t["right"].__setitem__(_split_node(t), 0))),
        "huge-count": json.dumps(wide),
        "malformed": '{"format": "llmc-ranker-v1", "trees": [',
    }
    out = {"dev-zero": Path("/dev/zero"), "fifo": tmp_path / "model.fifo"}
    os.mkfifo(out["fifo"])
    for name, text in files.items():
        out[name] = tmp_path / f"{name}.json"
        out[name].write_text(text)
    return out


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    from click.testing import CliRunner

    from llmc.cli import main

    root = make_repo(tmp_path_factory.mktemp("bad-models") / "repo", SAMPLE_FILES)
    result = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"])
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.parametrize(
    "name", ["self-child", "cycle", "huge-count", "malformed", "dev-zero", "fifo"]
)
def test_a_bad_ranker_model_is_one_warning_and_search_answers(indexed, tmp_path, name):
    """Through the public Searcher: each bad file is refused with one warning per query and
    the answer comes by fusion; a query that would hang is given a deadline, not forever."""
    import threading

    from llmc.config import load_config
    from llmc.search import Searcher

    cfg = load_config(indexed)
    cfg.search.ranker_model = str(_bad_models(tmp_path)[name])
    cfg.search.dense = False
    answers: list = []
    with Searcher(indexed, cfg) as searcher:
        for _ in range(2):
            worker = threading.Thread(
                target=lambda: answers.append(searcher.search("open the session store")),
                daemon=True,
            )
            worker.start()
            worker.join(timeout=60)
            assert not worker.is_alive(), f"search with a {name} model did not return"
    for answer in answers:
        assert answer.results[0].path == "app/store.py"
        refused = [w for w in answer.warnings if "ranking by fusion" in w]
        assert len(refused) == 1, answer.warnings
