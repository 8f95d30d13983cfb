"""What a request (REST ``config``, and through it `llmc search` talking to a daemon) may set.

A request may change how one query is answered, never what the daemon is: stage switches,
depths, weights, the ranker and fusion choice, HyDE and rerank gates. Keys that name a
host, a URL, a path, a model, a device, a runtime, a prefix, thread counts, or anything
else that would load a model or open a session are not on the list (``QUERY_KEYS``): a
value for one of them that differs from the daemon's own is refused, naming the key.
Values are checked against the config's declared types and against the bounds below, so
a request cannot ask for a million candidates either.

``request_overrides(cfg, config)`` returns the typed values that differ from ``cfg``.
"""

from __future__ import annotations

import math
import typing
from typing import Any

from llmc.config import Config, _coerce, _hints
from llmc.errors import ConfigError, ConfigMismatch
from llmc.query_keys import DAEMON_SECTIONS, QUERY_KEYS, Rule  # noqa: F401 (re-exported)


class RequestConfigError(ConfigError):
    """A request's ``config`` names a key it may not set, or a bad value; ``key`` names it."""

    def __init__(self, key: str, message: str, refused: bool = False):
        super().__init__(message)
        self.key = key
        self.refused = refused  # the key itself may not be set (not just this value)


def _check(key: str, value: Any, tp: Any, rule: Rule) -> Any:
    """``value`` typed as ``tp`` (JSON carries types: no text parsing) and within ``rule``."""
    try:
        typed = _coerce(value, tp, "request config", key, from_text=False)
    except ConfigError as e:
        raise RequestConfigError(key, str(e)) from None
    items = typed if isinstance(typed, list) else [typed]
    for item in items:
        if rule.choices and item not in rule.choices:
            raise RequestConfigError(
                key,
                f"request config: {key} must be one of {', '.join(rule.choices)}, got {item!r}",
            )
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            bad = isinstance(item, float) and not math.isfinite(item)
            if (
                bad
                or (rule.lo is not None and item < rule.lo)
                or (rule.hi is not None and item > rule.hi)
            ):
                raise RequestConfigError(
                    key,
                    f"request config: {key} must be between {rule.lo:g} and {rule.hi:g}, got {item!r}",
                )
    return typed


def request_overrides(cfg: Config, config: typing.Mapping[str, Any]) -> dict[str, Any]:
    """The typed values of ``config`` (``section.key`` → value) that differ from ``cfg``.

    Raises ``RequestConfigError`` for a key outside ``QUERY_KEYS`` whose value differs from
    ``cfg``'s (clients such as `llmc search` send their whole config; equal values change
    nothing) or for a bad value, and ``ConfigMismatch`` for a key this llmc does not know
    (another version: its client works in-process instead).
    """
    out: dict[str, Any] = {}
    for key, value in sorted(config.items()):
        if not isinstance(key, str):
            raise RequestConfigError(str(key), f"config key {key!r} is not a string")
        section = key.split(".", 1)[0]
        if section in DAEMON_SECTIONS:
            raise RequestConfigError(
                key, f"config key {key!r} cannot be set per request", refused=True
            )
        if not cfg.has(key):
            raise ConfigMismatch(
                f"this daemon does not know config key {key!r} (it runs another llmc "
                "version; `llmc daemon stop` and start it again)"
            )
        rule = QUERY_KEYS.get(key)
        if rule is None:
            if value != cfg.get(key):
                raise RequestConfigError(
                    key,
                    f"config key {key!r} cannot be set per request (it configures the daemon, "
                    "not a query; see docs/daemon-api.md for the keys a request may set)",
                    refused=True,
                )
            continue
        tp = _hints(type(getattr(cfg, section)))[key.split(".", 1)[1]]
        typed = _check(key, value, tp, rule)
        if typed != cfg.get(key):
            out[key] = typed
    return out


__all__ = ["DAEMON_SECTIONS", "QUERY_KEYS", "RequestConfigError", "request_overrides"]
