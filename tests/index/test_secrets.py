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
