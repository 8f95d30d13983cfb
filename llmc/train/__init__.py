"""Training: the cross-encoder reranker that llmc ships (``llmc train reranker``).

Nothing here is imported by search or indexing; it needs the network (PyPI) and minutes
of compute, and writes a model directory that ``llmc.models.reranker`` loads.
"""

__all__: list[str] = []
