"""Indexing: classify files, cut them into spans, keep the index fresh."""

from llmc.index.chunk import chunk_file
from llmc.languages import detect_language, grammar_name, has_grammar

__all__ = ["chunk_file", "detect_language", "grammar_name", "has_grammar"]
