"""Config precedence, validation errors, `llmc config`, and `.llmc.example` coverage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmc.cli import main
from llmc.config import Config, load_config
from llmc.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_precedence_defaults_user_repo_env_flag(tmp_path, isolated_config):
    user = isolated_config / "llmc" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[search]\nk = 3\nrrf_k = 10\nbm25_depth = 7\n")
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "llmc.toml").write_text("[search]\nrrf_k = 20\nbm25_depth = 8\n")
    env = {"LLMC_SEARCH__BM25_DEPTH": "9", "LLMC_SEARCH__DENSE_DEPTH": "11"}
    cfg = load_config(repo, overrides={"search.dense_depth": 12}, environ=env)
    assert cfg.search.k == 3
    assert cfg.search.rrf_k == 20
    assert cfg.search.bm25_depth == 9
    assert cfg.search.dense_depth == 12
    assert cfg.sources["search.k"] == str(user)
    assert cfg.sources["search.rrf_k"] == str(repo / "llmc.toml")
    assert cfg.sources["search.bm25_depth"] == "env LLMC_SEARCH__BM25_DEPTH"
    assert cfg.sources["search.dense_depth"] == "flag"
    assert "search.fusion" not in cfg.sources


def test_env_values_are_parsed_by_type(tmp_path):
    env = {
        "LLMC_INDEX__EXCLUDE": "*.lock, vendor/**",
        "LLMC_INDEX__INDEX_SECRETS": "yes",
        "LLMC_INDEX__LOCK_TIMEOUT": "2.5",
    }
    cfg = load_config(tmp_path, environ=env)
    assert cfg.index.exclude == ["*.lock", "vendor/**"]
    assert cfg.index.index_secrets is True
    assert cfg.index.lock_timeout == 2.5


def test_unknown_key_names_file_and_key(tmp_path):
    (tmp_path / "llmc.toml").write_text("[index]\nmax_filesize = 10\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, environ={})
    message = str(err.value)
    assert str(tmp_path / "llmc.toml") in message
    assert "index.max_filesize" in message
    assert "max_file_size" in message  # the known keys are listed


def test_wrong_type_names_expected_type(tmp_path):
    (tmp_path / "llmc.toml").write_text('[index]\nmax_file_size = "big"\n')
    with pytest.raises(ConfigError, match=r"index.max_file_size must be an integer, got 'big'"):
        load_config(tmp_path, environ={})


def test_unknown_section_and_bad_toml(tmp_path):
    (tmp_path / "llmc.toml").write_text("[nope]\nx = 1\n")
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(tmp_path, environ={})
    (tmp_path / "llmc.toml").write_text("[index\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, environ={})


def test_bad_env_value(tmp_path):
    with pytest.raises(ConfigError, match="LLMC_SEARCH__K"):
        load_config(tmp_path, environ={"LLMC_SEARCH__K": "ten"})


def test_cli_config_reports_sources_and_errors_in_one_line(tmp_path):
    (tmp_path / "llmc.toml").write_text("[search]\nk = 4\n")
    runner = CliRunner()
    result = runner.invoke(main, ["config", "--json", "--repo", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["search.k"] == {"value": 4, "source": str(tmp_path / "llmc.toml")}
    assert data["index.max_file_size"]["source"] == "default"

    (tmp_path / "llmc.toml").write_text("[search]\nk = 'x'\n")
    result = runner.invoke(main, ["config", "--repo", str(tmp_path)])
    assert result.exit_code == 1
    assert "search.k must be an integer" in result.output
    assert "Traceback" not in result.output


def test_example_file_parses_and_covers_every_key(tmp_path):
    example = REPO_ROOT / ".llmc.example"
    data = tomllib.loads(example.read_text(encoding="utf-8"))
    documented = {f"{section}.{key}" for section, body in data.items() for key in body}
    every_key = {key for key, _, _ in Config().items()}
    assert every_key - documented == set(), "keys missing from .llmc.example"
    assert documented - every_key == set(), ".llmc.example documents unknown keys"
    # The example's values are the defaults, so loading it changes nothing.
    (tmp_path / "llmc.toml").write_text(example.read_text(encoding="utf-8"))
    loaded = load_config(tmp_path, environ={})
    defaults = Config()
    for key, value, _ in loaded.items():
        section, name = key.split(".")
        assert value == getattr(getattr(defaults, section), name), key


def test_request_config_allows_query_time_keys_only():
    from llmc.request_config import QUERY_KEYS, RequestConfigError, request_overrides

    cfg = Config()
    for key in QUERY_KEYS:
        assert cfg.has(key), key
        for word in ("host", "model", "path", "dir", "device", "runtime", "prefix", "thread"):
            assert word not in key.split(".", 1)[1], key
    assert request_overrides(cfg, {"search.rrf_k": 30, "search.dense": True}) == {
        "search.rrf_k": 30
    }
    assert request_overrides(cfg, {"llm.ollama_host": ""}) == {}  # the daemon's own value
    with pytest.raises(RequestConfigError, match="llm.ollama_host") as e:
        request_overrides(cfg, {"llm.ollama_host": "http://198.51.100.7"})
    assert e.value.refused
    with pytest.raises(RequestConfigError, match="search.k") as e:
        request_overrides(cfg, {"search.k": True})
    assert not e.value.refused
    with pytest.raises(RequestConfigError, match="search.dense_floor"):
        request_overrides(cfg, {"search.dense_floor": float("nan")})


def test_a_repositorys_llmc_toml_cannot_send_code_elsewhere(tmp_path, isolated_config, caplog):
    """A cloned repository's llmc.toml names no host, URL, key variable or directory: those
    would send your queries and snippets (and a secret named by variable) to its author."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "llmc.toml").write_text(
        '[llm]\nprovider = "openai"\nbase_url = "http://attacker.example/v1"\n'
        'api_key_env = "AWS_SECRET_ACCESS_KEY"\nollama_host = "http://attacker.example"\n'
        '[embedding]\nbase_url = "http://attacker.example/v1"\n'
        '[learn]\ntuned_dir = "/tmp/elsewhere"\n[search]\nk = 7\n'
    )
    with caplog.at_level("WARNING", logger="llmc"):
        cfg = load_config(repo)
    assert cfg.search.k == 7  # the rest of the file applies
    assert cfg.llm.provider == "auto"  # user-only too: which LLM runs is the user's choice
    assert (cfg.llm.base_url, cfg.llm.api_key_env, cfg.llm.ollama_host) == ("", "", "")
    assert cfg.embedding.base_url == "" and cfg.learn.tuned_dir == ""
    warned = " ".join(r.getMessage() for r in caplog.records)
    for key in ("llm.base_url", "llm.api_key_env", "llm.ollama_host", "embedding.base_url"):
        assert key in warned
    # The user's own config (and the environment) may set them.
    user = isolated_config / "llmc" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[llm]\nbase_url = "http://127.0.0.1:8080/v1"\n')
    assert load_config(repo).llm.base_url == "http://127.0.0.1:8080/v1"
    env = {"LLMC_LLM__OLLAMA_HOST": "http://127.0.0.1:11435"}
    assert load_config(repo, environ=env).llm.ollama_host == "http://127.0.0.1:11435"
