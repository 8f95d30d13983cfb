"""The learned ranker at query time: load the shipped model, score the candidate pool.

`python -m lab train ranker` (``lab.train.ranker``) fits LightGBM lambdarank trees over the
features of ``features.py`` and dumps them to a small JSON file (``FORMAT``): feature names
and, per tree, the split feature, threshold, children and node values. Importing lightgbm
costs ~2.6 s (it pulls in scikit-learn and pandas), so this module evaluates the trees
itself with numpy: all trees at once, one gather per level, a few ms for a pool of a few
hundred candidates. Nothing here imports training code.

Every feature is a number (no NaN: missing values are sentinels), and every split is
``x <= threshold`` goes left, as LightGBM's numerical splits without missing values.
``--explain`` attributes each shown result's score to its features by the path through
each tree (the change of node value at each split, Saabas), summed per feature.

A model trained on fewer features than ``FEATURES`` (an older model, before features were
added: its file names the ones it splits on) keeps working: its split indices are mapped
onto ``FEATURES``' columns when it loads, and the columns it never saw are ignored. A
model naming a feature that ``FEATURES`` lacks is refused (retrain it).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.errors import ModelError
from llmc.search.features import FEATURES, MetaCache, Pool, QueryInfo, build_pool
from llmc.search.types import CODE_ROUTE, DOCS_ROUTE, TESTS, Candidate, RankedList, RouteDecision

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.search.report import QueryParts
    from llmc.search.sources import Sources
    from llmc.search.trace import Trace

log = logging.getLogger(__name__)

FORMAT = "llmc-ranker-v1"
MODEL_DIR = Path(__file__).resolve().parent.parent / "models" / "ranker"
DEFAULT_MODEL = MODEL_DIR / "model.json"
EXPLAIN_FEATURES = 4  # features shown per result in the trace


@dataclass(frozen=True)
class RankerModel:
    """Trees over ``features``; ``predict`` scores rows, higher is better."""

    features: tuple[str, ...]
    feature: np.ndarray  # (trees, nodes) int32: split feature (leaves: 0)
    threshold: np.ndarray  # (trees, nodes) float64: go left when x <= it (leaves: +inf)
    left: np.ndarray  # (trees, nodes) int32 (leaves: themselves)
    right: np.ndarray  # (trees, nodes) int32
    value: np.ndarray  # (trees, nodes) float64: leaf value, or mean value of the node
    is_leaf: np.ndarray  # (trees, nodes) bool
    depth: int
    path: str = ""
    report: Mapping[str, Any] = field(default_factory=dict)
    trained_on: tuple[str, ...] = ()  # the features its file names (``features`` if empty)

    @property
    def trees(self) -> int:
        return int(self.feature.shape[0])

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of ``matrix`` (float, columns in ``features`` order).

        Every (row, tree) pair walks down one level per step, all at once: node ids are
        flat over all trees (``_flat``), so each step is a few 1-d ``take``s; it stops once
        every pair sits on a leaf (leaves point to themselves, so going on changes nothing)."""
        import numpy as np

        n = matrix.shape[0]
        t = self.trees
        if n == 0 or t == 0:
            return np.zeros(n)
        feature, threshold, left, right, value, is_leaf, roots = self._flat
        width = matrix.shape[1]
        x = np.asarray(matrix, dtype=np.float64).reshape(-1)
        row_start = (np.arange(n, dtype=np.intp) * width)[:, None]
        node = np.broadcast_to(roots, (n, t)).copy()  # flat node id per (row, tree)
        for level in range(min(self.depth, MAX_DEPTH)):  # a walk never loops
            go_left = x.take(row_start + feature.take(node)) <= threshold.take(node)
            node = np.where(go_left, left.take(node), right.take(node))
            if level % 4 == 3 and is_leaf.take(node).all():
                break
        return value.take(node).sum(axis=1)

    @functools.cached_property
    def _flat(self) -> tuple[np.ndarray, ...]:
        """The trees' arrays flattened, children and roots as flat node ids."""
        import numpy as np

        trees, width = self.feature.shape
        start = (np.arange(trees, dtype=np.intp) * width)[:, None]
        return (
            self.feature.astype(np.intp).reshape(-1),
            self.threshold.reshape(-1),
            (self.left + start).astype(np.intp).reshape(-1),
            (self.right + start).astype(np.intp).reshape(-1),
            self.value.reshape(-1),
            self.is_leaf.reshape(-1),
            start.reshape(1, -1),
        )

    def contributions(self, row: np.ndarray) -> dict[str, float]:
        """Each feature's share of one row's score (Saabas: value change at each split)."""
        out: dict[str, float] = {}
        for t in range(self.trees):
            node = 0
            for _ in range(min(self.depth, MAX_DEPTH)):  # children after parents
                if self.is_leaf[t, node]:
                    break
                f = int(self.feature[t, node])
                nxt = int(
                    self.left[t, node] if row[f] <= self.threshold[t, node] else self.right[t, node]
                )
                delta = float(self.value[t, nxt] - self.value[t, node])
                name = self.features[f]
                out[name] = out.get(name, 0.0) + delta
                node = nxt
        return out


