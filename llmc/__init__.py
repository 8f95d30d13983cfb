"""llmc: a local-first code-repository assistant."""

__version__ = "0.1.0"
__all__ = ["__version__"]
