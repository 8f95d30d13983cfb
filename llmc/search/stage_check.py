"""`llmc doctor`'s stage plan: what each costly search stage would use on this machine and
whether it would run now (the profile, the stage's switch, the budget against the learned
or prior cost). It lives with the search, whose budget it reads; llmc.models.doctor runs it
as one of its checks (``run_doctor(..., more=[stages_check])``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from llmc.config import Config
from llmc.models.doctor import Check
from llmc.search import budget


def _embedding_use(cfg: Config, category: str) -> tuple[bool, str]:
    name = cfg.embedding.code_model if category == "code" else cfg.embedding.docs_model
    if not cfg.search.dense:
        return True, "off (search.dense = false)"
    if not name.startswith("openai:"):
        return True, f"{name} (local, {cfg.embedding.runtime} runtime)"
    from llmc.models.openai_http import ServerError, server

    try:
        status = server(cfg.embedding.base_url, cfg.embedding.api_key_env).probe(
            cfg.llm.probe_timeout_s
        )
    except ServerError as e:
        return False, f"{name}: {e}"
    if not status.reachable:
        return False, f"{name}: {status.error}"
    return True, f"{name} at {status.base_url} (reachable)"


def stages_check(cfg: Config, root: Path | None, llm: dict[str, Any]) -> Check:
    """What each costly stage would use on this machine, and whether it would run: the
    profile's offer, the switch, and the budget against the learned (or prior) cost."""
    from llmc.models.device import machine_profile

    try:
        profile = machine_profile(cfg.search.profile)
    except ValueError as e:
        return Check("stages", False, str(e))
    cfg = budget.apply_profile(cfg, profile.name)
    costs = budget.CostModel(budget.costs_path(root) if root is not None else None)
    model = f"{llm.get('selected') or 'none'}:{llm.get('model') or ''}".rstrip(":")
    provider = llm.get("selected") or "none"
    stages: dict[str, dict[str, Any]] = {}
    ok = True
    for category in ("code", "doc"):
        fine, uses = _embedding_use(cfg, category)
        ok = ok and fine
        stages[f"dense.{category}"] = {"uses": uses, "runs": fine and cfg.search.dense}

    def gated(name: str, on: bool, asked: bool, unit: str, units: float, uses: str) -> None:
        if not on:
            stages[name] = {"uses": uses, "runs": False, "why": f"off (search.{name})"}
            return
        spend = budget.Budget(cfg.search.budget_ms, time.perf_counter(), costs, profile.device)
        expected = spend.expect(unit, units, extra=budget.HYDE_REST if name == "hyde" else "")
        source = costs.expect(profile.device, unit).source
        verdict = spend.allow(name, expected, asked)
        stages[name] = {
            "uses": uses, "runs": verdict.run, "why": verdict.note,
            "expected_ms": round(expected, 1), "cost_from": source,
        }  # fmt: skip

    llm_on = provider != "none"
    hyde_units = cfg.hyde.n
    gated(
        "hyde", cfg.search.hyde and llm_on,
        cfg.hyde.mode == "always" or budget.explicit(cfg, "search.hyde"),
        f"{budget.HYDE_LLM}:{provider}", hyde_units, f"LLM {model}",
    )  # fmt: skip
    gated(
        "rerank", cfg.search.rerank, budget.explicit(cfg, "search.rerank"),
        budget.RERANK_PAIR, cfg.rerank.top_k,
        f"cross-encoder {cfg.rerank.model} on the top {cfg.rerank.top_k}",
    )  # fmt: skip
    gated(
        "llm_rerank", cfg.search.llm_rerank and llm_on,
        cfg.llm_rerank.always or budget.explicit(cfg, "search.llm_rerank"),
        f"{budget.LLM_RERANK_CALL}:{provider}", 1, f"LLM {model} on the top {cfg.llm_rerank.top_n}",
    )  # fmt: skip
    running = [n for n, s in stages.items() if s["runs"] and not n.startswith("dense")]
    detail = f"{', '.join(running) or 'no costly stage'} would run (a query's budget decides)"
    return Check("stages", ok, detail, info={"stages": stages})


__all__ = ["stages_check"]
