"""Task (c) of the protocol, commit subject → changed files, on a small git repository made
here with real git: the mining filters, the grades and intents, the base snapshot from a
mirror (and the one-line error without one), file-level scoring, the pinned sets."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.protocol import commits as C
from lab.protocol.splits import protocol_projects
from llmc.errors import EvalError
from llmc.eval.queries import EvalQuery, Judgment, load_queries
from llmc.eval.runner import run_variant

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="needs git",
)

CORE = "def parse(text):\n    return text.split()\n\n\ndef retry(n):\n    return n\n"
UTIL = "def helper():\n    return 1\n"
BASE_FILES = {
    "pkg/__init__.py": "from pkg.core import parse\n",
    "pkg/core.py": CORE,
    "pkg/util.py": UTIL,
    "README.md": "# Proj\n\nParse things.\n\n## Retry\n\nRetries are counted.\n",
    "CHANGELOG.md": "# Changes\n",
    "CONTRIBUTING.md": "# Contributing\n\nSend patches.\n",
    "tests/test_core.py": "from pkg.core import parse\n\n\ndef test_parse():\n    assert parse('a b')\n",
    "setup.cfg": "[metadata]\nname = proj\nversion = 1.0\n",
}


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    }  # fmt: skip
    out = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=repo, capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def commit(repo: Path, subject: str, files: dict[str, str], delete: tuple[str, ...] = ()) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    for rel in delete:
        (repo / rel).unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path: Path) -> SimpleNamespace:
    """A repository: the base commit, then one commit per filter (newest last)."""
    repo = tmp_path / "work"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(repo, "Initial import of the parser", BASE_FILES)
    commit(repo, "Fix parsing of empty input in core (fixes #12)", {
        "pkg/core.py": CORE.replace("text.split()", "text.split() if text else []"),
        "tests/test_core.py": BASE_FILES["tests/test_core.py"] + "\n\ndef test_empty():\n    pass\n",
        "CHANGELOG.md": "# Changes\n\n- empty input\n",
    })  # fmt: skip
    commit(repo, "Bump version to 1.1", {"setup.cfg": "[metadata]\nname = proj\nversion = 1.1\n"})
    commit(repo, "Fix typo in the retry docs", {
        "README.md": BASE_FILES["README.md"].replace("Parse things", "Parses things"),
    })  # fmt: skip
    commit(repo, "Document how retries are counted", {
        "README.md": BASE_FILES["README.md"] + "\nEach failure counts once.\n",
    })  # fmt: skip
    commit(repo, "Add more tests for the util helpers", {
        "tests/test_util.py": "def test_helper():\n    assert True\n",
    })  # fmt: skip
    commit(repo, "Add a caching layer for parsed results", {
        "pkg/cache.py": "CACHE = {}\n",
        "pkg/core.py": CORE + "\n\nCACHE = None\n",
    })  # fmt: skip
    commit(repo, "Make the retry count configurable", {
        "pkg/core.py": CORE.replace("return n", "return max(n, 0)"),
        "README.md": BASE_FILES["README.md"] + "\nSet it with retry(n).\n",
        "setup.cfg": "[metadata]\nname = proj\nversion = 1.1\n[options]\nzip_safe = false\n",
    })  # fmt: skip
    commit(repo, "ci: run the suite on Python 3.13", {"pkg/util.py": UTIL + "# ci\n"})
    commit(repo, "Rename every module to the new layout scheme", {
        f"pkg/mod{i}.py": f"X = {i}\n" for i in range(11)
    })  # fmt: skip
    commit(repo, "Update the list of triage captains", {
        "CONTRIBUTING.md": BASE_FILES["CONTRIBUTING.md"] + "\nCaptains: t.\n",
    })  # fmt: skip
    commit(repo, "Fix parsing of empty input in core", {"pkg/util.py": UTIL + "# again\n"})
    head = git(repo, "rev-parse", "HEAD")
    mirrors = tmp_path / "mirrors"
    mirrors.mkdir()
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirrors / "someone+proj"))
    return SimpleNamespace(repo=repo, base=base, head=head, mirrors=mirrors, tmp=tmp_path)


def mined(history: SimpleNamespace, **kw) -> C.Mined:
    git_dir = history.mirrors / "someone+proj"
    snap = C.base_snapshot(git_dir, history.base, history.tmp / "snap" / "corpus")
    return C.mine_commits(git_dir, history.base, history.head, C.indexable_files(snap), **kw)


def test_mining_keeps_real_changes_and_says_why_others_go(history):
    m = mined(history)
    by_query = {q.query: q for q in m.queries}
    assert list(by_query) == [
        "Fix parsing of empty input in core",
        "Document how retries are counted",
        "Make the retry count configurable",
    ]
    assert m.read == 11
    assert m.skipped == {
        "version bump": 1,
        "trivial subject": 1,
        "no source or documentation file of the base changed": 2,  # tests only; CONTRIBUTING
        "changes source or docs the base does not have": 1,
        "ci / build / deps / test / style commit": 1,
        "more than 10 files changed": 1,
        "subject seen before": 1,
    }
    fix = by_query["Fix parsing of empty input in core"]
    # Source 3, tests 1; the changelog is never judged. The issue reference is gone.
    assert fix.intent == "code"
    assert fix.relevant == (
        Judgment("pkg/core.py", 3),
        Judgment("tests/test_core.py", 1),
    )
    assert fix.id.startswith("commit:") and fix.note.startswith("commit ")
    docs = by_query["Document how retries are counted"]
    assert docs.intent == "docs" and docs.relevant == (Judgment("README.md", 3),)
    both = by_query["Make the retry count configurable"]
    # Docs beside source: 2; configuration: 1.
    assert both.intent == "mixed"
    assert both.relevant == (
        Judgment("pkg/core.py", 3),
        Judgment("README.md", 2),
        Judgment("setup.cfg", 1),
    )
    assert all(j.start_line is None and not j.symbol for q in m.queries for j in q.relevant)


def test_mining_stops_at_max_queries_oldest_first(history):
    m = mined(history, max_queries=1)
    assert [q.query for q in m.queries] == ["Fix parsing of empty input in core"]
    assert m.read == 1


def test_subject_cleaning_and_file_classes():
    assert C.subject_query("fix(parser): handle CASE ... WHEN (fixes #845).") == (
        "handle CASE ... WHEN"
    )
    assert C.subject_query("[fix] Adding TypedLiteral to comparison") == (
        "Adding TypedLiteral to comparison"
    )
    assert C.subject_query("Use null prototype for settings closes #4000") == (
        "Use null prototype for settings"
    )
    assert C.file_class("lib/response.js") == C.SOURCE
    assert C.file_class("docs/api.rst") == C.DOCS
    assert C.file_class("test/res.send.js") == C.TESTS
    assert C.file_class("package.json") == C.CONFIG
    assert C.file_class("Security.md") == C.CONFIG
    assert C.file_class("History.md") is None  # a changelog
    assert C.file_class("docs/versionhistory.rst") is None  # changelogs by other names
    assert C.file_class("docs/change_log/release-3.2.md") is None
    assert C.file_class(".github/PULL_REQUEST_TEMPLATE.md") == C.CONFIG
    assert C.file_class("poetry.lock") is None


def test_base_snapshot_is_the_base_tree_and_is_reused(history):
    git_dir = history.mirrors / "someone+proj"
    dest = history.tmp / "cache" / "corpus"
    out = C.base_snapshot(git_dir, history.base, dest)
    files = {
        p.relative_to(out).as_posix()
        for p in out.rglob("*")
        if p.is_file() and ".git" not in p.parts and p.name != C.SNAPSHOT_MARKER
    }
    assert files == set(BASE_FILES)
    assert (out / "pkg/core.py").read_text() == CORE  # the base's text, not the head's
    assert (out / ".git").is_dir()  # its own work tree: the walker lists it with git
    (out / ".llmc").mkdir()
    (out / ".llmc" / "keep").write_text("index")
    assert C.base_snapshot(git_dir, history.base, dest) == out
    assert (out / ".llmc" / "keep").is_file()


def test_prepare_finds_the_mirror_or_says_in_one_line_what_is_missing(
    history, tmp_path, monkeypatch
):
    sets = tmp_path / "sets"
    monkeypatch.setattr(C, "SETS_DIR", sets)
    monkeypatch.setattr(C, "PROJECTS_FILE", sets / "projects.json")
    cp = C.CommitProject("proj", "https://github.com/someone/proj", history.base, history.head)
    C.write_commit_projects([cp])
    git_dir = history.mirrors / "someone+proj"
    snap = C.base_snapshot(git_dir, history.base, tmp_path / "s" / "corpus")
    m = C.mine_commits(git_dir, history.base, history.head, C.indexable_files(snap))
    from llmc.eval.queries import write_eval_queries

    write_eval_queries(m.queries, cp.queries_path)
    assert C.commit_projects()["proj"].base == history.base

    monkeypatch.setenv(C.MIRRORS_ENV, str(history.mirrors))
    pin, corpus, queries = C.prepare("proj", tmp_path / "cache", max_queries=2)
    assert pin.name == "proj" and len(queries) == 2
    assert (corpus / "pkg/core.py").read_text() == CORE
    assert (
        corpus
        == tmp_path / "cache" / "protocol" / "commits" / f"proj-{history.base[:12]}" / "corpus"
    )

    monkeypatch.setenv(C.MIRRORS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(EvalError) as e:
        C.prepare("proj", tmp_path / "cache", max_queries=2)
    msg = str(e.value)
    assert "\n" not in msg
    assert "https://github.com/someone/proj" in msg and history.base[:12] in msg
    assert "LLMC_MIRRORS" in msg and "git clone --mirror" in msg
    with pytest.raises(EvalError, match="no pinned history"):
        C.prepare("other", tmp_path / "cache", max_queries=2)


class _Spans:
    """A searcher returning fixed spans (several per file)."""

    def __init__(self, spans):
        self.spans = spans
        self.asked = []

    def search(self, query, k=None):
        self.asked.append(k)
        return SimpleNamespace(results=self.spans[:k], route=None)


def span(path: str, start: int, lang: str = "python") -> SimpleNamespace:
    return SimpleNamespace(path=path, start_line=start, end_line=start + 3, lang=lang, category="")


def test_file_level_scoring_counts_a_file_once_at_its_best_span():
    spans = [
        span("docs/guide.md", 1, "markdown"),
        span("docs/guide.md", 9, "markdown"),
        span("pkg/util.py", 1),
        span("docs/guide.md", 20, "markdown"),
        span("pkg/core.py", 40),
        span("pkg/core.py", 1),
        span("tests/test_core.py", 1),
    ]
    inner = _Spans(spans)
    searcher = C.FileLevelSearcher(inner, spans=50)
    q = EvalQuery(
        "fix parsing",
        "code",
        (Judgment("pkg/core.py", 3), Judgment("tests/test_core.py", 1)),
    )
    run = run_variant("x", searcher, [q], k=10, warmup=0)
    assert inner.asked == [50]  # spans asked for, whatever k is
    files = [r.path for r in run.runs[0].results]
    assert files == ["docs/guide.md", "pkg/util.py", "pkg/core.py", "tests/test_core.py"]
    s = run.scores[0]
    assert s.rr == pytest.approx(1 / 3)  # core.py is the third *file*, not the fifth span
    assert s.hit_5 is True
    assert s.code_3 is True  # util.py is code, in the top 3 files
    dcg = (2**3 - 1) / 2.0 + (2**1 - 1) / __import__("math").log2(5)
    ideal = (2**3 - 1) / 1.0 + (2**1 - 1) / __import__("math").log2(3)
    assert s.ndcg == pytest.approx(dcg / ideal)
    assert C.dedupe_by_file(spans, 2) == [spans[0], spans[2]]


def test_pinned_sets_are_valid_and_belong_to_protocol_projects():
    pinned = C.commit_projects()
    assert pinned, "no pinned commit sets"
    splits = {p.name.lower(): p.split for p in protocol_projects()}
    for name, cp in pinned.items():
        assert splits.get(name) in ("validation", "test"), name
        queries = load_queries(cp.queries_path)
        assert 1 <= len(queries) <= C.MAX_QUERIES
        ids = [q.id for q in queries]
        assert len(set(ids)) == len(ids) and all(i.startswith("commit:") for i in ids)
        for q in queries:
            assert q.relevant and all(j.start_line is None for j in q.relevant)
            assert any(j.grade >= 2 for j in q.relevant)
    on_disk = {p.stem for p in C.SETS_DIR.glob("*.jsonl")}
    assert on_disk == set(pinned)
    doc = json.loads(C.PROJECTS_FILE.read_text())
    assert doc["task"] == "commits"
