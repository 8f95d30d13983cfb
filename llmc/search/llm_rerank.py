"""LLM listwise stage: a local LLM orders the top few candidates, when it is worth asking.

Gate (``gate``): the stage runs when ``llm_rerank.always`` (``llmc search --llm-rerank``),
when the query is long (``min_query_words``) or complex (two or more connectives: and, or,
when, unless...), or when the top two are close: #1 leads #2 by at most ``close_margin`` of
the score spread over the window (a scale-free test: RRF, weighted and reranker scores).

Prompt (``build_prompt``): the query and the top ``top_n`` unpinned candidates, numbered
1..n, each cut to its place, its signature and its first ``snippet_lines`` lines; the
model judges only from that text, at temperature 0, and answers with a permutation, as a
JSON list (``[3, 1, 2]``) or a chain (``3 > 1 > 2``).

Budget: the call's timeout is ``budget_ms``, and a call that ``Pace`` predicts (from this
LLM's earlier calls in the process) to take longer is not made.

Validation (``parse_permutation``): every id exactly once, no unknown ids. Anything else (no
permutation, duplicates, unknown or missing ids, an LLM error, a timeout past the latency
budget ``budget_ms``) keeps the previous order, and the reason is logged and traced.
The new order takes over the old scores, best first, so scores still descend.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.search.types import Candidate

if TYPE_CHECKING:  # pragma: no cover
    from llmc.config import LLMRerankConfig
    from llmc.models.llm import LLM
    from llmc.types import StoredSpan

log = logging.getLogger(__name__)

LLM_RERANK = "llm_rerank"  # key of a candidate's place in the LLM's order (Candidate.scores)
SYSTEM = (
    "You rank code search results. Judge relevance to the query only from the text shown. "
    "Answer with the result ids, most relevant first, as a JSON list of numbers, and "
    "nothing else."
)
CONNECTIVES = re.compile(
    r"\b(and|or|but|when|while|unless|without|instead|whether|after|before|if|then)\b", re.I
)
MAX_LINE_CHARS = 160
MIN_ITEMS = 2


class Pace:
    """How fast each LLM has read prompts in this process (characters per second of a whole
    call, an exponential average), so a call the budget cannot fit is not made at all.

    A provider can stop generating at its timeout but not while it reads the prompt (the
    embedded llama.cpp does not), so a timeout alone does not bound the stage's latency.
    """

    def __init__(self, smoothing: float = 0.5):
        self.smoothing = smoothing
        self._rate: dict[tuple[str, str], float] = {}

    @staticmethod
    def _key(llm: LLM) -> tuple[str, str]:
        return (str(getattr(llm, "provider", "")), str(getattr(llm, "model", "")))

    def predict_ms(self, llm: LLM, chars: int) -> float | None:
        rate = self._rate.get(self._key(llm))
        return None if rate is None else chars / rate * 1000.0

    def observe(self, llm: LLM, chars: int, ms: float) -> None:
        rate = chars / max(ms, 1.0) * 1000.0
        old = self._rate.get(self._key(llm))
        new = rate if old is None else self.smoothing * rate + (1 - self.smoothing) * old
        self._rate[self._key(llm)] = new


PACE = Pace()  # one per process: the daemon and an eval run learn it once


class BadPermutation(ValueError):
    """The LLM's answer is not a permutation of the ids it was shown; the message says why."""


@dataclass(frozen=True)
class Listwise:
    """What the stage did: the candidates (reordered or not), and why."""

    candidates: tuple[Candidate, ...]
    applied: bool
    reason: str  # why it ran and what came of it, or why the order was kept
    order: tuple[int, ...] = ()  # the permutation of 1-based ids, when applied
    answer: str = ""  # the LLM's raw answer (shortened), for the trace
    ms: float = 0.0
    unavailable: bool = False  # no LLM answered (not configured, down, too slow)


