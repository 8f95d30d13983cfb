"""A repository's own llmc.toml sets ranking and indexing of its own files, nothing else.

Reproductions (issue 41): a cloned llmc.toml switched secret indexing on, named model files
(`/etc/passwd` as the ranker, `/etc/shadow` as the GGUF), spent the user's model server
(`llm.provider`, `hyde.mode = "always"`) and loosened the daemon (`daemon.tcp`, limits).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

from click.testing import CliRunner
from repo_fixtures import SAMPLE_FILES, make_repo

from llmc.cli import main
from llmc.config import Config, load_config
from llmc.repo_config import REPO_KEYS, USER_KEYS, USER_SECTIONS, classified

HOSTILE = textwrap.dedent(
    """\
    [index]
    index_secrets = true
    redact_secrets = true
    max_span_lines = 40
    [search]
    ranker_model = "/etc/passwd"
    llm_rerank = true
    hyde = true
    rerank = true
    k = 7
    [rerank]
    model = "/etc"
    [llm]
    provider = "embedded"
    embedded_model = "/etc/shadow"
    max_tokens = 100000
    [hyde]
    mode = "always"
    [embedding]
    code_model = "vendor/model"
    [daemon]
    tcp = true
    max_request_bytes = 1000000000
    max_connections = 100000
    request_timeout_s = 100000.0
    """
)
REFUSED = (
    "index.index_secrets", "index.redact_secrets", "search.ranker_model", "search.llm_rerank",
    "search.hyde", "rerank.model", "llm.provider", "llm.embedded_model", "llm.max_tokens",
    "hyde.mode", "embedding.code_model", "daemon.tcp", "daemon.max_request_bytes",
    "daemon.max_connections", "daemon.request_timeout_s",
)  # fmt: skip


def _keys() -> list[str]:
    cfg = Config()
    return [key for key, _, _ in cfg.items()]


def test_every_config_key_is_classified():
    unclassified = [key for key in _keys() if not classified(key)]
    assert unclassified == [], "classify these in llmc/repo_config.py"
    assert not set(REPO_KEYS) & set(USER_KEYS)
    assert not {k.split(".")[0] for k in REPO_KEYS} & set(USER_SECTIONS)
    known = set(_keys())
    assert set(REPO_KEYS) <= known and set(USER_KEYS) <= known


def test_a_repository_cannot_set_user_only_keys(tmp_path, caplog):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(HOSTILE)
    with caplog.at_level("WARNING", logger="llmc"):
        cfg = load_config(repo)
    default = Config()
    for key in REFUSED:
        assert cfg.get(key) == default.get(key), key
        assert key in cfg.ignored, key
    assert cfg.search.k == 7 and cfg.index.max_span_lines == 40 and cfg.search.rerank is True
    warnings = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(warnings) == 1 and all(key in warnings[0] for key in REFUSED)


def test_out_of_bounds_values_from_a_repository_are_ignored(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(
        "[search]\nk = 1000000000\nbm25_depth = 80\n[index]\nmax_file_size = 10000000000\n"
        '[expand]\nedge_types = ["calls", "rm -rf"]\n'
    )
    cfg = load_config(repo)
    assert cfg.search.k == Config().search.k and cfg.search.bm25_depth == 80
    assert cfg.index.max_file_size == Config().index.max_file_size
    assert cfg.expand.edge_types == Config().expand.edge_types
    assert {"search.k", "index.max_file_size", "expand.edge_types"} <= set(cfg.ignored)


def test_the_user_may_set_them(tmp_path, isolated_config):
    user = isolated_config / "llmc" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(
        '[index]\nindex_secrets = true\n[daemon]\ntcp = true\n[hyde]\nmode = "always"\n'
    )
    cfg = load_config(tmp_path)
    assert cfg.index.index_secrets and cfg.daemon.tcp and cfg.hyde.mode == "always"
    assert cfg.ignored == {}


def test_llmc_config_shows_what_was_ignored_and_why(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(HOSTILE)
    result = CliRunner().invoke(main, ["config", "--repo", str(repo), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    secret = data["index.index_secrets"]
    assert secret["value"] is False and secret["source"] == "default"
    assert secret["ignored"]["value"] is True and "secret" in secret["ignored"]["why"]
    assert "model" in data["search.ranker_model"]["ignored"]["why"]
    default = Config()
    for key in REFUSED:  # each the default still, and shown as ignored with why
        assert data[key]["value"] == default.get(key) and data[key]["source"] == "default", key
        assert data[key]["ignored"]["why"].startswith("user-only: it "), key
    text = CliRunner().invoke(main, ["config", "--repo", str(repo), "daemon.tcp"])
    assert text.exit_code == 0 and "ignored true" in text.output and "daemon" in text.output
    one = CliRunner().invoke(main, ["config", "--repo", str(repo), "--json", "search.k"])
    assert json.loads(one.stdout) == {"search.k": {"value": 7, "source": str(repo / "llmc.toml")}}
    assert CliRunner().invoke(main, ["config", "--repo", str(repo), "no.such"]).exit_code == 2


def test_a_repository_cannot_switch_secret_indexing_on(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    value = "sk-proj-" + "Zq8vT3xYw9LmN2pR5sK7aB4cD6eF1gH0"
    root = make_repo(
        tmp_path / "repo", {**SAMPLE_FILES, "llmc.toml": "[index]\nindex_secrets = true\n"}
    )
    (root / ".env").write_text(f"OPENAI_API_KEY={value}\n")  # the user's own, untracked
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    found = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--json", "--no-dense", "--no-hyde", value]
    )
    assert found.exit_code == 0, found.output
    results = json.loads(found.stdout)["results"]
    assert ".env" not in {r["path"] for r in results}
    assert not any(value in r["snippet"] for r in results)


AUDIT = """
import sys
opened = []
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        opened.append(str(args[0]))
sys.addaudithook(hook)
from llmc.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except BaseException as e:
    print("exit:", repr(e), file=sys.stderr)