def model_from_json(
    data: Mapping[str, Any], path: str = "", known: Sequence[str] = FEATURES
) -> RankerModel:
    """A ``RankerModel`` from its JSON form (see ``lab.train.ranker.dump_model``) over the
    feature columns ``known`` (the span ranker's ``FEATURES``, or the file ranker's)."""
    import numpy as np

    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise ModelError(f"{path or 'ranker model'}: not a {FORMAT} file")
    depth = check_trees(data, path or "ranker model")
    known = tuple(known)
    features = tuple(str(f) for f in data["features"])
    trained_on = features
    remap: list[int] | None = None
    if features != known and set(features) <= set(known):
        remap = [known.index(f) for f in features]  # its columns among today's
        features = known
    trees = data["trees"]
    width = max((len(tr["feature"]) for tr in trees), default=1)
    shape = (len(trees), width)
    feature = np.zeros(shape, dtype=np.int32)
    threshold = np.full(shape, np.inf)
    left = np.zeros(shape, dtype=np.int32)
    right = np.zeros(shape, dtype=np.int32)
    value = np.zeros(shape)
    is_leaf = np.ones(shape, dtype=bool)
    for i, tr in enumerate(trees):
        m = len(tr["feature"])
        left[i] = right[i] = np.arange(width)
        for j in range(m):
            f = int(tr["feature"][j])
            value[i, j] = float(tr["value"][j])
            if f >= 0:
                if f >= len(trained_on):
                    raise ModelError(f"{path or 'ranker model'}: feature {f} out of range")
                if remap is not None:
                    f = remap[f]
                is_leaf[i, j] = False
                feature[i, j] = f
                threshold[i, j] = float(tr["threshold"][j])
                left[i, j] = int(tr["left"][j])
                right[i, j] = int(tr["right"][j])
    return RankerModel(
        features, feature, threshold, left, right, value, is_leaf,
        depth=depth, path=path, report=dict(data.get("report") or {}),
        trained_on=trained_on,
    )  # fmt: skip


# Bounds on a model file, far above the shipped ones (span ranker: 88 trees of at most 61
# nodes, 5,368 cells, depth 17, 195 KB; file ranker: 300 trees of at most 13 nodes, 3,900
# cells, 178 KB): a file past them is refused before any array is made. The arrays are
# (trees x widest tree), ~29 bytes a cell plus ~24 more once flattened for the walk, so the
# cells bound what a small file can ask for: 172 KB of JSON (one tree of 4,095 nodes and
# 975 one-leaf trees) took 214 MB at 4M cells; 1M cells hold ~55 MB at most, and still fit
# 1,000 trees of 1,000 nodes (LightGBM's default 31 leaves are 61 nodes).
MAX_MODEL_BYTES = 8 * 1024 * 1024
MAX_TREES = 5_000
MAX_TREE_NODES = 4096
MAX_CELLS = 1_000_000
MAX_DEPTH = 64
MAX_FEATURES = 1000


