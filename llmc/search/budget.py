"""The latency budget of one query, and the cost model it is spent by.

``search.budget_ms`` (150 by default: what a 2-core CPU keeps at p95 with every default
stage) is what a query may take. The costly stages ask before they run: HyDE's LLM
(``hyde.llm``: one hypothesis), the cross-encoder (``rerank.pair``: one (query, span)
pair, times the top K) and the LLM listwise rerank (``llm_rerank.call``). A stage whose
expected cost is more than what is left of the budget is skipped with a trace note
("hyde skipped: expected 1,550 ms > budget 150 ms"), unless the user switched
it on (``explicit``: ``--hyde``, ``--rerank``, ``--llm-rerank``, the stage's switch set in
llmc.toml, an environment variable, a request or an eval variant; ``search.budget_ms = 0``
switches the budget off).

Expected costs are learned on the machine (``CostModel``): every answered query records its
stage timings, per device kind, as an exponentially weighted mean and the 95th percentile of
the last ``WINDOW`` timings, in ``.llmc/costs.json`` (JSON data only, validated on read, a bad
file is ignored, written atomically). Until a stage has ``MIN_SAMPLES`` timings the prior
below is its cost: conservative, measured on a 2-core CPU and an H100 (docs/hyde.md,
docs/evaluation.md, benchmarks/README.md).

The profile (``search.profile``, resolved by llmc.models.device.machine_profile) says which
stages a machine class switches on by default (``PROFILE_STAGES``, ``apply_profile``): only
stages that won on validation projects, and today none does, so both profiles run the same
default stages; what differs is the device the costs are learned and the priors kept for
(the cross-encoder's top 20: ~600 ms on a 2-core CPU, ~12 ms on an H100). A stage a
profile adds is judged by the budget; one the user asks for runs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.config import Config

log = logging.getLogger(__name__)

COSTS_NAME = "costs.json"
VERSION = 1
WINDOW = 64  # timings kept per stage for the quantile
QUANTILE = 0.95
SMOOTHING = 0.2  # weight of a new timing in the exponentially weighted mean
MIN_SAMPLES = 3  # timings before the learned cost replaces the prior
MAX_FILE_BYTES = 512 * 1024
MAX_STAGES = 64
SAVE_EVERY = 16  # queries between writes of the cost file (and at close)
SAVE_AFTER_S = 30.0

HYDE_LLM = "hyde.llm"  # one hypothesis generated (not cached), per LLM provider
HYDE_REST = "hyde.search"  # the rest of the HyDE stage: embedding, searches, Rocchio
RERANK_PAIR = "rerank.pair"  # one (query, span) pair scored by the cross-encoder
LLM_RERANK_CALL = "llm_rerank.call"  # one listwise call of the LLM, per provider

# Priors per device kind (ms). CPU: SmolLM2-135M writes a hypothesis in 1.5-4 s on 2 cores
# (docs/hyde.md); the cross-encoder costs ~600 ms for 20 pairs (docs/evaluation.md); a
# listwise call of the same LLM reads ~8 snippets first. GPU (H100): the cross-encoder costs
# ~11 ms for 20 pairs (benchmarks/README.md); the LLM runs where its provider runs, so its
# prior stays high until this machine has timed it.
PRIORS: dict[str, dict[str, float]] = {
    "cpu": {HYDE_LLM: 1500.0, HYDE_REST: 50.0, RERANK_PAIR: 30.0, LLM_RERANK_CALL: 2500.0},
    "gpu": {HYDE_LLM: 500.0, HYDE_REST: 20.0, RERANK_PAIR: 0.6, LLM_RERANK_CALL: 800.0},
}


def device_kind(device: str) -> str:
    """The cost model's key of a device: ``cpu``, else ``gpu`` (cuda, mps)."""
    return "cpu" if device == "cpu" else "gpu"


@dataclass
class StageCost:
    """What the machine has measured of one stage: count, weighted mean, recent timings."""

    n: int = 0
    mean: float = 0.0
    recent: list[float] = field(default_factory=list)

    def add(self, ms: float) -> None:
        self.mean = ms if self.n == 0 else SMOOTHING * ms + (1 - SMOOTHING) * self.mean
        self.n += 1
        self.recent = (self.recent + [ms])[-WINDOW:]

    def quantile(self, q: float = QUANTILE) -> float:
        """The nearest-rank ``q`` quantile of the recent timings (0 when there are none)."""
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mean": round(self.mean, 3),
            "recent": [round(x, 3) for x in self.recent],
        }

    @classmethod
    def from_json(cls, data: object) -> StageCost:
        """Validated: a non-negative count, finite non-negative numbers; ValueError if not."""
        if not isinstance(data, dict):
            raise ValueError("a stage is not an object")
        n, mean, recent = data.get("n"), data.get("mean"), data.get("recent")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("bad count")
        if not isinstance(recent, list) or len(recent) > WINDOW:
            raise ValueError("bad recent timings")
        values = [mean, *recent]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e9:
                raise ValueError("bad timing")
        return cls(n, float(mean), [float(x) for x in recent])


