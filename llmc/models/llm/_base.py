"""The LLM interface every provider implements and its result record (errors: llmc.errors)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from llmc.errors import LLMUnavailable


@dataclass(frozen=True)
class Generation:
    """One completion. ``tokens`` and ``prompt_tokens`` are None where the provider is silent.

    ``finish_reason`` is ``"stop"`` (end of turn or a stop sequence, which is not included in
    ``text``) or ``"length"`` (``max_tokens`` reached).
    """

    text: str
    model: str
    provider: str
    latency_ms: float
    tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None


@runtime_checkable
class LLM(Protocol):
    """A chat model behind one call. Arguments left as None take the configured defaults
    (``[llm]`` max_tokens, temperature, timeout_s); ``seed`` makes sampling at
    temperature > 0 repeatable."""

    provider: str
    model: str

    def generate(
        self,
        prompt: str,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        timeout: float | None = None,
        seed: int | None = None,
    ) -> Generation: ...


@dataclass(frozen=True)
class Defaults:
    """What a provider uses for arguments left as None."""

    max_tokens: int = 256
    temperature: float = 0.0
    timeout_s: float = 30.0

    def resolve(
        self, max_tokens: int | None, temperature: float | None, timeout: float | None
    ) -> tuple[int, float, float]:
        return (
            max(1, int(self.max_tokens if max_tokens is None else max_tokens)),
            float(self.temperature if temperature is None else temperature),
            float(self.timeout_s if timeout is None else timeout),
        )


def messages(prompt: str, system: str | None) -> list[dict[str, str]]:
    """Chat messages for one turn; the provider applies the model's chat template."""
    out = [{"role": "system", "content": system}] if system else []
    out.append({"role": "user", "content": prompt})
    return out


def one_line(text: object) -> str:
    """A message squeezed to one line (server errors can span several)."""
    return " ".join(str(text).split())


class NoneLLM:
    """The ``none`` provider: every call raises LLMUnavailable saying why there is no LLM."""

    provider = "none"
    model = ""

    def __init__(self, reason: str = "disabled by config (llm.provider = none)"):
        self.reason = reason

    def generate(
        self,
        prompt: str,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        timeout: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        raise LLMUnavailable(f"no LLM: {self.reason}")

    def __repr__(self) -> str:
        return f"NoneLLM({self.reason!r})"
