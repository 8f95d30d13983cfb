"""One exception tree for llmc: every error a user can act on, and its exit status.

The CLI (``llmc/cli/options.py``) turns any LlmcError into one line on stderr and exits
with the error's ``exit_code``; the daemon turns them into JSON error objects. Library
errors from sqlite3, tantivy, ollama, HTTP... are wrapped into these where they enter.

    LlmcError                      1  base: a problem the user can act on
    ├── ConfigError                1  a config file, env var or flag is malformed
    ├── IndexMissingError          1  no index yet (run `llmc index`)
    │   └── GraphMissingError      1  no graph yet, or it cannot be read
    ├── IndexLockedError           1  another process holds the writer lock
    ├── StoreError                 1  SQLite or the lexical index failed
    ├── ModelError                 1  a model could not be loaded or run
    │   └── LLMUnavailable         1  no answer from the LLM (callers degrade)
    │       └── LLMTimeout         1  the LLM was too slow
    ├── SymbolNotFoundError        1  no graph node matches a name
    ├── AmbiguousSymbolError       2  several nodes match (`llmc graph` lists them)
    ├── UnsafeSocketError          1  the daemon socket is not safely this user's
    ├── DaemonUnavailable          3  no daemon answers (`llmc daemon status`)
    ├── DaemonError                1  the daemon answered with an error status
    ├── AlreadyRunning             1  another daemon holds the repository
    ├── ConfigMismatch             1  a client sent a config key this daemon lacks
    ├── ApiError                   1  a request the daemon refuses (an HTTP status)
    ├── HookError                  1  git hooks cannot be found or written
    ├── EvalError                  1  an eval query file, set or project is unusable
    ├── LearnError                 1  labels, mined sets or tuning cannot go on
    ├── TrainError                 1  a training project cannot be fetched or is not allowed
    └── TeamError                  1  the team store cannot be reached, refuses or is newer
"""

from __future__ import annotations

from typing import Any


class LlmcError(Exception):
    """Base class for errors a user can act on; ``exit_code`` is the CLI's exit status."""

    exit_code: int = 1


# -- configuration, index, store, models ------------------------------------------------
class ConfigError(LlmcError):
    """A config file, env var or flag is malformed."""


class IndexMissingError(LlmcError):
    """No index exists yet for the repository."""


class GraphMissingError(IndexMissingError):
    """There is no graph yet (or it cannot be read)."""


class IndexLockedError(LlmcError):
    """Another process holds the index writer lock."""


class StoreError(LlmcError):
    """The SQLite store or lexical index failed."""


class ModelError(LlmcError):
    """A model could not be loaded or run."""


class LLMUnavailable(ModelError):
    """No answer from the LLM: no provider, server down, model missing or broken, bad reply.

    Callers degrade (plain retrieval) and show the message as one line; never a traceback.
    """


class LLMTimeout(LLMUnavailable):
    """The LLM did not finish within the timeout."""


# -- graph queries ----------------------------------------------------------------------
class SymbolNotFoundError(LlmcError):
    """No node matches a name; ``suggestions`` holds close names."""

    def __init__(self, message: str, suggestions: list[str] | None = None):
        super().__init__(message)
        self.suggestions = suggestions or []


class AmbiguousSymbolError(LlmcError):
    """Several nodes match a name; ``candidates`` lists them, best first."""

    exit_code = 2

    def __init__(self, message: str, candidates: list[str]):
        super().__init__(message)
        self.candidates = candidates


# -- the daemon -------------------------------------------------------------------------
class UnsafeSocketError(LlmcError):
    """The daemon socket, or its directory, is not safely this user's: llmc will not use it."""


class DaemonUnavailable(LlmcError):
    """No daemon answered on the socket."""

    exit_code = 3


class DaemonError(LlmcError):
    """The daemon answered with an error status."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code


class AlreadyRunning(LlmcError):
    """Another daemon holds this repository's lock."""


class ConfigMismatch(LlmcError):
    """A client sent a config key this daemon's llmc does not have."""


class ApiError(LlmcError):
    """A request the daemon refuses; ``status`` is the HTTP status, ``code`` a stable word."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code

    def to_json(self) -> dict[str, Any]:
        return {"error": {"status": self.status, "code": self.code, "message": str(self)}}


# -- hooks, evaluation, learning, training ----------------------------------------------
class HookError(LlmcError):
    """The hooks directory cannot be found or written."""


class EvalError(LlmcError):
    """An eval query file, set or project cannot be used."""


class LearnError(LlmcError):
    """Labels, mined sets or tuning cannot go on (bad input, too few queries...)."""


class TrainError(LlmcError):
    """A training project cannot be fetched, or is not allowed."""


class TeamError(LlmcError):
    """The team store (PostgreSQL) cannot be reached, refuses the credentials, holds a
    schema this llmc does not know, or a publish lost to another."""


__all__ = [
    "AlreadyRunning",
    "AmbiguousSymbolError",
    "ApiError",
    "ConfigError",
    "ConfigMismatch",
    "DaemonError",
    "DaemonUnavailable",
    "EvalError",
    "GraphMissingError",
    "HookError",
    "IndexLockedError",
    "IndexMissingError",
    "LLMTimeout",
    "LLMUnavailable",
    "LearnError",
    "LlmcError",
    "ModelError",
    "StoreError",
    "SymbolNotFoundError",
    "TeamError",
    "TrainError",
    "UnsafeSocketError",
]
