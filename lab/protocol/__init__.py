"""llmc's evaluation protocol (docs/evaluation.md, "Protocol"): project splits as data
(``splits``, ``projects.json``), tasks generated from pinned projects over a corpus with
their answers' documentation stripped (``corpus``, ``docstring``), the baselines a user
would pick instead (``grep``; the ``rrf``, ``bm25-only``, ``dense-only`` variants), and
bootstrap CIs and paired tests of every system (``run``, ``report``); every kind of query in
one run, per kind and pooled, with the issue-28 verdicts (``kinds``, ``kinds_run``,
``kinds_markdown``)."""

from lab.protocol.run import SYSTEMS, TASKS, ProtocolReport, run_protocol
from lab.protocol.splits import SPLITS, SplitProject, protocol_projects, select_projects

__all__ = [
    "SPLITS",
    "SYSTEMS",
    "TASKS",
    "ProtocolReport",
    "SplitProject",
    "protocol_projects",
    "run_protocol",
    "select_projects",
]
