"""Typed configuration.

Precedence, lowest first: built-in defaults < ``~/.config/llmc/config.toml`` (XDG) <
``<repo>/llmc.toml`` < ``LLMC_<SECTION>__<KEY>`` environment variables < command-line flags.
Every value remembers where it came from (``llmc config`` prints it). The sections and
their keys are ``llmc/config_sections.py``'s; this module reads, layers and checks them.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmc.config_sections import (  # the sections; re-exported: llmc.config names them
    DaemonConfig,
    EmbeddingConfig,
    EvalConfig,
    ExpandConfig,
    GraphConfig,
    HydeConfig,
    IndexConfig,
    LearnConfig,
    LLMConfig,
    LLMRerankConfig,
    RerankConfig,
    SearchConfig,
    TeamConfig,
)
from llmc.errors import ConfigError

log = logging.getLogger(__name__)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_PREFIX = "LLMC_"
REPO_CONFIG_NAME = "llmc.toml"


@dataclass
class Config:
    index: IndexConfig = field(default_factory=IndexConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    expand: ExpandConfig = field(default_factory=ExpandConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    llm_rerank: LLMRerankConfig = field(default_factory=LLMRerankConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    hyde: HydeConfig = field(default_factory=HydeConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    learn: LearnConfig = field(default_factory=LearnConfig)
    team: TeamConfig = field(default_factory=TeamConfig)
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # key → (value, file, why) for what a repository's llmc.toml tried to set and may not
    ignored: dict[str, tuple[Any, str, str]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def items(self) -> list[tuple[str, Any, str]]:
        """Every ``section.key``, its effective value and where it came from."""
        out = []
        for section in _sections():
            obj = getattr(self, section.name)
            for f in dataclasses.fields(obj):
                key = f"{section.name}.{f.name}"
                out.append((key, getattr(obj, f.name), self.sources.get(key, "default")))
        return out

    # -- one dotted key (``search.rrf_k``) at a time: eval variants, tune, the tuned overlay
    def has(self, key: str) -> bool:
        """Whether ``key`` (``section.name``) is a key of this build's config."""
        section_name, _, name = key.partition(".")
        section = getattr(self, section_name, None) if section_name != "sources" else None
        if section is None or not dataclasses.is_dataclass(section):
            return False
        return name in {f.name for f in dataclasses.fields(section)}

    def get(self, key: str) -> Any:
        """The value of ``key`` (``section.name``)."""
        section_name, _, name = key.partition(".")
        return getattr(getattr(self, section_name), name)

    def set(self, key: str, value: Any, source: str) -> None:
        """Set ``key`` to ``value`` as given (callers pass typed values) and record that it
        came from ``source``. User input goes through ``load_config``, which checks types."""
        section_name, _, name = key.partition(".")
        setattr(getattr(self, section_name), name, value)
        self.sources[key] = source

    def with_values(self, values: typing.Mapping[str, Any], source: str) -> Config:
        """A deep copy of this config with ``values`` set (see ``set``)."""
        out = copy.deepcopy(self)
        for key, value in values.items():
            out.set(key, value, source)
        return out


def _sections() -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(Config) if f.name not in ("sources", "ignored"))


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "llmc" / "config.toml"


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _expected(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (list,):
        return "a list of strings"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(a) for a in typing.get_args(tp))
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, str(tp)
    )


def _coerce(value: Any, tp: Any, where: str, key: str, from_text: bool) -> Any:
    """Check (TOML) or parse (env / flag text) ``value`` against the declared type."""
    origin = typing.get_origin(tp)
    bad = ConfigError(f"{where}: {key} must be {_expected(tp)}, got {value!r}")
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None or (from_text and value in ("", "none", "null")):
            if type(None) in args:
                return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where, key, from_text)
            except ConfigError:
                continue
        raise bad
    if origin is list:
        if from_text and isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise bad
    if tp is bool:
        if isinstance(value, bool):
            return value
        if from_text and isinstance(value, str):
            low = value.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if from_text and isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                raise bad from None
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if from_text and isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad from None
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    raise bad  # pragma: no cover


def _set(cfg: Config, key: str, value: Any, source: str, from_text: bool) -> None:
    section_name, _, name = key.partition(".")
    sections = {f.name: f for f in _sections()}
    if section_name not in sections:
        raise ConfigError(
            f"{source}: unknown section [{section_name}] (expected one of: "
            f"{', '.join(sorted(sections))})"
        )
    section = getattr(cfg, section_name)
    hints = _hints(type(section))
    if name not in hints:
        known = ", ".join(sorted(hints))
        raise ConfigError(f"{source}: unknown key {key} (known keys in [{section_name}]: {known})")
    cfg.set(key, _coerce(value, hints[name], source, key, from_text), source)


def _load_toml(cfg: Config, path: Path, from_repo: bool = False) -> None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    refused: list[str] = []
    for section_name, body in data.items():
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: {section_name} must be a [section] table, got {body!r}")
        for name, value in body.items():
            key = f"{section_name}.{name}"
            if from_repo and _repo_refuses(cfg, key, value, path):
                refused.append(key)
                continue
            _set(cfg, key, value, str(path), from_text=False)
    if refused:
        from llmc.repo_config import ignored_warning

        shown = {key: cfg.ignored[key] for key in refused}
        log.warning("%s", ignored_warning(str(path), shown, str(user_config_path())))


def _repo_refuses(cfg: Config, key: str, value: Any, path: Path) -> bool:
    """True (and the key recorded in ``cfg.ignored``) when a repository's ``llmc.toml`` may
    not set ``key`` to ``value`` (``llmc.repo_config``). An unknown key or a badly typed
    value is still the usual one-line error."""
    from llmc.repo_config import why_ignored

    section_name, _, name = key.partition(".")
    if section_name not in {f.name for f in _sections()}:
        return False  # the usual error names the known sections
    hints = _hints(type(getattr(cfg, section_name)))
    if name not in hints:
        return False  # the usual error names the known keys
    why = why_ignored(key, lambda: _coerce(value, hints[name], str(path), key, False))
    if why is None:
        return False
    cfg.ignored[key] = (value, str(path), why)
    return True


def _load_env(cfg: Config, environ: typing.Mapping[str, str]) -> None:
    for var, value in sorted(environ.items()):
        if not var.startswith(ENV_PREFIX) or "__" not in var:
            continue
        section_name, _, name = var[len(ENV_PREFIX) :].partition("__")
        _set(cfg, f"{section_name.lower()}.{name.lower()}", value, f"env {var}", from_text=True)


def load_config(
    repo: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: typing.Mapping[str, str] | None = None,
    user_path: Path | None = None,
) -> Config:
    """Build the effective config for ``repo``; ``overrides`` are command-line flags."""
    cfg = Config()
    user = user_path if user_path is not None else user_config_path()
    if user.is_file():
        _load_toml(cfg, user)
    if repo is not None and (repo / REPO_CONFIG_NAME).is_file():
        _load_toml(cfg, repo / REPO_CONFIG_NAME, from_repo=True)
    _load_env(cfg, os.environ if environ is None else environ)
    for key, value in (overrides or {}).items():
        if value is not None:
            _set(cfg, key, value, "flag", from_text=isinstance(value, str))
    return cfg


__all__ = [
    "Config",
    "DaemonConfig",
    "EmbeddingConfig",
    "EvalConfig",
    "ExpandConfig",
    "GraphConfig",
    "HydeConfig",
    "IndexConfig",
    "LLMConfig",
    "LLMRerankConfig",
    "LearnConfig",
    "RerankConfig",
    "SearchConfig",
    "load_config",
]
