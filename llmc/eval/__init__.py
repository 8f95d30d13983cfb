"""Evaluation: graded query sets, retrieval metrics, ablations and paired tests.

``llmc eval`` calls :func:`llmc.eval.runner.evaluate_set`; metrics and tests are pure
functions in ``metrics`` and ``stats``. docs/evaluation.md defines every number.
"""

from llmc.eval.queries import EvalQuery, Judgment, load_queries

__all__ = ["EvalQuery", "Judgment", "load_queries"]
