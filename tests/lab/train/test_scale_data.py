"""Issue 37's training data at scale: the manifest refuses evaluation projects by name, and
mining a pinned repository drops every answer whose file an evaluation project holds."""

from __future__ import annotations

import hashlib
import json

import pytest
from repo_fixtures import git, make_repo

from lab.train.scale_data import Source, check_clean, evaluation_names, mine_source, pin
from llmc.errors import TrainError

COOKIES = '''
def parse_cookie_header(header):
    """Split a Cookie header into a dict of names and values."""
    out = {}
    for part in header.split(";"):
        name, _, value = part.partition("=")
        out[name.strip()] = value.strip()
    return out


def format_cookie(name, value):
    """Render one cookie as a Set-Cookie header value."""
    text = f"{name}={value}"
    text += "; Path=/"
    return text
'''
SHARED = '''
def merge_settings(defaults, overrides):
    """Combine the default settings with the user's overrides, the user's winning."""
    out = dict(defaults)
    for key, value in overrides.items():
        out[key] = value
    return out
'''


@pytest.mark.parametrize(
    "repo", ["pallets/flask", "django/django", "python-attrs/attrs", "encode/starlette",
             "markdown-it/markdown-it", "axios/axios", "dustin/go-humanize",
             "marshmallow-code/flask-smorest", "someone/django-extensions",
             "expressjs/express", "tj/commander.js"],
)  # fmt: skip
def test_evaluation_and_reserved_projects_are_refused(repo):
    with pytest.raises(TrainError, match="never trained on"):
        check_clean(repo)


@pytest.mark.parametrize(
    "repo",
    [
        "davidhalter/jedi",
        "python-jsonschema/referencing",
        "ladjs/supertest",
        "mitsuhiko/minijinja",
        "psf/pyperf",
    ],
)
def test_an_evaluation_projects_owner_is_refused_too(repo):
    with pytest.raises(TrainError, match="owner"):
        check_clean(repo)


def test_a_repository_outside_every_split_is_allowed():
    check_clean("spf13/cobra")
    check_clean("urllib3/urllib3")  # the train split is what training reads
    check_clean("encode/httpx")  # httpcore's owner, but a train-split project
    assert "sqlparse" in evaluation_names() and "cobra" not in evaluation_names()


def test_mining_drops_answers_an_evaluation_project_holds(tmp_path):
    root = make_repo(tmp_path / "src", {"pkg/cookies.py": COOKIES, "pkg/shared.py": SHARED,
                                         "pkg/_vendor/requests/api.py": COOKIES.replace(
                                             "cookie", "request"),
                                         "README.md": "# Usage\n\nCall the functions.\n"})  # fmt: skip
    subjects = ("Strip the spaces around each cookie value", "Let user overrides win over defaults")
    for n in range(2):
        (root / "pkg" / "cookies.py").write_text(COOKIES + f"\nVERSION = {n}\n")
        git(root, "commit", "-qam", f"{subjects[0]} (round {n})")
        (root / "pkg" / "shared.py").write_text(SHARED + f"\nLEVEL = {n}\n")
        git(root, "commit", "-qam", f"{subjects[1]} (round {n})")
    base = git(root, "rev-list", "--max-parents=0", "HEAD").strip()
    head = git(root, "rev-parse", "HEAD").strip()
    src = Source("someone/cookies", head, base, "", "python")
    git_dir = root / ".git"
    clean = {hashlib.sha256(SHARED.encode()).hexdigest()}  # an evaluation project has it
    counts = mine_source(src, git_dir, tmp_path / "out", clean)
    assert counts["contaminated_files"] == 2, "shared.py and the vendored copy of requests"
    pairs = [json.loads(line) for line in (tmp_path / "out" / src.name / "pairs.jsonl").open()]
    queries = {p["query"] for p in pairs}
    assert any("Cookie header" in q for q in queries), queries
    assert not any("settings" in q for q in queries), "shared.py's answers are dropped"
    assert not any("request" in q.lower() for q in queries), "and the vendored file's"
    commits = [json.loads(line) for line in (tmp_path / "out" / src.name / "commits.jsonl").open()]
    assert [q["query"] for q in commits] == [f"{subjects[0]} (round {n})" for n in range(2)]
    assert {r["path"] for q in commits for r in q["relevant"]} == {"pkg/cookies.py"}


def test_pin_records_head_base_and_the_archive_hash(tmp_path):
    root = make_repo(tmp_path / "m" / "someone+cookies", {"pkg/cookies.py": COOKIES})
    src = pin("someone/cookies", tmp_path / "m")
    assert src.head == src.base == git(root, "rev-parse", "HEAD").strip()
    assert src.language == "python" and len(src.archive_sha256) == 64


def test_every_language_gives_code_pairs_without_their_doc_comments(tmp_path):
    files = {
        "cookie.go": "package cookie\n\n// ParseHeader splits a cookie header into its names "
        "and values.\n// It keeps the last value of a repeated name.\nfunc ParseHeader(h string)"
        " map[string]string {\n\tout := map[string]string{}\n\tfor _, p := range split(h) {\n"
        "\t\tout[p] = p\n\t}\n\treturn out\n}\n",
        "format.js": "/**\n * Render one cookie as a header value for the response.\n * @param"
        " {string} name\n */\nfunction formatCookie(name, value) {\n  const text = name + '=';\n"
        "  const full = text + value;\n  return full + '; Path=/';\n}\n",
        "merge.rs": "/// Merge the settings of the user over the defaults of the app.\npub fn "
        "merge(defaults: &str, user: &str) -> String {\n    let mut out = String::new();\n"
        "    out.push_str(defaults);\n    out.push_str(user);\n    out\n}\n",
        "Words.java": "class Words {\n    /**\n     * Counts the words in one line of plain "
        'text.\n     */\n    int count(String line) {\n        String[] parts = line.split(" ");'
        "\n        int n = parts.length;\n        return n;\n    }\n}\n",
    }
    root = make_repo(tmp_path / "src", files)
    head = git(root, "rev-parse", "HEAD").strip()
    src = Source("someone/langs", head, head, "", "go")
    mine_source(src, root / ".git", tmp_path / "out", set())
    pairs = [json.loads(line) for line in (tmp_path / "out" / src.name / "pairs.jsonl").open()]
    by_query = {p["query"]: p["positive"] for p in pairs if p["kind"] == "code"}
    want = {
        "splits a cookie header into its names and values": "func ParseHeader",
        "Render one cookie as a header value for the response": "function formatCookie",
        "Merge the settings of the user over the defaults of the app": "pub fn merge",
        "Counts the words in one line of plain text": "int count",
    }
    assert set(by_query) == set(want), by_query
    for query, code in want.items():
        assert code in by_query[query] and query not in by_query[query]
        assert "//" not in by_query[query] and "/**" not in by_query[query]
