"""The learned ranker's LightGBM booster as ``llmc.search.learned.FORMAT`` JSON, and the
check that our tree walk predicts what LightGBM does (``python -m lab train ranker``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llmc.errors import TrainError
from llmc.search.features import FEATURES
from llmc.search.learned import FORMAT


def safe_names() -> list[str]:
    return [f.replace(":", "__").replace(".", "_") for f in FEATURES]


def _flatten(root: dict[str, Any]) -> tuple[dict[str, list], int]:
    """One LightGBM tree as node arrays (internal nodes first, then leaves) and its depth."""
    internal: list[dict[str, Any]] = []
    leaves: list[dict[str, Any]] = []
    depth = 0

    def walk(node: dict[str, Any], level: int) -> tuple[bool, int]:
        nonlocal depth
        if "leaf_value" in node:
            leaves.append(node)
            depth = max(depth, level)
            return True, len(leaves) - 1
        if node.get("decision_type") != "<=":
            raise TrainError(f"unsupported split {node.get('decision_type')!r}")
        if node.get("missing_type") not in ("None", "NaN"):
            raise TrainError(f"unsupported missing type {node.get('missing_type')!r}")
        internal.append(node)
        me = len(internal) - 1
        node["_left"] = walk(node["left_child"], level + 1)
        node["_right"] = walk(node["right_child"], level + 1)
        return False, me

    walk(root, 0)
    n = len(internal)

    def index(ref: tuple[bool, int]) -> int:
        leaf, i = ref
        return n + i if leaf else i

    arrays = {
        "feature": [int(x["split_feature"]) for x in internal] + [-1] * len(leaves),
        "threshold": [float(x["threshold"]) for x in internal] + [0.0] * len(leaves),
        "left": [index(x["_left"]) for x in internal] + [0] * len(leaves),
        "right": [index(x["_right"]) for x in internal] + [0] * len(leaves),
        "value": [float(x["internal_value"]) for x in internal]
        + [float(x["leaf_value"]) for x in leaves],
    }
    return arrays, depth


def dump_model(
    booster: Any, report: Mapping[str, Any], features: Sequence[str] = FEATURES
) -> dict[str, Any]:
    """The booster as ``llmc.search.learned.FORMAT`` JSON: per tree, node arrays (internal
    nodes first, then leaves) of split feature (-1: leaf), threshold, children, value."""
    dumped = booster.dump_model(num_iteration=booster.best_iteration or None)
    trees = []
    depth = 1
    for info in dumped["tree_info"]:
        arrays, d = _flatten(info["tree_structure"])
        trees.append(arrays)
        depth = max(depth, d)
    return {
        "format": FORMAT,
        "features": list(features),
        "depth": depth,
        "trees": trees,
        "report": dict(report),
    }


def check_dump(
    model_json: Mapping[str, Any], booster: Any, matrix: Any, features: Sequence[str] = FEATURES
) -> float:
    """The largest difference between our tree walk and LightGBM's predictions."""
    import numpy as np

    from llmc.search.learned import model_from_json

    ours = model_from_json(model_json, known=features).predict(matrix)
    theirs = booster.predict(matrix, num_iteration=booster.best_iteration or None)
    return float(np.max(np.abs(ours - theirs))) if len(ours) else 0.0


__all__ = ["check_dump", "dump_model", "safe_names"]
