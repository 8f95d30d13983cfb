"""The evaluation protocol on a tiny generated project (no downloads): splits, the stripped
corpus, generated queries, the grep baseline, the rrf variant, a full run with CIs."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from lab.protocol import SYSTEMS, SplitProject, protocol_projects, run_protocol
from lab.protocol.corpus import build_corpus, strip_jsdoc, strip_python_docstrings
from lab.protocol.docstring import docstring_queries, documented, jsdoc_description
from lab.protocol.grep import GrepSearcher, GrepSpan, grep_rank, query_terms
from lab.protocol.splits import parse_projects, select_projects
from lab.protocol.tables import markdown
from llmc.config import Config
from llmc.errors import EvalError
from llmc.eval.projects import NPM, RESERVED, Project, fetch_project
from llmc.eval.runner import variant_config

FILES = {
    "pkg/__init__.py": "",
    "pkg/geometry.py": '''"""Shapes and their measures."""

import math


def circle_area(radius):
    """Compute the area of a circle from its radius.

    Negative radii are refused.
    """
    if radius < 0:
        raise ValueError("negative radius")
    return math.pi * radius * radius


class Polygon:
    """A closed shape made of straight sides."""

    def __init__(self, sides):
        self.sides = list(sides)

    def perimeter(self):
        """Sum the lengths of every side of the polygon."""
        total = 0
        for side in self.sides:
            total += side
        return total
''',
    "pkg/text.py": '''import re


def slugify_title(title):
    """Turn a title into a lowercase slug for web addresses."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    joined = "-".join(words)
    return joined or "untitled"
''',
    "tests/test_geometry.py": '''from pkg.geometry import circle_area


def test_unit_circle():
    """Check the unit circle has an area of pi exactly."""
    area = circle_area(1)
    assert area > 3
    assert area < 4