def check_trees(data: Mapping[str, Any], what: str) -> int:
    """Validate the trees of a model file and return their real depth; ModelError naming
    what is wrong. Every split node's children come strictly after it, so a walk always
    reaches a leaf (a node that is its own child, a cycle, a dangling index are refused)."""
    features, trees = data.get("features"), data.get("trees")
    if not isinstance(features, list) or not isinstance(trees, list):
        raise ModelError(f"{what}: features and trees must be lists")
    if len(features) > MAX_FEATURES or len(trees) > MAX_TREES:
        raise ModelError(f"{what}: {len(features)} features, {len(trees)} trees: too many")
    width, deepest = 1, 0
    for i, tree in enumerate(trees):
        columns = _tree_columns(tree, what, i)
        m = len(columns[0])
        width = max(width, m)
        deepest = max(deepest, _tree_depth(columns, what, i))
    if len(trees) * width > MAX_CELLS or deepest > MAX_DEPTH:
        raise ModelError(
            f"{what}: {len(trees)} trees of up to {width} nodes, depth {deepest}: too big"
        )
    return max(deepest, 1)


def _tree_columns(tree: Any, what: str, i: int) -> tuple[list, ...]:
    names = ("feature", "threshold", "left", "right", "value")
    if not isinstance(tree, Mapping) or not all(isinstance(tree.get(n), list) for n in names):
        raise ModelError(f"{what}: tree {i} lacks its node lists")
    columns = tuple(tree[n] for n in names)
    m = len(columns[0])
    if not 0 < m <= MAX_TREE_NODES or any(len(c) != m for c in columns):
        raise ModelError(f"{what}: tree {i} has {m} nodes or lists of unequal length")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for c in columns for v in c):
        raise ModelError(f"{what}: tree {i} holds a value that is not a number")
    if not all(math.isfinite(v) for c in columns for v in c):  # JSON's NaN, Infinity
        raise ModelError(f"{what}: tree {i} holds a value that is not a finite number")
    return columns


def _tree_depth(columns: tuple[list, ...], what: str, i: int) -> int:
    feature, _, left, right, _ = columns
    m = len(feature)
    level = [0] * m
    for j in range(m):
        if feature[j] < 0:
            continue
        for child in (left[j], right[j]):
            if not (isinstance(child, int) and j < child < m):
                raise ModelError(
                    f"{what}: tree {i} node {j} points to node {child} (children come after "
                    "their parent: a cycle or a dangling index)"
                )
            level[child] = max(level[child], level[j] + 1)
    return max(level)


_CACHE: dict[tuple[str, int, int, int], RankerModel] = {}
_CACHE_LOCK = threading.Lock()
_REFUSED: dict[tuple[str, int, int, int], str] = {}  # file version -> why it was refused
MAX_REFUSED = 64


def resolve_model_path(name: str) -> Path:
    return DEFAULT_MODEL if name in ("", "default") else Path(name).expanduser()


def load_model(name: str = "default") -> RankerModel:
    """The ranker model ``name`` (``default``: the shipped one; else a path), loaded once
    per file version. ModelError when it is missing, unreadable or for other features."""
    return load_trees(
        resolve_model_path(name), FEATURES, "ranker model", "python -m lab train ranker"
    )


def load_trees(path: Path, known: Sequence[str], what: str, retrain: str) -> RankerModel:
    """The trees at ``path`` over the feature columns ``known`` (the span ranker's, the
    file ranker's), loaded once per file version; ModelError when the file is missing,
    unreadable or splits on a feature this llmc lacks (``retrain``: the command to run)."""
    try:
        st = path.stat()
    except OSError as e:
        raise ModelError(f"{what} {path} not found ({e.strerror})") from None
    key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if key in _REFUSED:  # a bad file is read once per version, not once per query
            raise ModelError(_REFUSED[key])
        try:
            model = _read_trees(path, known, what, retrain)
        except ModelError as e:
            if len(_REFUSED) >= MAX_REFUSED:
                _REFUSED.clear()
            _REFUSED[key] = str(e)
            raise
        _CACHE[key] = model
        return model


