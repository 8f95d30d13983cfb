"""The cross-encoder reranker, with the real weights shipped in llmc (offline)."""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

import pytest

from llmc.config import RerankConfig, load_config
from llmc.errors import ModelError
from llmc.models.reranker import (
    DEFAULT_MODEL_ID,
    SHIPPED_DIR,
    WEIGHTS,
    CrossEncoderReranker,
    get_reranker,
    passage_text,
    reranker_from_config,
    resolve_model,
    span_passage,
)
from llmc.types import CODE, Span

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PARSE_COOKIES = passage_text(
    "src/web/cookies.py",
    """def parse_cookie_header(header: str) -> dict[str, str]:
    cookies = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            cookies[name] = value
    return cookies""",
)
RETRY = passage_text(
    "src/web/retry.py",
    """def call_with_retries(fn, attempts=5, base_delay=0.5):
    for attempt in range(attempts):
        try:
            return fn()
        except ConnectionError:
            if attempt == attempts - 1:
                raise
            time.sleep(base_delay * 2**attempt)""",
)
LOAD_CONFIG = passage_text(
    "src/web/settings.py",
    """def load_user_settings():
    path = Path.home() / ".config" / "web" / "settings.toml"
    if not path.exists():
        return {}
    with path.open("rb") as fh:
        return tomllib.load(fh)""",
)
INSTALL = passage_text(
    "docs/installation.md",
    """Install the latest release from PyPI with pip:

    pip install web-toolkit

Python 3.10 or newer is required. To work on the code itself, clone the repository and
run pip install -e . inside a virtual environment.""",
)
TIMEZONE = passage_text(
    "src/web/dates.py",
    """def to_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=LOCAL_ZONE)
    return moment.astimezone(timezone.utc)""",
)
CANDIDATES = [PARSE_COOKIES, RETRY, LOAD_CONFIG, INSTALL, TIMEZONE]


@pytest.fixture(scope="module")
def reranker() -> CrossEncoderReranker:
    return get_reranker("default")


@pytest.mark.parametrize(
    "query, relevant",
    [
        ("parse the Cookie request header into a dict of names and values", PARSE_COOKIES),
        ("retry a failing call with exponential backoff", RETRY),
        ("read the user's settings file from their home directory", LOAD_CONFIG),
        ("how do I install the package with pip", INSTALL),
        ("convert a datetime to UTC", TIMEZONE),
    ],
)
def test_shipped_reranker_puts_the_relevant_span_first(reranker, query, relevant):
    scores = reranker.score(query, CANDIDATES)
    assert len(scores) == len(CANDIDATES)
    best = max(range(len(scores)), key=scores.__getitem__)
    assert CANDIDATES[best] == relevant, (query, scores)
    assert all(0.0 <= s <= 1.0 for s in scores)  # sigmoid probabilities


def test_scores_are_deterministic_and_do_not_depend_on_the_batch(reranker):
    query = "retry a failing call with exponential backoff"
    first = reranker.score(query, CANDIDATES)
    assert reranker.score(query, CANDIDATES) == first
    alone = reranker.score(query, [RETRY])[0]
    assert alone == pytest.approx(first[1], abs=0.02)
    reversed_scores = reranker.score(query, CANDIDATES[::-1])[::-1]
    assert reversed_scores == pytest.approx(first, abs=0.02)


def test_no_texts_no_scores(reranker):
    assert reranker.score("anything", []) == []


def test_default_resolves_offline_from_the_package(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    cfg = load_config().rerank
    assert cfg.model == "default"
    model_id, source = resolve_model(cfg.model)
    assert model_id == DEFAULT_MODEL_ID
    assert (Path(source) / "model.safetensors").is_file()  # made whole from the shipped layers
    model = reranker_from_config(cfg)
    assert model.model_id == DEFAULT_MODEL_ID
    assert model is reranker_from_config(RerankConfig())  # loaded once per process
    assert len(model.score("convert a datetime to UTC", [TIMEZONE])) == 1


def test_missing_path_is_one_line_model_error(tmp_path):
    with pytest.raises(ModelError) as info:
        CrossEncoderReranker(str(tmp_path / "no" / "such" / "model"))
    assert "\n" not in str(info.value)


def test_unloadable_directory_is_one_line_model_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError) as info:
        CrossEncoderReranker(str(tmp_path), device="cpu")
    message = str(info.value)
    assert "\n" not in message and "cannot load reranker model" in message


def test_unknown_hub_name_offline_is_one_line_model_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as info:
        CrossEncoderReranker("llmc-test/no-such-cross-encoder", device="cpu")
    assert "\n" not in str(info.value)


def test_span_passage_is_path_then_text():
    span = Span("src/a.py", "python", CODE, "function", "f", "f", 1, 2, "def f():\n    pass", "hdr")
    assert span_passage(span) == "src/a.py\ndef f():\n    pass"
    assert passage_text("p", "x" * 5000, max_chars=10) == "p\n" + "x" * 10


def test_shipped_model_is_fp16_small_packaged_and_documented():
    from safetensors import safe_open

    weights = SHIPPED_DIR / WEIGHTS  # the layers; the word table comes from the base package
    total = sum(f.stat().st_size for f in SHIPPED_DIR.iterdir() if f.is_file())
    assert weights.stat().st_size <= 25 * 1024 * 1024 and total <= 25 * 1024 * 1024
    with safe_open(str(weights), framework="pt") as fh:
        dtypes = {str(fh.get_slice(k).get_dtype()) for k in fh.keys()}  # noqa: SIM118
    assert dtypes == {"F16"}
    record = json.loads((SHIPPED_DIR / "TRAINING.json").read_text(encoding="utf-8"))
    assert record["seed"] == record["options"]["seed"]
    trained_on = {p["name"] for p in record["train_projects"] + record["holdout_projects"]}
    assert not trained_on & {"flask", "click", "werkzeug", "jinja2", "itsdangerous"}
    assert not trained_on & {"markupsafe", "attrs", "marshmallow"}
    overall = record["heldout_eval"][0]["groups"]["all"]
    assert overall["bm25+rerank"]["ndcg@10"] > overall["bm25"]["ndcg@10"]
    # Every shipped file is package data, so a normal (non-editable) install carries it.
    pyproject = SHIPPED_DIR.parents[2] / "pyproject.toml"
    if pyproject.is_file():  # a source checkout
        patterns = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"][
            "package-data"
        ]["llmc"]
        for f in SHIPPED_DIR.iterdir():
            rel = f.relative_to(SHIPPED_DIR.parents[1]).as_posix()
            assert any(fnmatch.fnmatch(rel, p.replace("**/", "*/")) for p in patterns), rel