with open(sys.argv[-1] + ".opened", "w") as out:
    out.write("\\n".join(opened))
"""


def test_an_audit_of_opened_files_shows_none_the_repository_named(tmp_path):
    root = make_repo(tmp_path / "repo", {**SAMPLE_FILES, "llmc.toml": HOSTILE})
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["LLMC_NO_DAEMON"] = "1"
    for args in (
        ["index", "--no-vectors", "-q"],
        ["search", "--json", "--no-dense", "session store", "--repo"],
    ):
        subprocess.run(
            [sys.executable, "-c", AUDIT, *args, str(root)],
            env=env, cwd=tmp_path, timeout=300, capture_output=True, text=True,
        )  # fmt: skip
        opened = (root.parent / (root.name + ".opened")).read_text().splitlines()
        assert opened, args
        named = [p for p in opened if p.startswith(("/etc/passwd", "/etc/shadow", "/etc"))]
        named = [p for p in named if p.startswith(("/etc/passwd", "/etc/shadow")) or p == "/etc"]
        assert named == [], (args, named)


def test_repo_config_field_is_not_a_section():
    assert "ignored" not in {f.name for f in dataclasses.fields(Config) if f.name != "ignored"}
    assert all(not key.startswith(("ignored.", "sources.")) for key in _keys())


def test_a_repository_cannot_switch_the_latency_budget_off(tmp_path, monkeypatch):
    """`search.budget_ms = 0` turned the budget off, so HyDE (on by default) would call the
    user's LLM server on every vague query; a higher budget let it in too."""
    monkeypatch.setenv("LLMC_NO_DAEMON", "1")
    root = make_repo(tmp_path / "repo", {**SAMPLE_FILES, "llmc.toml": "[search]\nbudget_ms = 0\n"})
    cfg = load_config(root)
    assert cfg.search.budget_ms == Config().search.budget_ms
    assert "LLM" in cfg.ignored["search.budget_ms"][2]
    assert CliRunner().invoke(main, ["index", str(root), "--no-vectors", "-q"]).exit_code == 0
    found = CliRunner().invoke(
        main, ["search", "--repo", str(root), "--no-dense", "--explain", "session store"]
    )
    assert found.exit_code == 0, found.output
    assert "search.budget_ms = 0" not in found.stdout and "budget 150 ms" in found.stdout


def test_one_warning_says_which_keys_are_user_only_and_which_values_out_of_bounds(
    tmp_path, caplog, isolated_config
):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(
        "[index]\nindex_secrets = true\n[search]\nk = 1000000000\n[daemon]\ntcp = true\n"
    )
    with caplog.at_level("WARNING", logger="llmc"):
        load_config(repo)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    user = str(isolated_config / "llmc" / "config.toml")
    assert f"index.index_secrets, daemon.tcp are user-only (set them in {user} or LLMC_" in warning
    assert "search.k = 1000000000 is out of bounds (must be between 1 and 1000)" in warning


def test_llmc_config_shows_each_ignored_key_in_full(tmp_path):
    """In the whole table the reasons were cut at the terminal's width."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(HOSTILE)
    result = CliRunner().invoke(main, ["config", "--repo", str(repo)], terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    cfg = load_config(repo)
    for key in REFUSED:
        value, _, why = cfg.ignored[key]
        line = f"  {key}: ignored {json.dumps(value)}: {why}"
        assert line in lines, key


def test_llmc_config_prints_a_repositorys_values_as_they_are(tmp_path):
    """Values were read as rich markup: `[/]` was a traceback, `[bold red]x` printed `x`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(
        '[index]\ninclude = ["[/]", "[bold red]x"]\n[daemon]\ntcp = "[/]"\n'
    )
    result = CliRunner().invoke(main, ["config", "--repo", str(repo), "index.include"])
    assert result.exit_code == 0, result.output
    assert '["[/]", "[bold red]x"]' in result.stdout
    result = CliRunner().invoke(main, ["config", "--repo", str(repo), "daemon.tcp"])
    assert result.exit_code == 0, result.output
    assert 'ignored "[/]"' in result.stdout


def test_repository_bounds_are_a_requests_where_both_may_set_a_key():
    from llmc.request_config import QUERY_KEYS

    for key in set(REPO_KEYS) & set(QUERY_KEYS):
        rule, bound = QUERY_KEYS[key], REPO_KEYS[key]
        assert (bound.lo, bound.hi, bound.choices) == (rule.lo, rule.hi, rule.choices), key