def gate(query: str, candidates: Sequence[Candidate], cfg: LLMRerankConfig) -> str | None:
    """Why the LLM should rerank this query, or None when it is not worth the time."""
    window = [c for c in candidates if not c.pinned][: cfg.top_n]
    if len(window) < MIN_ITEMS:
        return None
    if cfg.always:
        return "asked for (llm_rerank.always / --llm-rerank)"
    words = len(query.split())
    if words >= cfg.min_query_words:
        return f"long query ({words} words)"
    joins = CONNECTIVES.findall(query)
    if len(joins) >= 2:
        return f"complex query ({', '.join(j.lower() for j in joins)})"
    if len(window) >= 3:  # how far #1 leads #2, as a share of the window's score spread
        s1, s2, last = window[0].score, window[1].score, window[-1].score
        spread = s1 - last
        if spread <= 0 or (s1 - s2) / spread <= cfg.close_margin:
            lead = (s1 - s2) / spread if spread > 0 else 0.0
            return f"close top scores ({s1:.4f} vs {s2:.4f}: {lead:.0%} of the top-{len(window)} spread)"
    return None


def _line(text: str) -> str:
    text = text.rstrip()
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 3] + "..."


def snippet_of(span: StoredSpan, lines: int) -> str:
    """A span cut with sense: its signature (when the index knows one), then its first
    ``lines`` non-blank lines."""
    body = [ln for ln in span.text.splitlines() if ln.strip()]
    sig = span.signature.strip()
    out = []
    if sig and not (body and body[0].strip().startswith(sig.splitlines()[0].strip())):
        out.append(_line(sig.splitlines()[0]))
    out += [_line(ln) for ln in body[:lines]]
    if len(body) > lines:
        out.append("    ...")
    return "\n".join(out)


def build_prompt(query: str, spans: Sequence[StoredSpan], snippet_lines: int) -> str:
    """The user turn: the query, then the numbered snippets, then the answer format."""
    parts = [f"Query: {query}", ""]
    for i, span in enumerate(spans, start=1):
        name = f" {span.qualname or span.symbol}" if (span.qualname or span.symbol) else ""
        parts.append(f"[{i}] {span.path}:{span.start_line}-{span.end_line}{name}")
        parts.append(snippet_of(span, snippet_lines))
        parts.append("")
    n = len(spans)
    # The example has another length than the answer: a model that parrots it fails the
    # validation instead of passing off the example's order as its judgment.
    example = "for four results: [3, 1, 4, 2]" if n != 4 else "for three results: [2, 3, 1]"
    parts.append(
        f"Rank all {n} results by relevance to the query, most relevant first. Answer with "
        f"a JSON list that contains each id from 1 to {n} exactly once (the format, "
        f"{example})."
    )
    return "\n".join(parts)


_JSON_LIST = re.compile(r"\[[^\[\]]*\]")
_CHAIN = re.compile(r"\[?\d+\]?(?:\s*>\s*\[?\d+\]?)+")


def parse_permutation(text: str, n: int) -> tuple[int, ...]:
    """The ids 1..n in the answer's order; BadPermutation unless each appears exactly once."""
    found: list[list[int]] = []  # every JSON list of ids and every "a > b" chain
    for m in _JSON_LIST.finditer(text):
        try:
            value = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(value, list) and value and all(_is_id(v) for v in value):
            found.append([int(v) for v in value])
    found += [[int(x) for x in re.findall(r"\d+", m.group(0))] for m in _CHAIN.finditer(text)]
    ids = max(found, key=len) if found else None  # the longest; the first among equals
    if ids is None:
        shown = " ".join(text.split())[:80]
        raise BadPermutation(f"no permutation in the answer ({shown!r})")
    unknown = sorted({i for i in ids if not 1 <= i <= n})
    if unknown:
        raise BadPermutation(f"unknown id(s) {', '.join(map(str, unknown))} (ids are 1-{n})")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise BadPermutation(f"duplicate id(s) {', '.join(map(str, dupes))}")
    missing = [i for i in range(1, n + 1) if i not in ids]
    if missing:
        raise BadPermutation(
            f"partial order: {len(ids)} of {n} ids, missing {', '.join(map(str, missing))}"
        )
    return tuple(ids)


