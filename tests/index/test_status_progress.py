"""Progress with ETAs, the run's progress file, and `llmc status` while another process
indexes: it answers at once with what is searchable, never fails or waits on the writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo
from waiting import wait_for

from llmc.cli import main
from llmc.index.backfill import Coverage
from llmc.index.live import LiveFile, live_path, read_live
from llmc.index.lock import IndexLock
from llmc.index.progress import LineProgress, PhaseClock, SaySearchable, Tee, duration
from llmc.index.status import graph_generation, searchable, writer_holder
from llmc.paths import ensure_state_dir, lock_path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_eta_is_the_phase_rate_so_far() -> None:
    clock = Clock()
    p = PhaseClock(clock)
    p.phase("parsing", 100)
    assert p.eta() is None  # no item yet
    clock.now += 10
    p.advance(25)
    assert p.eta() == 30.0  # 75 left at 2.5 a second
    assert p.line() == "parsing: 25 of 100 (25%), 10s elapsed, eta 30s"
    p.phase("graph", None)
    clock.now += 5
    assert p.eta() is None and p.line() == "graph, 5s elapsed"


def test_durations_read_as_people_write_them() -> None:
    assert [duration(s) for s in (0, 9.4, 96, 3600 + 5 * 60)] == ["0s", "9s", "1m 36s", "1h 05m"]


def test_plain_lines_come_every_interval_and_a_short_phase_prints_none() -> None:
    clock, lines = Clock(), []
    p = LineProgress(lines.append, every_s=10.0, clock=clock)
    p.phase("scanning", None)
    clock.now += 2
    p.phase("parsing", 40)  # scanning took 2 s: nothing said
    for _ in range(40):
        clock.now += 1
        p.advance()
    p.phase("embedding", 10)
    p.note("searchable now")
    p.close()
    assert lines == [
        "parsing: 10 of 40 (25%), 10s elapsed, eta 30s",
        "parsing: 20 of 40 (50%), 20s elapsed, eta 20s",
        "parsing: 30 of 40 (75%), 30s elapsed, eta 10s",
        "parsing: 40 of 40 (100%), 40s elapsed, eta 0s",
        "parsing: 40 in 40s",
        "searchable now",
    ]


def test_the_live_file_says_where_a_run_is_and_goes_with_it(tmp_path: Path) -> None:
    ensure_state_dir(tmp_path)
    clock, seen = Clock(), []

    class Seen:
        def phase(self, name, total):
            seen.append(("phase", name, total))

        def advance(self, n=1):
            seen.append(("advance", n))

        def note(self, message):
            seen.append(("note", message))

    live = LiveFile(tmp_path, "llmc index", clock=clock)
    tee = Tee(Seen(), live)
    tee.phase("parsing", 8)
    clock.now += 4
    tee.advance(2)
    state = read_live(tmp_path)
    assert state["pid"] == os.getpid() and state["phase"] == "parsing"
    assert (state["done"], state["total"], state["eta_s"]) == (2, 8, 12.0)
    assert oct(live_path(tmp_path).stat().st_mode & 0o777) == "0o600"
    assert seen == [("phase", "parsing", 8), ("advance", 2)]
    live.close()
    assert read_live(tmp_path) is None and not live_path(tmp_path).exists()


def test_a_dead_runs_live_file_or_a_bad_one_is_ignored(tmp_path: Path) -> None:
    ensure_state_dir(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    live_path(tmp_path).write_text(json.dumps({"pid": int(dead.stdout), "phase": "parsing"}))
    assert read_live(tmp_path) is None
    live_path(tmp_path).write_text("[1, 2")
    assert read_live(tmp_path) is None


def test_what_is_searchable_follows_the_generations() -> None:
    cov = Coverage.of({"code": (3, 10)})
    idle = searchable(5, 5, 5, 10, cov, busy=False)
    assert (idle.bm25, idle.exact, idle.graph) == ("yes", "yes", "yes")
    assert idle.line() == "searchable: BM25 yes, exact symbols yes, graph yes, vectors 3 of 10"
    cold = searchable(1, -1, -1, 400, cov, busy=True)  # a cold run, mid-parse
    assert (cold.bm25, cold.exact, cold.graph) == ("no", "partial", "building")
    lexical_done = searchable(1, 1, -1, 900, cov, busy=True)  # BM25 committed, graph next
    assert (lexical_done.bm25, lexical_done.exact, lexical_done.graph) == ("yes", "yes", "building")
    crashed = searchable(6, 5, 5, 900, cov, busy=False)  # a run died before its commit
    assert (crashed.bm25, crashed.graph) == ("stale", "behind")
    assert searchable(2, 2, 1, 9, cov, busy=False, graph_on=False).graph == "off"


def _status(root: Path) -> dict:
    result = CliRunner().invoke(main, ["status", "--repo", str(root), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_status_while_another_process_indexes_answers_with_what_is_searchable(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    ensure_state_dir(root)
    holder = IndexLock(lock_path(root))  # another writer: the cold run below must wait
    holder.acquire()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "llmc", "index", str(root), "--no-vectors", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert writer_holder(root)[0] == os.getpid()
        # No index.db yet, a run waiting: status says so instead of "no index"
        st = wait_for(
            lambda: (s := _status(root))["indexing"] and s["run"]["pid"] == child.pid and s,
            120, "the waiting run to show in llmc status",
        )  # fmt: skip
        assert st["searchable"]["bm25"] == "no" and st["fresh"] is False
        assert any("waiting for the index writer lock" in n for n in st["run"]["notes"])
        human = CliRunner().invoke(main, ["status", "--repo", str(root)])
        assert f"indexing (pid {child.pid}, llmc index)" in human.output
        assert "searchable: BM25 no" in human.output
    finally:
        holder.release()
    out, err = child.communicate(timeout=240)
    assert child.returncode == 0, err.decode()
    assert json.loads(out)["files_indexed"] == 5
    st = _status(root)
    assert not st["indexing"] and st["fresh"] and st["run"] is None
    assert st["searchable"]["bm25"] == "yes" and st["searchable"]["graph"] == "yes"
    assert st["searchable"]["vectors"] == {"embedded": 0, "total": st["spans"]}
    assert graph_generation(root) == st["generation"]
    assert not live_path(root).exists()  # the run took its progress file with it
    human = CliRunner().invoke(main, ["status", "--repo", str(root)])
    assert "searchable: BM25 yes, exact symbols yes, graph yes, vectors 0 of" in human.output


def test_index_output_stays_clean_off_a_terminal(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE_FILES)
    as_json = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["handoff"] is None
    assert as_json.stderr == ""  # --json: no progress lines either
    plain = CliRunner().invoke(main, ["index", str(root), "--no-vectors"])
    assert plain.exit_code == 0
    assert "\x1b" not in plain.output  # no bars or colours off a terminal


def test_searchable_is_said_once_when_a_run_that_parsed_reaches_its_graph() -> None:
    lines: list[str] = []
    quiet = SaySearchable(LineProgress(lines.append))
    quiet.phase("scanning", None)
    quiet.phase("graph", None)  # a run with nothing to parse: nothing new to say
    assert lines == []
    run = SaySearchable(LineProgress(lines.append))
    run.phase("parsing", 3)
    run.advance(3)
    run.phase("graph", None)
    run.phase("embedding", 10)
    run.phase("graph", None)
    assert lines == [SaySearchable.LINE]
