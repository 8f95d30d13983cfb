"""Secrets by content: a file holding one is skipped (its line, never its value, in -v), or
indexed redacted with ``index.redact_secrets``; made-up passwords in tests stay indexed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_fixtures import make_repo, user_config

from llmc.cli import main
from llmc.index.secrets import redact, scan

# Built from parts, so this file is not itself a secret to a scanner.
AWS_ID = "AKIA" + "QX7RT2LMNB4WZK5P"
AWS_SECRET = "q8Vr2nX+Lk5" + "Tz9WmB3yHc7JdP0aFs6eGu4iRo1N"
GITHUB = "ghp_" + "Zr8Kq2Lm5Nx7Vb3Wc9Ty4Ud6Hs1Jf0GpEoA1"
PASSWORD = "Mv7#qT2" + "!xR9zL4w"
KEY_BODY = (
    "MIIEowIBAAKCAQEAv5Qk3Z8Lm2Nx7Rt4Wy9Bc6Hd1Jf0GpEoTs5Ua8Vi3KlWq2Er\n"
    "Yh2Xb7Nc4Md9Pq1Rs6Tu3Vw8Xy5Za0Bc7De2Fg9Hi4Jk1Lm6No3Pq8Rs5Tu0VwXy\n"
    "Gf5Hd2Ks8Lq1Mw4Nz7Px0Qc3Rv6Sb9Tn2Uj5Vk8Wl1Xm4Yo7Zp0Aq3Br6Cs9Dt"
)
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n"
VALUES = [AWS_ID, AWS_SECRET, GITHUB, PASSWORD, "Yh2Xb7Nc4Md9Pq1Rs6"]

SECRET_FILES = {
    "deploy/aws_settings.py": (
        f'REGION = "eu-west-1"\nAWS_ACCESS_KEY_ID = "{AWS_ID}"\n'
        f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\n'
    ),
    "docs/ops_key.md": f"# Ops key\n\nThe trellisqueen host key:\n\n{PRIVATE_KEY}",
    "ci/publish.py": f'def publish():\n    token = "{GITHUB}"\n    return token\n',
    "app/db.py": f'HOST = "db"\npassword = "{PASSWORD}"\n\n\ndef connect():\n    return HOST\n',
}
PLAIN_FILES = {
    "app/main.py": "def fennelwhistle():\n    return 1\n",
    "tests/test_login.py": (
        'def test_login_rejects_wrong_password():\n    password = "test"\n'
        '    assert password != "hunter2"\n'
    ),
}


def _index(root: Path, *args: str, env: dict | None = None):
    result = CliRunner().invoke(main, ["index", str(root), "--no-vectors", *args], env=env)
    assert result.exit_code == 0, result.output
    return result


def _search(root: Path, query: str, env: dict | None = None) -> list[dict]:
    args = ["search", "--json", "--no-dense", "--no-hyde", "-k", "50", "--repo", str(root), query]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["results"]


def _state_bytes(root: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted((root / ".llmc").rglob("*")) if f.is_file())


@pytest.fixture
def secret_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "r", {**SECRET_FILES, **PLAIN_FILES})


def test_files_with_secrets_are_skipped_and_their_values_appear_nowhere(secret_repo):
    root = secret_repo
    outputs = [_index(root, "--json").stdout, _index(root, "-v", "--full").output]
    data = json.loads(outputs[0])
    reasons = {s["path"]: (s["reason"], s["detail"]) for s in data["skipped"]}
    assert reasons["deploy/aws_settings.py"] == (
        "secret-content",
        "line 2: AWS Access Key and 1 more",
    )
    assert "docs/ops_key.md" not in reasons  # a docs page is indexed, its key redacted
    assert reasons["ci/publish.py"] == ("secret-content", "line 2: GitHub Token")
    assert reasons["app/db.py"] == ("secret-content", "line 2: Secret Keyword")
    assert "tests/test_login.py" not in reasons  # a fixture's made-up password
    assert "line 2: GitHub Token" in outputs[1]  # -v names the line, not the value
    assert "docs/ops_key.md: line 5: Private Key redacted" in outputs[1]  # and what it redacted
    state = _state_bytes(root)
    for query in ("aws secret access key", "trellisqueen host key", "publish token", "password"):
        outputs.append(json.dumps(_search(root, query)))
    assert _search(root, "wrong password")[0]["path"] == "tests/test_login.py"
    assert _search(root, "fennelwhistle")[0]["path"] == "app/main.py"
    page = _search(root, "trellisqueen host key")
    assert page[0]["path"] == "docs/ops_key.md" and "[REDACTED]" in json.dumps(page)
    for value in VALUES:
        assert value.encode() not in state, value
        for out in outputs:
            assert value not in out, value


def test_redact_secrets_indexes_the_files_without_the_values(secret_repo):
    root = secret_repo
    user_config("[index]\nredact_secrets = true\n")  # the user's switch, never the repository's
    data = json.loads(_index(root, "--json").stdout)
    assert not [s for s in data["skipped"] if s["reason"] == "secret-content"]
    hits = _search(root, "trellisqueen host key")
    assert hits[0]["path"] == "docs/ops_key.md"
    assert "[REDACTED]" in json.dumps(_search(root, "AWS_SECRET_ACCESS_KEY"))
    state = _state_bytes(root)
    assert b"[REDACTED]" in state
    for value in VALUES:
        assert value.encode() not in state, value
    # switching redaction off again reads every file again: the secrets leave the index
    user_config("[index]\nredact_secrets = false\n")
    data = json.loads(_index(root, "--json").stdout)
    skipped = {s["path"] for s in data["skipped"] if s["reason"] == "secret-content"}
    assert skipped == set(SECRET_FILES) - {"docs/ops_key.md"}  # docs pages: redacted
    assert "[REDACTED]" in json.dumps(_search(root, "trellisqueen host key"))


def test_a_service_account_json_is_caught_by_its_content():
    text = json.dumps(
        {"type": "service_account", "project_id": "p", "private_key": PRIVATE_KEY}, indent=2
    )
    found = scan("gcp/account.json", text)
    assert [f.kind for f in found] == ["Private Key"]
    assert "Yh2Xb7Nc4Md9Pq1Rs6" not in redact(text, found)


@pytest.mark.parametrize(
    "rel, text",
    [
        ("app/tok.py", 'SLACK = "xoxb-' + '123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"\n'),
        ("app/pay.py", 'STRIPE = "sk_live_' + '4eC39HqLyjWDarjtT1zdp7dc"\n'),
        ("app/gl.py", 'GITLAB = "glpat-' + 'Xy7Kq2Lm5Nx8Vb3Wc9Ty"\n'),
        (
            "app/jwt.js",
            'const t = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.'
            + 'eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";\n',
        ),
        ("conf/app.php", "$cfg = ['db_password' => 'Qw3rTy9!" + "zXcV'];\n"),
    ],
)
def test_token_kinds_are_found_and_redacted_whole(rel, text):
    found = scan(rel, text)
    assert len(found) == 1 and found[0].line == 1
    value = text[found[0].start : found[0].end]
    assert redact(text, found).count("[REDACTED]") == 1 and value not in redact(text, found)
    assert len(value) >= 12


@pytest.mark.parametrize(
    "rel, text",
    [
        ("tests/test_auth.py", 'password = "test"\nPASSWORD = "hunter2"\n'),
        ("app/pem.py", 'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):\n    pass\n'),
        ("docs/keys.md", "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----\n"),
        ("app/names.py", 'tokenizer = "bert-base-uncased"\nkey = "SECRET_KEY"\n'),
        ("app/ml.py", 'pad_token = "<|pad_1|>"\nimage_token: str = "<|image_pad|>"\n'),
        ("app/cfg.py", 'password = "${DB_PASSWORD}"\nsecret = "{{ vault.secret }}"\n'),
        ("app/asm.xml", '<a publicKeyToken="1fc8b3b9a1e18e3b" />\n'),
        ("app/dna.py", 'SEQ = "AAACCATCTCTACCGGTTCGCTTTCACTGGATATC"\n'),
    ],
)
def test_no_secret_in_ordinary_code(rel, text):
    assert scan(rel, text) == []


# Issue 41, item 4: shapes the scan missed after the first widening (secret_rules.py),
# each indexed and found by `llmc search <value>`. Values are built from parts.
B64 = "Zq8vT3xYw9LmN2pR" + "5sK7aB4cD6eF1gH0"
PW = "Mv7qT2x" + "R9zL4wKp"
NEAR_DOCS_AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz" + "EXAMPLEKEY"  # not the docs' value
S40 = AWS_SECRET
GH = GITHUB

MISSED = [
    ("deploy/run.sh", f"AWS_SECRET_ACCESS_KEY={NEAR_DOCS_AWS}\n", NEAR_DOCS_AWS),
    ("Dockerfile", f"FROM alpine\nENV REGION=eu AWS_SECRET_ACCESS_KEY={S40}\n", S40),
    ("ci/Dockerfile.build", f"RUN AWS_SECRET_ACCESS_KEY={S40} aws s3 sync . s3://b\n", S40),
    ("docs/deploy.md", f"Run with `AWS_SECRET_ACCESS_KEY={S40}` set.\n", S40),
    ("app/boto_setup.py", f"# aws_secret_access_key = {S40}\nimport boto3\n", S40),
    (
        "k8s/deploy.yaml",
        f"env:\n  - name: DB_PASSWORD\n    value: {PW}\n  - name: MODE\n    value: prod\n",
        PW,
    ),
    ("config/app.yaml", f"service:\n  x-api-key: {PW}\n", PW),
    ("config/db.yml", f"primary:\n  db_pass: {PW}\n", PW),
    ("config/pay.yaml", f"stripe_key: {B64}\n", B64),
    ("app/crypto.py", f'ENCRYPTION_KEY = "{B64}"\n', B64),
    ("web/config.json", f'{{"stripeKey": "{B64}", "mode": "live"}}\n', B64),
    ("svc/db.go", f'func open() {{\n\tdbPass := "{PW}"\n}}\n', PW),
    ("docs/restore.md", f"    mysql -u root --password={PW} shop < dump.sql\n", PW),
    ("app/client.py", f'HEADERS = {{"Authorization": "Bearer {B64}"}}\n', B64),
    ("scripts/call.sh", f'curl -H "Authorization: Bearer {B64}" https://api.internal\n', B64),
    ("app/cache.py", f'REDIS = "redis://:{PW}@cache:6379/0"\n', PW),
    ("app/db.py", f'DB = "postgres://app:{PW}%40x@db.internal/app"\n', PW),
    ("ci/gh.py", f'T = "gh" + "{GH[2:]}"\n', GH[2:]),
    ("ci/gh2.py", f'T = (\n    "{GH[:12]}"\n    "{GH[12:]}"\n)\n', GH[12:]),
    ("web/gh.js", f"const t = '{GH[:12]}' +\n  '{GH[12:]}';\n", GH[12:]),
    ("web/gh.php", f"<?php\n$t = '{GH[:12]}' . '{GH[12:]}';\n", GH[12:]),
]


@pytest.mark.parametrize("rel, text, value", MISSED)
def test_more_shapes_are_found_and_redacted(rel, text, value):
    found = scan(rel, text)
    assert found, (rel, text)
    assert value not in redact(text, found)


@pytest.mark.parametrize(
    "rel, text",
    [
        # the placeholders the issue names
        ("config/app.yaml", "db:\n  password: ${DB_PASSWORD}\n  api_key: <your-key>\n"),
        ("config/app.yaml", "auth:\n  password: changeme\n  token: xxx\n  secret: xxxxxxxx\n"),
        ("app/settings.py", "password = os.environ['DB_PASSWORD']\npassword = None\n"),
        ("app/auth.py", "def login(password: str, api_key=api_key):\n    return api_key\n"),
        ("deploy/run.sh", 'export API_KEY="${API_KEY:-}"\nPASSWORD=$1\nread -s TOKEN\n'),
        ("Dockerfile", "ARG NPM_TOKEN\nENV NPM_TOKEN=${NPM_TOKEN}\n"),
        # names, paths, hashes and well-known defaults are not secrets
        ("config/app.yaml", "token_type: Bearer\nsecret_ref: prod/db/password-v2\n"),
        ("config/app.yaml", "password_file: /run/secrets/db_password\ntoken_ttl: 3600s\n"),
        ("app/users.py", 'password_hash = "pbkdf2_sha256$260000$abc$def"\n'),
        ("app/party.py", 'secret_santa = "Alice-Bob-2024"\nsort_key = "created_at"\n'),
        ("docker-compose.yml", "DB: postgres://postgres:postgres@db:5432/postgres\n"),
        ("docs/api.md", "Send `Authorization: Bearer <token>` or `Bearer ${TOKEN}`.\n"),
        ("app/llm.py", 'KEY = "sk-ant-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"\n'),
        ("app/hashes.py", 'cache_key = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"\n'),
        (
            "k8s/deploy.yaml",
            "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef: {}\n",
        ),
        ("app/names.py", 'public_key = "' + B64 + '"\nPUBLISHABLE_KEY = "' + B64 + '"\n'),
        ("app/msgs.py", 'MSG = ("token " "expired")\nURL = "https://" + "example.com"\n'),
    ],
)
def test_placeholders_and_names_stay_indexed(rel, text):
    assert scan(rel, text) == []


@pytest.mark.parametrize(
    "value",
    [
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6Ikpv"
        "aG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
    ],
)
def test_documented_example_keys_are_allowed(value):
    for rel, text in (
        ("docs/aws.md", f"```\nexport AWS_SECRET_ACCESS_KEY={value}\n```\n"),
        ("app/example.py", f'TOKEN = "{value}"\n'),
        ("docs/azure.md", f"`AccountName=devstoreaccount1;AccountKey={value}`\n"),
    ):
        assert scan(rel, text) == [], (rel, value)


def test_the_new_shapes_are_not_found_by_search_and_docs_examples_are(tmp_path):
    files = {rel: text for rel, text, _ in MISSED}
    files["docs/aws_cli.md"] = (
        "# Configure the AWS CLI\n\nThe zanzibarquill walkthrough:\n\n"
        "    AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
        "    AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
    )
    files["scripts/aws_demo.sh"] = (
        "# marrowpike demo, with the AWS docs' keys\n"
        "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n"
        'export AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"\n'
    )
    files["app/main.py"] = "def fennelwhistle():\n    return 1\n"
    root = make_repo(tmp_path / "r", files)
    data = json.loads(_index(root, "--json").stdout)
    state = _state_bytes(root)  # before searching: queries are logged in .llmc/
    skipped = {s["path"]: s["reason"] for s in data["skipped"]}
    pages = {"docs/deploy.md", "docs/restore.md"}  # docs pages: indexed with values redacted
    assert {p for p, r in skipped.items() if r == "secret-content"} == {
        rel for rel, _, _ in MISSED
    } - pages
    assert "[REDACTED]" in json.dumps(_search(root, "mysql root shop dump"))
    for query, path in (
        ("zanzibarquill", "docs/aws_cli.md"),
        ("marrowpike", "scripts/aws_demo.sh"),
    ):
        hits = _search(root, query)  # the docs' example keys keep their pages, unredacted
        assert hits and hits[0]["path"] == path and path not in skipped
        assert "AKIAIOSFODNN7EXAMPLE" in hits[0]["snippet"], hits[0]
    outputs = [json.dumps(data)]
    for _, _, value in MISSED:
        outputs.append(json.dumps(_search(root, value)))
    for _, _, value in MISSED:
        assert value.encode() not in state, value
        assert not any(value in out for out in outputs), value
