"""The team store: a shared index in PostgreSQL + pgvector that a team's repositories are
published to (``llmc team push``), one shard per repository (docs/scale.md)."""
