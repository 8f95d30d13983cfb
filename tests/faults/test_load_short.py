"""A short run of ``benchmarks/bench_load.py``: a daemon under mixed concurrent traffic
while a writer edits, renames and deletes files. Correctness only: no time, throughput or
latency is asserted (those are the benchmark's to report)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_load  # noqa: E402 - lives in benchmarks/, found through the path above


def load_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMC_", "GIT_"))}
    env.update(
        HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", XDG_CONFIG_HOME=str(tmp_path / "xdg")
    )
    return env


@pytest.mark.slow
def test_daemon_under_mixed_load_answers_every_request_correctly(tmp_path):
    root = bench_load.make_repo(tmp_path / "repo", n_files=40)
    report = bench_load.run_load(
        root, load_env(tmp_path), n_clients=4, n_requests=200, n_changes=20, seed=3
    )
    assert report.problems() == []
    assert len(report.outcomes) == 200  # nothing dropped
    statuses = [o.status for o in report.outcomes]
    assert not [s for s in statuses if s >= 500]
    for kind, status in bench_load.EXPECTED_4XX.items():
        assert {o.status for o in report.outcomes if o.kind == kind} <= {status}, kind
    assert len(report.changes) == 20
