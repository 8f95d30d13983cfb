"""How search applies what `llmc tune` leaves in ``.llmc/tuned/``.

``tuned.json`` holds the learned config values (fusion and route weights), the numbers
that justified them and, when the intent classifier earned its place, the name of
``intent.json``. ``Searcher`` builds a ``TunedOverlay`` when it opens: the learned values
replace built-in defaults only (a value set in a config file, the environment or a flag
always wins), and the intent model is consulted after the heuristic router. The overlay
re-stats ``tuned.json`` on every query, so a daemon picks up a new tuning (or a reset)
without a restart. A missing, unreadable or foreign file means "not tuned", logged once,
never an error. ``learn.use_tuned = false`` switches it all off.

Writing a tuned state is training's business (``llmc.learn.tuned``); this module only
reads it, and stays light (json, no scikit-learn).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.search.intent import IntentModel
from llmc.search.types import RouteDecision

log = logging.getLogger(__name__)

TUNED_DIR = "tuned"
TUNED_FILE = "tuned.json"
INTENT_FILE = "intent.json"
FORMAT = "llmc-tuned-v1"
SOURCE = "tuned (.llmc/tuned)"
MAX_TUNED_BYTES = 4 * 1024 * 1024  # tuned.json and the intent model are a few KB
IN_DIR = "tuned:"  # a value naming a file or directory inside the tuned directory

# The config keys `llmc tune` may set. Others in a tuned.json are ignored.
TUNABLE_KEYS = (
    "search.bm25_weight",
    "search.dense_weight",
    "search.exact_weight",
    "search.rrf_k",
    "search.min_route_weight",
    "search.route_drop_confidence",
    "search.test_weight",
    "search.fusion",
    "search.rerank",
    "hyde.weight",
    "rerank.blend_weight",
    "rerank.model",
)


def tuned_path(root: Path, configured: str = "") -> Path:
    """The tuned directory: ``learn.tuned_dir`` (relative to the repo), else .llmc/tuned."""
    from llmc.paths import state_dir

    if configured:
        path = Path(configured).expanduser()
        return path if path.is_absolute() else Path(root) / path
    return state_dir(Path(root)) / TUNED_DIR


def configured_dir(cfg: Config) -> str:
    learn = getattr(cfg, "learn", None)
    return getattr(learn, "tuned_dir", "") if learn is not None else ""


def read_tuned(directory: Path) -> dict[str, Any] | None:
    """The parsed ``tuned.json`` of ``directory``, or None (missing or unusable, logged)."""
    from llmc.errors import ModelError
    from llmc.models.vet import read_json_bounded

    path = directory / TUNED_FILE
    if not os.path.lexists(path):
        return None
    try:
        data = read_json_bounded(path, MAX_TUNED_BYTES, "tuned file", follow=False)
    except ModelError as e:
        log.warning("%s: search runs untuned", e)
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        log.warning("%s is not a tuned file of this llmc: search runs untuned", path)
        return None
    return data


def _own_name(name: Any) -> bool:
    """Whether ``name`` is a bare file name (``tuned:NAME``, the intent model): a file of the
    tuned folder itself, never ``/dev/zero``, ``..`` or ``../../x``."""
    return isinstance(name, str) and bool(name) and Path(name).name == name and name != ".."


def _typed(default: Any, value: Any) -> Any:
    """``value`` if it has the type of the config default, else raise ValueError."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ValueError(f"expected {type(default).__name__}, got {value!r}")
    return value


def apply_params(
    cfg: Config, params: Mapping[str, Any], directory: Path | None = None, source: str = SOURCE
) -> tuple[Config, dict]:
    """A copy of ``cfg`` with ``params`` set where the value is still the built-in default;
    a ``tuned:NAME`` value names ``NAME`` inside the tuned ``directory`` (a model).

    Returns (config, the params actually applied)."""
    out = copy.deepcopy(cfg)
    applied: dict[str, Any] = {}
    for key, value in params.items():
        if key not in TUNABLE_KEYS or key in cfg.sources:
            continue  # not ours to set, or the user chose this value
        if isinstance(value, str) and value.startswith(IN_DIR):
            name = value[len(IN_DIR) :]
            if not _own_name(name):
                log.warning("tuned value for %s names %r, not a file of its own folder: "
                            "ignored", key, value)  # fmt: skip
                continue
            if directory is None or not (directory / name).exists():
                log.warning("tuned value for %s names a missing %s: ignored", key, value)
                continue
            value = str(directory / name)
        if not out.has(key):
            continue  # a key this build does not have
        try:
            out.set(key, _typed(out.get(key), value), source)
        except ValueError as e:
            log.warning("tuned value for %s ignored: %s", key, e)
            continue
        applied[key] = value
    return out, applied


class TunedOverlay:
    """The tuned state of one repository as a Searcher sees it (see the module docstring)."""

    def __init__(self, root: Path, cfg: Config):
        self.root = Path(root)
        self.base = cfg
        self.cfg = cfg
        self.intent: IntentModel | None = None
        self.applied: dict[str, Any] = {}
        self._stamp: tuple | None = None
        learn = getattr(cfg, "learn", None)
        self.enabled = bool(getattr(learn, "use_tuned", False))
        self.directory = tuned_path(self.root, configured_dir(cfg))
        self.refresh()

    def refresh(self) -> Config:
        """The config to search with now (reloads when tuned.json changed)."""
        if not self.enabled:
            return self.cfg
        try:
            st = (self.directory / TUNED_FILE).stat()
            stamp: tuple | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return self.cfg
        self._stamp = stamp
        self.cfg, self.intent, self.applied = self.base, None, {}
        data = read_tuned(self.directory) if stamp is not None else None
        if data is None:
            return self.cfg
        params = data.get("params") if isinstance(data.get("params"), dict) else {}
        self.cfg, self.applied = apply_params(self.base, params, self.directory)
        if data.get("intent_model"):
            self.intent = _load_intent(self.directory, data["intent_model"])
        return self.cfg

    def route(self, query: str, defined: Sequence[str], decision: RouteDecision) -> RouteDecision:
        """The learned model's decision where it is sure enough, else ``decision``."""
        if self.intent is None or getattr(decision, "source", "") != "router":
            return decision
        scfg = self.cfg.search
        try:
            return self.intent.decide(
                query, defined, decision, scfg.route_drop_confidence, scfg.min_route_weight
            )
        except Exception as e:  # noqa: BLE001 - a bad model must not break search
            log.warning("learned intent model failed (%s): heuristic router used", e)
            self.intent = None
            return decision


def _load_intent(directory: Path, name: Any) -> IntentModel | None:
    """The intent model ``tuned.json`` names: a file of the tuned directory itself (a bare
    name: ``/dev/zero`` or ``../../x`` are refused), read bounded."""
    from llmc.errors import ModelError
    from llmc.models.vet import read_json_bounded

    if not _own_name(name):
        log.warning("%s names intent model %r, not a file of its own folder: the heuristic "
                    "router is used", directory / TUNED_FILE, name)  # fmt: skip
        return None
    path = directory / name
    try:
        data = read_json_bounded(path, MAX_TUNED_BYTES, "intent model", follow=False)
        return IntentModel.from_json(data)
    except ModelError as e:
        log.warning("%s: the heuristic router is used", e)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("%s is unusable (%s): the heuristic router is used", path, e)
    return None


__all__ = [
    "FORMAT",
    "INTENT_FILE",
    "IN_DIR",
    "TUNABLE_KEYS",
    "TUNED_FILE",
    "TunedOverlay",
    "apply_params",
    "configured_dir",
    "read_tuned",
    "tuned_path",
]
