"""Training of every model llmc ships: the cross-encoder reranker, the code-tuned embedder,
the learned span ranker and the learned file ranker (``python -m lab train NAME``).

Nothing in ``llmc/`` imports this; it needs the network (PyPI, npm, git mirrors), minutes to
hours of compute and the ``lab`` extra (lightgbm), and writes model directories that
``llmc.models`` and ``llmc.search`` load as data (weights, JSON trees).
"""

__all__: list[str] = []
