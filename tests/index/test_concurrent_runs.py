"""Two `llmc index` runs at once embed each span once (issue 40, item 5).

Both used to embed everything ("embedded 1172, from cache 0" twice): the backfill takes the
writer lock per chunk only. Now one backfill embeds at a time; the other waits, says so
once, and finds the vectors in the cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repo_fixtures import make_repo

FILES = {
    f"pkg/mod{i}.py": "".join(
        f'def f{i}_{j}(x):\n    """Return x plus {i} and {j} for case {i * 100 + j}."""\n'
        f"    return x + {i} + {j}\n\n\n"
        for j in range(12)
    )
    for i in range(10)
}


def test_two_runs_at_once_embed_each_span_once(tmp_path):
    root = make_repo(tmp_path / "repo", FILES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["LLMC_NO_DAEMON"] = "1"
    cmd = [sys.executable, "-m", "llmc", "index", str(root), "--json", "--vectors", "here"]
    runs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [run.communicate(timeout=600) for run in runs]
    for run, (_, err) in zip(runs, outs, strict=True):
        assert run.returncode == 0, err
    summaries = [json.loads(out) for out, _ in outs]
    embedded = sorted(s["embedded"] for s in summaries)
    total = max(s["vectors"]["total"] for s in summaries)
    assert all(s["vectors"]["complete"] for s in summaries)
    assert total >= 120
    assert sum(embedded) == total, summaries  # no span embedded twice
    waits = [err.count("waiting for") for _, err in outs]
    assert max(waits) <= 2  # the writer lock and the embedding turn, each said once
