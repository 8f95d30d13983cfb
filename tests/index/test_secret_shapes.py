"""Secret shapes the content scan missed (issue 41, item 4): each was indexed and found by
`llmc search <value>`. Values are built from parts so this file is no secret to a scanner."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from repo_fixtures import make_repo

from llmc.cli import main
from llmc.index.secrets import redact, scan

AWS_SECRET = "q8Vr2nX+Lk5" + "Tz9WmB3yHc7JdP0aFs6eGu4iRo1N"
PASSWORD = "Mv7qT2x" + "R9zL4wKp"
GOOGLE = "AIza" + "SyD4k9Lm2Nx7Rt4Wy9Bc6Hd1Jf0GpEoTs5U"
ANTHROPIC = "sk-ant-" + "api03-" + "Zq8vT3xYw9LmN2pR5sK7aB4cD6eF1gH0jK3lM5nP7qR9sT2uV4wX6yZ8"
GITHUB = "ghp_" + "Zr8Kq2Lm5Nx7Vb3Wc9Ty4Ud6Hs1Jf0GpEoA1"

CAUGHT = [
    (".env.production", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", AWS_SECRET),
    ("deploy/run.sh", f"export DB_PASSWORD={PASSWORD}\n", PASSWORD),
    ("Dockerfile", f"FROM python:3.12\nENV API_KEY {PASSWORD}\n", PASSWORD),
    ("config/app.yaml", f"db:\n  host: db\n  password: {PASSWORD}\n", PASSWORD),
    ("config/app.yml", f"service:\n  api_key: {AWS_SECRET}  # prod\n", AWS_SECRET),
    ("settings.ini", f"[auth]\ntoken = {PASSWORD}\n", PASSWORD),
    ("app/db.py", f'URL = "postgres://app:{PASSWORD}@db.internal/app"\n', PASSWORD),
    ("docs/setup.md", f"Connect with `mysql://root:{PASSWORD}@10.0.0.5/shop`.\n", PASSWORD),
    ("app/maps.js", f'const key = "{GOOGLE}";\n', GOOGLE),
    ("app/llm.py", f'client = Anthropic(api_key="{ANTHROPIC}")\n', ANTHROPIC),
    ("ci/publish.py", f'TOKEN = "{GITHUB[:12]}" + "{GITHUB[12:]}"\n', GITHUB[12:]),
]


@pytest.mark.parametrize("rel, text, value", CAUGHT)
def test_each_shape_is_found_and_redacted(rel, text, value):
    found = scan(rel, text)
    assert found, (rel, text)
    assert value not in redact(text, found)


@pytest.mark.parametrize(
    "rel, text",
    [
        ("config/app.yaml", "db:\n  password: ${DB_PASSWORD}\n  api_key: <your-key>\n"),
        ("config/app.yaml", "auth:\n  token: changeme\n  secret: xxxxxxxxxx\n"),
        (".env.example", "API_KEY=\nPASSWORD=your-password-here\n"),
        ("docs/db.md", "Use `postgres://user:password@localhost:5432/app` locally.\n"),
        ("docs/db.md", "`postgres://${USER}:${PASSWORD}@db/app` or `redis://:<pw>@host`\n"),
        ("app/settings.py", "api_key = settings.API_KEY_V2\npassword = os.environ['PW']\n"),
        ("app/auth.py", "def login(password: str, token=None):\n    api_key=api_key\n"),
        (
            "docs/aws.md",
            "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        ),  # fmt: skip
        ("app/aws.py", 'KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n'),
        ("Makefile", "test:\n\tpytest --token-file=tokens.txt\n"),
        ("app/urls.py", 'LINK = "https://user@example.com/path"\n'),
    ],
)
def test_placeholders_and_documented_examples_are_not_secrets(rel, text):
    assert scan(rel, text) == []


def test_none_of_them_is_found_by_search(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    files = {rel: text for rel, text, _ in CAUGHT}
    files["app/main.py"] = "def fennelwhistle():\n    return 1\n"
    root = make_repo(tmp_path / "repo", files)
    done = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json", "-q"])
    assert done.exit_code == 0, done.output
    skipped = {s["path"]: s["reason"] for s in json.loads(done.stdout)["skipped"]}
    assert set(skipped) == set(files) - {"app/main.py", "docs/setup.md"}, skipped
    assert {r for p, r in skipped.items() if p != ".env.production"} == {"secret-content"}
    for _, _, value in CAUGHT:
        found = CliRunner().invoke(
            main, ["search", "--repo", str(root), "--json", "--no-dense", "--no-hyde", value]
        )
        assert found.exit_code == 0, found.output
        assert not any(value in r["snippet"] for r in json.loads(found.stdout)["results"])


def test_a_docs_page_with_an_example_secret_loses_the_value_not_the_page(tmp_path, monkeypatch):
    """Issue 40, item 1: a configuration reference showing one `SECRET_KEY = "..."` was
    skipped whole; its questions never found it."""
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    value = "Vq9" + "xT2mL7kP4wR8zN3bY6c"
    page = (
        "# Configuration\n\n## SESSION_COOKIE_LIFETIME\n\nHow long the session cookie lives.\n\n"
        f'## SECRET_KEY\n\nSet it in production:\n\n```python\nSECRET_KEY = "{value}"\n```\n'
    )
    root = make_repo(tmp_path / "repo", {"docs/config.md": page, "app.py": "x = 1\n"})
    done = CliRunner().invoke(main, ["index", str(root), "--no-vectors", "--json", "-q"])
    assert done.exit_code == 0, done.output
    assert not json.loads(done.stdout)["skipped"]
    found = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--json", "--no-dense", "session cookie lifetime"]
    )
    results = json.loads(found.stdout)["results"]
    assert results[0]["path"] == "docs/config.md"
    state = b"".join(f.read_bytes() for f in (root / ".llmc").rglob("*") if f.is_file())
    assert value.encode() not in state