@dataclass(frozen=True)
class Estimate:
    ms: float
    source: str  # "prior" or "learned from N queries"


class CostModel:
    """Stage costs per device kind, learned from the queries this repository answered.

    ``path`` None keeps them in memory only. Never raises for its file: unreadable, foreign
    or malformed is a fresh start (one debug line); an unwritable one is not written."""

    def __init__(self, path: Path | None):
        self.path = path
        self.stages: dict[str, dict[str, StageCost]] = {}
        self._dirty = 0
        self._saved_at = time.monotonic()
        if path is not None:
            self.stages = _read(path)

    def stage(self, device: str, name: str) -> StageCost | None:
        return self.stages.get(device_kind(device), {}).get(name)

    def expect(self, device: str, name: str, prior: float | None = None) -> Estimate:
        """A stage's expected cost: the larger of the weighted mean and the 95th percentile
        once measured ``MIN_SAMPLES`` times, else the prior."""
        kind = device_kind(device)
        base = name.split(":", 1)[0]  # "hyde.llm:embedded" has the prior of "hyde.llm"
        if prior is None:
            prior = PRIORS[kind].get(base, 0.0)
        cost = self.stages.get(kind, {}).get(name)
        if cost is None or cost.n < MIN_SAMPLES:
            return Estimate(prior, "prior")
        return Estimate(max(cost.mean, cost.quantile()), f"learned from {cost.n} timings")

    def observe(self, device: str, name: str, ms: float) -> None:
        if not (isinstance(ms, (int, float)) and math.isfinite(ms) and ms >= 0):
            return
        per_device = self.stages.setdefault(device_kind(device), {})
        if name not in per_device and len(per_device) >= MAX_STAGES:
            return
        per_device.setdefault(name, StageCost()).add(float(ms))
        self._dirty += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "devices": {
                kind: {name: c.to_json() for name, c in sorted(stages.items())}
                for kind, stages in sorted(self.stages.items())
            },
        }

    def maybe_save(self, force: bool = False) -> None:
        """Write the file every ``SAVE_EVERY`` queries, after ``SAVE_AFTER_S``, or when forced
        (a Searcher closing); never when nothing changed."""
        if self.path is None or not self._dirty:
            return
        due = time.monotonic() - self._saved_at >= SAVE_AFTER_S or self._dirty >= SAVE_EVERY
        if force or due:
            _write(self.path, self.to_json())
            self._dirty = 0
            self._saved_at = time.monotonic()


def costs_path(root: Path) -> Path:
    from llmc.paths import state_dir

    return state_dir(Path(root)) / COSTS_NAME


def _read(path: Path) -> dict[str, dict[str, StageCost]]:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            raise ValueError("not a regular file of a sensible size")
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("unknown version")
        devices = data.get("devices")
        if not isinstance(devices, dict):
            raise ValueError("no devices")
        out: dict[str, dict[str, StageCost]] = {}
        for kind, stages in devices.items():
            if kind not in PRIORS or not isinstance(stages, dict) or len(stages) > MAX_STAGES:
                raise ValueError(f"bad device {kind!r}")
            out[kind] = {
                str(name): StageCost.from_json(c) for name, c in stages.items() if len(name) < 80
            }
        return out
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as e:
        log.debug("%s ignored (%s): stage costs start from the priors", path, e)
        return {}


def _write(path: Path, data: Mapping[str, Any]) -> None:
    """Temp file (0600, not following links) and rename; only into an existing ``.llmc/``."""
    directory = path.parent
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return
        tmp = directory / f".{path.name}.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError as e:
        log.debug("stage costs not written to %s: %s", path, e)


# -- one query -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    run: bool
    note: str  # for the trace: why it runs or why it was skipped