def _is_id(v: object) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, str) and v.strip().isdigit()


def llm_rerank(
    query: str,
    candidates: Sequence[Candidate],
    spans: Mapping[int, StoredSpan],
    llm: LLM,
    cfg: LLMRerankConfig,
    why: str,
    pace: Pace = PACE,
) -> Listwise:
    """Ask ``llm`` to order the top ``cfg.top_n`` unpinned candidates; ``why``: the gate's
    reason, kept in the trace. Any failure keeps the order, with the reason. ``pace``
    skips a call predicted to take longer than ``cfg.budget_ms``."""
    cands = list(candidates)
    head = [c for c in cands if c.pinned]
    others = [c for c in cands if not c.pinned and c.span_id in spans]
    window = others[: max(0, cfg.top_n)]
    if len(window) < MIN_ITEMS:
        return Listwise(tuple(cands), False, f"{why}; fewer than {MIN_ITEMS} candidates")
    prompt = build_prompt(query, [spans[c.span_id].span for c in window], cfg.snippet_lines)
    started = time.perf_counter()
    budget = max(0.001, cfg.budget_ms / 1000.0)
    chars = len(prompt) + len(SYSTEM)
    predicted = pace.predict_ms(llm, chars)
    if predicted is not None and predicted > cfg.budget_ms:
        reason = (
            f"{why}; skipped: this LLM would take about {predicted:.0f} ms for the prompt, "
            f"past the {cfg.budget_ms:.0f} ms budget"
        )
        return _kept(cands, reason, started)
    try:
        answer = llm.generate(
            prompt,
            system=SYSTEM,
            max_tokens=cfg.max_tokens,
            temperature=0.0,
            stop=["\n\n"],
            timeout=budget,
            seed=0,
        ).text
    except LLMTimeout as e:
        pace.observe(llm, chars, (time.perf_counter() - started) * 1000)
        reason = f"{why}; timeout past the {cfg.budget_ms:.0f} ms budget ({e})"
        return _kept(cands, reason, started, unavailable=True)
    except LLMUnavailable as e:
        return _kept(cands, f"{why}; LLM unavailable ({e})", started, unavailable=True)
    ms = (time.perf_counter() - started) * 1000
    pace.observe(llm, chars, ms)
    if ms > cfg.budget_ms:
        return _kept(cands, f"{why}; answered in {ms:.0f} ms, past the budget", started, answer)
    try:
        order = parse_permutation(answer, len(window))
    except BadPermutation as e:
        return _kept(cands, f"{why}; {e}", started, answer)
    scores = [c.score for c in window]
    chosen = {c.span_id for c in window}
    reordered = [
        replace(window[i - 1], score=scores[pos], scores={**window[i - 1].scores, LLM_RERANK: pos})
        for pos, i in enumerate(order)
    ]
    rest = [c for c in cands if not c.pinned and c.span_id not in chosen]
    note = "kept the order" if list(order) == list(range(1, len(window) + 1)) else "reordered"
    return Listwise(
        tuple(head + reordered + rest),
        True,
        f"{why}; {note}",
        order,
        _short(answer),
        ms,
    )


def _short(text: str) -> str:
    return " ".join(text.split())[:120]


def _kept(
    cands: list[Candidate],
    reason: str,
    started: float,
    answer: str = "",
    unavailable: bool = False,
) -> Listwise:
    log.info("llm rerank kept the previous order: %s", reason)
    ms = (time.perf_counter() - started) * 1000
    return Listwise(tuple(cands), False, reason, (), _short(answer), ms, unavailable)


__all__ = [
    "LLM_RERANK",
    "PACE",
    "BadPermutation",
    "Listwise",
    "Pace",
    "build_prompt",
    "gate",
    "llm_rerank",
    "parse_permutation",
    "snippet_of",
]