def _read_trees(path: Path, known: Sequence[str], what: str, retrain: str) -> RankerModel:
    from llmc.models.vet import read_json_bounded

    data = read_json_bounded(path, MAX_MODEL_BYTES, what)
    model = model_from_json(data, str(path), known=known)
    if model.features != tuple(known):
        unknown = sorted(set(model.features) - set(known))
        raise ModelError(
            f"{what} {path} was trained on features this llmc lacks ({unknown}; "
            f"retrain it: `{retrain}`)"
        )
    return model


def open_routes(decision: RouteDecision) -> RouteDecision:
    """Both routes searched at full weight: the router's probabilities become features,
    not a gate (the ranker decides what comes first)."""
    import dataclasses

    weights = {CODE_ROUTE: 1.0, DOCS_ROUTE: 1.0, TESTS: 1.0}
    return dataclasses.replace(decision, weights=weights)


def rank_pool(
    pool: Pool, model: RankerModel, explain_top: int = 0
) -> tuple[list[Candidate], dict[int, dict[str, float]]]:
    """The pool ordered by the model (ties: best rank in any list, then path and line, so
    the order does not hang on span ids, which a rebuilt index renumbers), and the feature
    attributions of the first ``explain_top`` candidates."""
    scores = model.predict(pool.matrix)
    pinned = pool.matrix[:, FEATURES.index("pool:pinned")] > 0
    order = sorted(
        range(len(pool)),
        key=lambda i: (
            -scores[i],
            min(pool.ranks[i].values(), default=1 << 30),
            pool.places[i] if pool.places else ("", 0),
            pool.span_ids[i],
        ),
    )
    out: list[Candidate] = []
    explained: dict[int, dict[str, float]] = {}
    for pos, i in enumerate(order):
        contrib: dict[str, float] = {}
        if pos < explain_top:
            shares = model.contributions(pool.matrix[i])
            explained[pool.span_ids[i]] = shares
            for name in pool.ranks[i]:  # per list: the summed shares of its features
                contrib[name] = sum(v for f, v in shares.items() if f.startswith(name + ":"))
        out.append(
            Candidate(
                span_id=pool.span_ids[i],
                score=float(scores[i]),
                # exact-symbol lookup found it (a feature here, not a pin): say so
                ranks={"exact": 1, **pool.ranks[i]} if pinned[i] else dict(pool.ranks[i]),
                scores={"exact": 1.0, **pool.scores[i]} if pinned[i] else dict(pool.scores[i]),
                contributions=contrib,
            )
        )
    return out, explained


def rrf_order(lists: Sequence[RankedList], depth: int = 100, k: int = 60) -> dict[int, int]:
    """Each span's rank (1-based) in the plain BM25 + dense RRF of ``lists``: a retriever's
    code and docs lists merged by score (one BM25 index, one embedding space), the top
    ``depth`` of each merged list, ``fusion.rrf`` with ``k`` (ties by best rank, then span
    id). The `rrf` baseline's order over the same lists (``llmc.eval.variants.RRF_BASELINE``);
    exact and HyDE lists take no part."""
    import dataclasses

    from llmc.search import fusion
    from llmc.search.types import BM25, DENSE

    merged = []
    for retriever in (BM25, DENSE):
        parts = [r for r in lists if r.retriever == retriever]
        if parts:
            whole = fusion.merge_lists(retriever, parts)
            merged.append(dataclasses.replace(whole, hits=whole.hits[:depth]))
    fused = fusion.rrf(merged, {m.name: 1.0 for m in merged}, k)
    return {c.span_id: rank for rank, c in enumerate(fused, start=1)}