class Budget:
    """One query's budget: what is left of ``limit_ms`` since ``started``, the cost model,
    the device kind it measures on. ``limit_ms`` 0: no budget. ``once`` says how much of the
    time so far went to what a process pays once (opening the index, loading a model): not
    counted, so a cold `llmc search` decides as a warm daemon does."""

    def __init__(
        self,
        limit_ms: float,
        started: float,
        costs: CostModel,
        device: str = "cpu",
        once: Callable[[], float] | None = None,
    ):
        self.limit_ms = float(limit_ms)
        self.started = started
        self.costs = costs
        self.device = device
        self.once = once
        self._paid_once = 0.0

    def paid_once(self, ms: float) -> None:
        """A stage paid ``ms`` for something a process does once (resolving the LLM
        provider): not spent from this query's budget."""
        self._paid_once += max(0.0, ms)

    def left_ms(self) -> float:
        spent = (time.perf_counter() - self.started) * 1000 - self._paid_once
        if self.once is not None:
            spent -= self.once()
        return self.limit_ms - max(0.0, spent)

    def expect(self, name: str, units: float = 1.0, extra: str = "") -> float:
        """Expected cost of ``units`` times stage ``name`` (``extra``: a second stage added
        once, e.g. HyDE's search after its hypotheses)."""
        ms = self.costs.expect(self.device, name).ms * units
        return ms + (self.costs.expect(self.device, extra).ms if extra else 0.0)

    def allow(self, stage: str, expected_ms: float, explicit: bool) -> Verdict:
        """Whether ``stage`` may run: asked for, no budget, or its expected cost fits."""
        if explicit:
            return Verdict(True, f"{stage}: asked for, runs whatever the budget")
        if self.limit_ms <= 0:
            return Verdict(True, f"{stage}: no latency budget (search.budget_ms = 0)")
        left = self.left_ms()
        if expected_ms <= left:
            return Verdict(
                True, f"{stage}: expected {_ms(expected_ms)} ms fits {_ms(left)} ms left"
            )
        # Over the whole budget says so without the time left, so the note is the same in
        # every run (a daemon's --explain and this process's agree); over what is left
        # names it.
        over = (
            f"budget {_ms(self.limit_ms)} ms"
            if expected_ms > self.limit_ms
            else f"the {_ms(max(left, 0))} ms left of the {_ms(self.limit_ms)} ms budget"
        )
        return Verdict(
            False,
            f"{stage} skipped: expected {_ms(expected_ms)} ms > {over}"
            " (--budget-ms, or ask for the stage)",
        )

    def observe(self, name: str, ms: float) -> None:
        self.costs.observe(self.device, name, ms)


def _ms(ms: float) -> str:
    return f"{ms:,.0f}"


# -- which stages a query may run --------------------------------------------------------------
def explicit(cfg: Config, key: str) -> bool:
    """Whether the user set ``key`` (a stage's switch) on: anywhere but the built-in defaults
    and the profile (a flag, llmc.toml, the environment, a request, an eval variant)."""
    source = cfg.sources.get(key, "default")
    return bool(cfg.get(key)) and source != "default" and not source.startswith("profile")


# The stages each profile switches on by default: only those that won on validation
# projects, measured on that machine class (docs/configuration.md, "Latency budget and profiles"). The
# cross-encoder fits a GPU's budget (top 20: p50 9.7 / p95 11.4 ms on an H100) but did not
# win on validation (+0.015 nDCG@10 on questions, -0.006 MRR@10 on docstrings, neither
# significant), and HyDE's LLM neither (-0.004 / +0.001): no profile switches them on.
# `--rerank` / `--hyde` still run them, and the budget still judges what a profile adds.
PROFILE_STAGES: dict[str, dict[str, Any]] = {"cpu": {}, "gpu": {}}


def apply_profile(cfg: Config, profile: str) -> Config:
    """``cfg`` with the profile's stages (``PROFILE_STAGES``) where the user left a switch at
    its default; a stage a profile adds is not ``explicit``, so the budget judges it. The
    input is not changed."""
    stages = {
        key: value
        for key, value in PROFILE_STAGES.get(profile, {}).items()
        if cfg.sources.get(key, "default") == "default" and cfg.get(key) != value
    }
    if not stages:
        return cfg
    return cfg.with_values(stages, f"profile {profile}")


__all__ = [
    "PRIORS",
    "PROFILE_STAGES",
    "Budget",
    "CostModel",
    "Estimate",
    "StageCost",
    "Verdict",
    "apply_profile",
    "costs_path",
    "device_kind",
    "explicit",
]
