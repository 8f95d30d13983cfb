"""One exception tree for llmc; the CLI turns any LlmcError into one line and exit 1."""


class LlmcError(Exception):
    """Base class for errors a user can act on."""


class ConfigError(LlmcError):
    """A config file, env var or flag is malformed."""


class IndexMissingError(LlmcError):
    """No index exists yet for the repository."""


class IndexLockedError(LlmcError):
    """Another process holds the index writer lock."""


class StoreError(LlmcError):
    """The SQLite store or lexical index failed."""


class ModelError(LlmcError):
    """A model could not be loaded or run."""


class UnsafeSocketError(LlmcError):
    """The daemon socket, or its directory, is not safely this user's: llmc will not use it."""


__all__ = [
    "ConfigError",
    "IndexLockedError",
    "IndexMissingError",
    "LlmcError",
    "ModelError",
    "StoreError",
    "UnsafeSocketError",
]