def blend_rrf(
    ranked: Sequence[Candidate], lists: Sequence[RankedList], weight: float, k: int,
    depth: int = 100,
) -> list[Candidate]:  # fmt: skip
    """The learned order blended with the plain RRF order of the same lists: each candidate
    scores ``(1 - weight) / (k + learned rank) + weight / (k + RRF rank)`` (a candidate no
    BM25 or dense list holds: RRF rank past the end), best first, ties by learned rank.
    ``weight`` 0 keeps the learned order (and its scores). Chosen on validation
    (docs/reports/2026-11-23-late-blend-rrf.md): the trees find a right answer first,
    RRF ranks the graded rest (a definition's neighbours, its docs) better."""
    import dataclasses

    if weight <= 0 or not ranked:
        return list(ranked)
    rrf = rrf_order(lists, depth)
    missing = len(ranked) + len(rrf) + 1
    blended = [
        (1.0 - weight) / (k + pos) + weight / (k + rrf.get(c.span_id, missing))
        for pos, c in enumerate(ranked, start=1)
    ]
    order = sorted(range(len(ranked)), key=lambda i: (-blended[i], i))
    return [dataclasses.replace(ranked[i], score=blended[i]) for i in order]


class LearnedStage:
    """The ranking stage of ``search.ranker = learned``: holds the model and the span
    metadata cache of one Searcher."""

    def __init__(self, model_name: str = "default", rrf_weight: float = 0.0, blend_k: int = 10,
                 depth: int = 100):  # fmt: skip
        self.model_name = model_name
        self.rrf_weight = rrf_weight
        self.blend_k = blend_k
        self.depth = depth
        self.settings = (model_name, rrf_weight, blend_k, depth)  # what a Searcher compares
        self.meta = MetaCache()

    def model(self) -> RankerModel:
        return load_model(self.model_name)

    def pool(
        self, sources: Sources, text: str, decision: RouteDecision, lists: Sequence[RankedList],
        pinned: Sequence[int], parts: QueryParts | None = None,
    ) -> Pool:  # fmt: skip
        """The candidates' features; ``text`` is what the router read (a report's focus),
        ``parts`` the whole query read (its shape features; None: ``text`` is the query)."""
        ids = [h.span_id for r in lists for h in r.hits] + list(pinned)
        meta = self.meta.get(sources.store, ids)
        return build_pool(lists, QueryInfo(text, decision, tuple(pinned), parts), meta)

    def rank(
        self,
        sources: Sources,
        text: str,
        decision: RouteDecision,
        lists: Sequence[RankedList],
        pinned: Sequence[int],
        trace: Trace,
        explain_top: int = 0,
        parts: QueryParts | None = None,
        rrf_weight: float | None = None,
    ) -> list[Candidate]:
        """The pool ranked by the model (ModelError when the model cannot be loaded), blended
        with RRF at ``rrf_weight`` (None: the stage's own)."""
        weight = self.rrf_weight if rrf_weight is None else rrf_weight
        model = self.model()
        with trace.stage("features"):
            pool = self.pool(sources, text, decision, lists, pinned, parts)
        with trace.stage("ranker"):
            ranked, explained = rank_pool(pool, model, explain_top)
            ranked = blend_rrf(ranked, lists, weight, self.blend_k, self.depth)
        blend = (
            f", blended with the BM25 + dense RRF order (weight {weight:g}, k {self.blend_k})"
            if weight > 0
            else ""
        )
        trace.note(
            "ranker",
            f"learned ranker ({model.trees} trees over {len(model.trained_on or FEATURES)} "
            f"features) scored "
            f"{len(pool)} candidates from {len(lists)} lists{blend}",
        )
        if explained:
            named = sources.describe(list(explained))
            for span_id, shares in explained.items():
                top = sorted(shares.items(), key=lambda kv: -abs(kv[1]))[:EXPLAIN_FEATURES]
                why = ", ".join(f"{f} {v:+.3f}" for f, v in top)
                trace.note("ranker", f"{named.get(span_id, span_id)}: {why}")
        return ranked


__all__ = [
    "DEFAULT_MODEL",
    "FORMAT",
    "LearnedStage",
    "RankerModel",
    "blend_rrf",
    "load_model",
    "load_trees",
    "model_from_json",
    "open_routes",
    "rank_pool",
    "resolve_model_path",
    "rrf_order",
]