''',
    "lib/options.js": """'use strict';

/**
 * Merge two option objects, the second one winning on conflicts.
 *
 * @param {object} base the defaults
 * @param {object} extra the overrides
 * @returns {object}
 */
function mergeOptions(base, extra) {
  const out = {};
  for (const key of Object.keys(base)) out[key] = base[key];
  for (const key of Object.keys(extra)) out[key] = extra[key];
  return out;
}

/**
 * Parse a duration string such as 5m into milliseconds.
 * @param {string} text
 */
exports.parseDuration = function parseDuration(text) {
  const m = /^(\\d+)([smh])$/.exec(text);
  if (!m) throw new Error('bad duration ' + text);
  return Number(m[1]) * { s: 1000, m: 60000, h: 3600000 }[m[2]];
};

exports.mergeOptions = mergeOptions;
""",
    "dist/options.min.js": "/** Merge two option objects. */ function mergeOptions(a,b){return a}\n",
    "README.md": "# Proj\n\nA tiny fixture project for the protocol tests.\n",
}
DOCSTRINGS = (
    "Compute the area of a circle",
    "Negative radii are refused",
    "Sum the lengths of every side",
    "Turn a title into a lowercase slug",
    "Merge two option objects",
    "Parse a duration string",
)


def make_project(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


# -- splits ---------------------------------------------------------------------------------
def test_splits_are_data_and_disjoint():
    from lab.train.projects import HOLDOUT_PROJECTS, TRAIN_PROJECTS
    from llmc.eval.projects import PROJECTS

    projects = protocol_projects()
    by_split = {
        s: [p.project for p in projects if p.split == s] for s in ("train", "validation", "test")
    }
    train = {(p.name, p.version, p.sha256) for p in TRAIN_PROJECTS}
    assert {(p.name, p.version, p.sha256) for p in by_split["train"]} == train
    validation = {p.name for p in by_split["validation"]}
    python_validation = {p.name for p in by_split["validation"] if p.ecosystem != NPM}
    # jsonschema, markdown and sqlparse left test for validation after two test reports
    # (their code questions' Code@3 is iterated on there); natsort replaced them on test
    assert python_validation == {
        "attrs",
        "marshmallow",
        "jsonschema",
        "markdown",
        "sqlparse",
        *(p.name for p in HOLDOUT_PROJECTS),
        # added 2026-11-27 after issue 28's test runs, for long reports (never run on test)
        "markdown-it-py",
        "httpcore",
        "pyflakes",
        "babel",
        "flake8",
    }
    # express left test for validation after its one-time test report (issue 13's rule:
    # iterate on it only in validation), with two more npm projects beside it
    assert {p.name for p in by_split["validation"] if p.ecosystem == NPM} == {
        "express",
        "koa",
        "ws",
    }
    assert PROJECTS["attrs"] in by_split["validation"]
    test = by_split["test"]
    assert len(test) >= 12 and sum(p.ecosystem == NPM for p in test) >= 4
    assert "express" not in {p.name for p in test} and "superagent" in {p.name for p in test}
    assert "natsort" in {p.name for p in test} and "markdown" not in {p.name for p in test}
    # five projects added to test after issue 28's first test run, run once since
    assert {"starlette", "pyparsing", "webargs", "uvicorn", "pino"} <= {p.name for p in test}
    # nine more for the learned file ranker's one test run (test batch 3)
    batch3 = {"typer", "aiosqlite", "websockets", "yarl", "python-multipart", "alembic"}
    assert batch3 | {"fastify", "mocha", "winston"} <= {p.name for p in test}
    assert not {p.name for p in test} & (validation | {p.name for p in by_split["train"]})
    assert not {p.name.lower() for p in projects} & RESERVED
    assert [p.name for p in select_projects("test", ["H11"])] == ["h11"]
    with pytest.raises(EvalError, match="validation split"):
        select_projects("test", ["attrs"])
    with pytest.raises(EvalError, match="reserved"):
        select_projects("test", ["flask"])
    with pytest.raises(EvalError, match="reserved"):
        parse_projects(
            {
                "projects": [
                    {
                        "name": "Jinja2",
                        "ecosystem": "pypi",
                        "version": "3",
                        "sha256": "0" * 64,
                        "split": "test",
                    }
                ]
            }  # fmt: skip
        )


def test_npm_projects_fetch_through_the_same_cache(tmp_path):
    archive = tmp_path / "tiny-1.0.0.tgz"
    with tarfile.open(archive, "w:gz") as tf:
        data = b"/** Add. */\nfunction add(a, b) { return a + b; }\n"
        info = tarfile.TarInfo("package/index.js")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    import hashlib

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    asked = []

    def download(req: str, dest: Path) -> None:
        asked.append(req)
        dest.mkdir(parents=True)
        (dest / archive.name).write_bytes(archive.read_bytes())

    root = fetch_project(Project("tiny", "1.0.0", digest, NPM), tmp_path / "cache", download)
    assert asked == ["tiny@1.0.0"] and root == tmp_path / "cache" / "tiny-1.0.0"
    assert (root / "index.js").read_text().startswith("/** Add. */")


# -- corpus and queries ---------------------------------------------------------------------
def test_strip_jsdoc_keeps_lines_and_other_comments():
    text = 'a();\n  /**\n   * Doc.\n   */\nf();\n// keep\nconst g = "src/**/*.js"; /* keep */\n'
    out = strip_jsdoc(text)
    assert out.count("\n") == text.count("\n")
    assert "Doc." not in out and "// keep" in out and '"src/**/*.js"' in out and "/* keep */" in out
    assert jsdoc_description(" * Merge {@link Foo} now.\n * Second.\n * @param x\n * ignored") == (
        "Merge Foo now.\nSecond."
    )


def test_strip_python_docstrings_any_quoting_and_nothing_else():
    text = (
        'def f():\n    "Single-quoted doc."\n    s = """not a docstring"""\n    return s\n'
        "def g(): 'one-liner'\n"
        'class A:\n    """Only a docstring.\n\n    More.\n    """\n'
        'X = """module string"""\n'
    )
    assert strip_python_docstrings(text) == (
        'def f():\n    s = """not a docstring"""\n    return s\n'
        "def g(): pass\n"
        "class A:\n    pass\n"
        'X = """module string"""\n'
    )
    assert strip_python_docstrings("def broken(:\n") == "def broken(:\n"  # regex fallback


def test_stripped_corpus_has_no_docstring_text(tmp_path):
    source = make_project(tmp_path / "src")
    corpus = build_corpus(source, tmp_path / "work" / "corpus", "stamp")
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file()
                   and ".git" not in p.relative_to(corpus).parts)  # fmt: skip
    assert "dist/options.min.js" not in files  # build output, lib/ exists
    assert {"pkg/geometry.py", "lib/options.js", "tests/test_geometry.py", "README.md"} <= set(
        files
    )
    for rel in files:
        text = (corpus / rel).read_text(encoding="utf-8")
        assert not [d for d in DOCSTRINGS if d in text], rel
    js = (corpus / "lib/options.js").read_text()
    assert js.count("\n") == FILES["lib/options.js"].count("\n")  # JSDoc lines kept, blank
    assert "def circle_area(radius):" in (corpus / "pkg/geometry.py").read_text()
    assert build_corpus(source, tmp_path / "work" / "corpus", "stamp") == corpus  # reused


def test_queries_name_the_documented_definitions(tmp_path):
    source = make_project(tmp_path / "src")
    found = {(d.path, d.symbol, d.query) for d in documented(source)}
    assert found == {
        ("pkg/geometry.py", "circle_area", "Compute the area of a circle from its radius"),
        ("pkg/geometry.py", "Polygon.perimeter", "Sum the lengths of every side of the polygon"),
        ("pkg/text.py", "slugify_title", "Turn a title into a lowercase slug for web addresses"),
        ("lib/options.js", "mergeOptions",
         "Merge two option objects, the second one winning on conflicts"),
        ("lib/options.js", "exports.parseDuration",
         "Parse a duration string such as 5m into milliseconds"),
    }  # fmt: skip
    queries, path = docstring_queries(source, tmp_path / "work", "proj", max_queries=3, seed=0)
    assert len(queries) == 3 and path.is_file()
    assert all(q.intent == "code" and q.relevant[0].grade == 3 for q in queries)
    again, _ = docstring_queries(source, tmp_path / "work", "proj", max_queries=3, seed=0)
    assert [q.query for q in again] == [q.query for q in queries]  # read back from the file
    all_q, _ = docstring_queries(source, tmp_path / "work", "proj", max_queries=60, seed=0)
    parse = next(q for q in all_q if q.query.startswith("Parse a duration"))
    # `exports.parseDuration = function`: the chunker names it (it once could not, and the
    # judgment stood on the definition's line alone); JavaScript judgments keep the lines.
    j = parse.relevant[0]
    assert (j.path, j.symbol, j.start_line, j.end_line) == (
        "lib/options.js",
        "exports.parseDuration",
        21,
        25,
    )
    circle = next(q for q in all_q if q.query.startswith("Compute the area"))
    assert circle.relevant[0].symbol == "circle_area" and circle.relevant[0].start_line is None


# -- systems --------------------------------------------------------------------------------
def test_grep_ranks_by_distinct_terms_then_occurrences_then_length():
    assert query_terms("How is the Foo_bar parsed, and is it a foo_bar?") == ["foo_bar", "parsed"]
    spans = [
        GrepSpan("a.py", 1, 3, "foo bar bar"),  # 2 distinct, 3 occurrences
        GrepSpan("b.py", 1, 9, "foo baz"),  # 2 distinct, 2 occurrences, 9 lines
        GrepSpan("c.py", 1, 2, "bar"),  # 1 distinct
        GrepSpan("d.py", 1, 50, "foo bar baz"),  # 3 distinct
        GrepSpan("e.py", 1, 4, "baz foo"),  # as b.py, but shorter
        GrepSpan("f.py", 1, 1, "nothing here"),  # no term: not returned
    ]
    got = grep_rank("the foo, bar and baz", spans, k=10)
    assert [r.path for r in got] == ["d.py", "a.py", "e.py", "b.py", "c.py"]
    assert [(r.distinct, r.occurrences) for r in got] == [(3, 3), (2, 3), (2, 2), (2, 2), (1, 1)]
    assert [r.path for r in grep_rank("foo bar baz", spans, k=2)] == ["d.py", "a.py"]
    assert grep_rank("the and of", spans, k=10) == []  # only stopwords
    searcher = GrepSearcher(Path("."), spans)
    assert [r.path for r in searcher.search("bar", k=1).results] == ["a.py"]


def test_rrf_variant_is_plain_fusion():
    cfg = variant_config(Config(), "rrf")
    s = cfg.search
    assert (s.bm25, s.dense, s.routing, s.merge_routes) == (True, True, False, True)
    assert (s.bm25_depth, s.dense_depth, s.fusion, s.rrf_k) == (100, 100, "rrf", 60)
    assert (s.max_per_file, s.test_weight, s.exact_symbol) == (0, 1.0, False)
    assert not (s.graph or s.rerank or s.llm_rerank or s.hyde or cfg.learn.use_tuned)


# -- a full run -----------------------------------------------------------------------------
def test_protocol_run_over_a_fixture_project(tmp_path):
    source = make_project(tmp_path / "src")
    fixture = SplitProject(Project("proj", "1.0", "0" * 64), "test")
    fetched = []

    def fetch(project: Project, cache_dir: Path) -> Path:
        fetched.append(project.name)
        return source

    report = run_protocol(
        projects=[fixture], max_queries=60, cache_dir=tmp_path / "cache", fetch=fetch
    )
    assert fetched == ["proj"] and report.systems == SYSTEMS and len(report.runs) == 1
    run = report.runs[0]
    assert run.numbers.n == 5 and run.spans > 0 and run.corpus.name == "corpus"
    for numbers in (run.numbers, report.pooled["docstring"]):
        assert set(numbers.metrics) == set(SYSTEMS)
        for by in numbers.metrics.values():
            for ci in by.values():
                assert ci is not None and ci.low <= ci.estimate <= ci.high
                assert ci.resamples >= 2000
        assert {p.b for p in numbers.paired} == set(SYSTEMS) - {"default"}
        for p in numbers.paired:
            assert p.mrr_diff.low <= p.mrr_diff.estimate <= p.mrr_diff.high
            assert 0.0 <= p.wilcoxon_rr.p_value <= 1.0
    # One project: pooled is that project's numbers.
    assert report.pooled["docstring"].metrics["grep"]["mrr@10"].estimate == pytest.approx(
        run.numbers.metrics["grep"]["mrr@10"].estimate
    )
    doc = json.loads(json.dumps(report.to_json(per_query=True)))
    assert doc["projects"][0]["project"] == "proj" and "pooled" in doc
    table = markdown(report)
    assert all(f"| {s} |" in table or f" {s} " in table for s in SYSTEMS)


def test_cli_protocol_refuses_reserved_and_unknown_projects():
    from click.testing import CliRunner

    from lab.cli import main

    out = CliRunner().invoke(main, ["protocol", "--project", "flask"])
    assert out.exit_code == 1 and "reserved" in out.output
    out = CliRunner().invoke(main, ["protocol", "--split", "validation", "--project", "h11"])
    assert out.exit_code == 1 and "in the test split" in out.output
