"""``llmc doctor``: what this machine can run. LLM providers (reachability, models; an
OpenAI-compatible server is probed when configured), the compute device, the search profile
with what each costly stage would use and whether the latency budget lets it run,
sqlite-vec and tree-sitter. Every check catches its own failure and turns it into a line;
only sqlite-vec and tree-sitter are required (``ok`` is False without them).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.config import Config


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = False
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "required": self.required, "detail": self.detail, **self.info}


@dataclass(frozen=True)
class DoctorReport:
    llm: dict[str, Any]
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "llm": self.llm, **{c.name: c.as_dict() for c in self.checks}}

    def lines(self) -> list[str]:
        """The human-readable report, one fact per line."""
        mark = {True: "ok  ", False: "--  "}
        llm = self.llm
        out = [f"llm: provider {llm['provider']} -> {llm['selected'] or 'none'}"]
        if llm.get("error"):
            out.append(f"  {llm['error']}")
        for p in llm["providers"]:
            where = f" {p['model']}" if p["model"] else ""
            where += f" ({p['location']})" if p["location"] else ""
            where += f" [{p['version']}]" if p["version"] else ""
            out.append(f"  {mark[p['available']]}{p['name']}{where}: {p['detail']}")
            if p["models"]:
                out.append(f"        models: {', '.join(p['models'])}")
        for c in self.checks:
            flag = mark[c.ok] if c.ok or not c.required else "FAIL"
            out.append(f"{flag}{c.name}: {c.detail}")
            for name, stage in c.info.get("stages", {}).items():
                why = stage.get("why", "")
                why = f": {why}" if why and not stage["runs"] else ""
                out.append(f"  {mark[stage['runs']]}{name}: {stage['uses']}{why}")
        return out


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def llm_section(cfg: Config) -> dict[str, Any]:
    from llmc.errors import LlmcError
    from llmc.models.llm import get_llm, provider_statuses

    out: dict[str, Any] = {"provider": cfg.llm.provider, "selected": "", "model": ""}
    try:
        llm = get_llm(cfg.llm)
        out["selected"], out["model"] = llm.provider, llm.model
    except LlmcError as e:
        out["error"] = str(e)
    out["providers"] = [s.as_dict() for s in provider_statuses(cfg.llm)]
    return out


def device_check(cfg: Config) -> Check:
    try:
        from llmc.models.device import pick_device

        choice = pick_device(cfg.embedding.device, cfg.embedding.precision)
    except ImportError as e:
        return Check("device", False, f"unknown (cannot import {e.name or e})")
    except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
        return Check("device", False, f"unknown ({type(e).__name__}: {e})")
    info = {"device": choice.device, "precision": choice.precision}
    return Check("device", True, choice.reason, info=info)


def profile_check(cfg: Config) -> Check:
    """``search.profile`` resolved on this machine, and the query budget."""
    from llmc.models.device import machine_profile

    try:
        profile = machine_profile(cfg.search.profile)
    except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
        return Check("profile", False, f"{type(e).__name__}: {e}")
    limit = cfg.search.budget_ms
    said = f"budget {limit:,.0f} ms a query" if limit > 0 else "no latency budget"
    info = {"profile": profile.name, "device": profile.device, "budget_ms": limit}
    return Check("profile", True, f"{profile.reason}; {said}", info=info)


def sqlite_vec_check() -> Check:
    try:
        from llmc.store.sqlite import connect, sqlite_module

        module = sqlite_module()
        conn = connect(":memory:")
        try:
            vec = conn.execute("select vec_version()").fetchone()[0]
            sqlite = conn.execute("select sqlite_version()").fetchone()[0]
        finally:
            conn.close()
    except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
        return Check("sqlite_vec", False, f"{type(e).__name__}: {e}", required=True)
    info = {"version": vec, "sqlite": sqlite, "module": module.__name__}
    return Check("sqlite_vec", True, f"{vec} on SQLite {sqlite} ({module.__name__})", True, info)


def tree_sitter_check() -> Check:
    try:
        from tree_sitter_language_pack import get_parser

        tree = get_parser("python").parse(b"def f():\n    return 1\n")
        if tree.root_node.has_error:
            raise ValueError("the python grammar failed to parse a two-line function")
    except Exception as e:  # noqa: BLE001 - doctor reports, never crashes
        return Check("tree_sitter", False, f"{type(e).__name__}: {e}", required=True)
    version = _version("tree-sitter")
    pack = _version("tree-sitter-language-pack")
    info = {"version": version, "language_pack": pack}
    detail = f"tree-sitter {version}, language pack {pack} (python grammar parses)"
    return Check("tree_sitter", True, detail, True, info)


# A check from a layer above the models (the search's stage plan: llmc.search.stage_check),
# handed in by the caller so that models/ never imports search/.
MoreCheck = Callable[[Config, "Path | None", dict[str, Any]], Check]


def run_doctor(
    cfg: Config, root: Path | None = None, more: Sequence[MoreCheck] = ()
) -> DoctorReport:
    """All checks; nothing is loaded beyond what a check needs (no LLM is loaded). ``root``:
    the repository whose learned stage costs (``.llmc/costs.json``) the budget reads;
    ``more``: checks that need what this layer cannot import, run after the profile's."""
    llm = llm_section(cfg)
    checks = (
        device_check(cfg),
        profile_check(cfg),
        *(check(cfg, root, llm) for check in more),
        sqlite_vec_check(),
        tree_sitter_check(),
    )
    return DoctorReport(llm=llm, checks=checks)


__all__ = ["Check", "DoctorReport", "run_doctor"]
