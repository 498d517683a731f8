"""Limits cannot be switched off by accident: every limit is checked at start (a test per
setting, below and above its range), "none" only where "no limit" makes sense, and a
bad start-up setting is one ``错误:`` line from the real command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gcite.config import Settings, load_settings
from gcite.config_checks import BOUNDS, NO_LIMIT
from gcite.errors import ConfigError, StoreError
from gcite.service.store import ConversationStore

INTEGER = {name for name in BOUNDS if isinstance(Settings().value(name), int)}


def _load(**env: str) -> Settings:
    return load_settings(environ={f"GCITE_{k.upper()}": v for k, v in env.items()})


def _outside(name: str) -> list[str]:
    bound = BOUNDS[name]
    low = bound.low if bound.low_open else bound.low - (1 if name in INTEGER else 0.01)
    values = [low, bound.high + 1]
    return [str(int(v)) if name in INTEGER else str(v) for v in values]


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_every_limit_is_refused_outside_its_range(name: str) -> None:
    for value in [*_outside(name), "-1"]:
        with pytest.raises(ConfigError) as caught:
            _load(**{name: value})
        assert name in str(caught.value) and "\n" not in str(caught.value)
    default = Settings().value(name)
    assert _load(**{name: str(default)}).value(name) == default


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("llm_total_timeout_s", "0"),
        ("llm_idle_timeout_s", "-5"),
        ("body_read_timeout_s", "0"),
        ("max_answer_chars", "0"),
        ("max_stream_line_bytes", "-1"),
        ("top_k", "-3"),
        ("score_threshold", "-1"),
        ("score_threshold", "1.5"),
        ("ping_interval_s", "0"),
        ("convert_memory_mb", "0"),
        ("llm_idle_timeout_s", "none"),
    ],
)
def test_the_reported_values_are_refused_at_start(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        _load(**{name: value})


def test_none_is_the_explicit_no_limit_where_it_makes_sense(tmp_path: Path) -> None:
    assert set(NO_LIMIT) == {"llm_total_timeout_s"}
    assert _load(llm_total_timeout_s="none").llm.total_timeout_s == 0
    config = tmp_path / "gcite.toml"
    config.write_text('llm_total_timeout_s = "none"\n', encoding="utf-8")
    assert load_settings(config_file=config, environ={}).llm.total_timeout_s == 0
    with pytest.raises(ConfigError, match="none"):
        _load(llm_total_timeout_s="-1")  # the message says how to ask for no limit


@pytest.mark.parametrize("prefix", ["../x", "x", "/kb/", "/kb/../admin", "/a b", "/./kb"])
def test_a_bad_retrieval_prefix_is_one_clear_error(prefix: str) -> None:
    with pytest.raises(ConfigError, match="retrieval_prefix"):
        _load(retrieval_prefix=prefix)


def test_a_good_retrieval_prefix_is_kept() -> None:
    assert _load(retrieval_prefix="/kb/v1").service.retrieval_prefix == "/kb/v1"


def test_a_missing_database_directory_is_an_error_unless_asked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing/dir/x.db"
    with pytest.raises(ConfigError, match="create_database_dir"):
        _load(database_url=url)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(StoreError, match="create_database_dir"):
        ConversationStore(url, create_dir=False)
    assert not (tmp_path / "missing").exists()
    settings = _load(database_url=url, create_database_dir="true")
    ConversationStore(
        settings.service.database_url, create_dir=settings.service.create_database_dir
    ).close()
    assert (tmp_path / "missing" / "dir" / "x.db").is_file()


@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://judge:99999", "ftp://judge/v1", "judge.example.com/v1", "http://"],
)
def test_a_bad_judge_address_is_one_clear_error(url: str) -> None:
    """The citation judge's address is checked at start: the verifier that uses it is
    made only after ``/ready`` (gcite.service.resources), where a bad one would fail every
    answer while the service reports ready."""
    with pytest.raises(ConfigError, match="verify_judge_base_url") as caught:
        _load(verify_judge_base_url=url, verify_judge_model="judge")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["llm_base_url", "embed_base_url", "rerank_url"])
@pytest.mark.parametrize("url", ["http://[::1", "ftp://x", "x.example.com/v1", "http://"])
def test_a_bad_service_address_is_one_clear_error(name: str, url: str) -> None:
    """The model's, the embedder's and the reranker's addresses are checked at start like
    the judge's: their clients are made after ``/ready`` (the model's SDK client by the
    warm-up, the others at the first search), where a bad one failed every answer."""
    with pytest.raises(ConfigError, match=name) as caught:
        _load(**{name: url}, llm_model="m", embed_model="e")
    assert "\n" not in str(caught.value)
    good = "http://127.0.0.1:9/v1"
    assert _load(**{name: good}, llm_model="m", embed_model="e").value(name) == good


def test_a_judge_address_without_its_model_is_an_error() -> None:
    with pytest.raises(ConfigError, match="verify_judge_model"):
        _load(verify_judge_base_url="http://127.0.0.1:9/v1")
    for url in ("http://127.0.0.1:9/v1", "https://judge.example.com/v1/", "http://[::1]:8/v1"):
        settings = _load(verify_judge_base_url=url, verify_judge_model="judge")
        assert settings.verify.judge_base_url == url
    assert _load(verify_judge_model="judge").verify.judge_base_url == ""  # no judge


def _gcite(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GCITE_")}
    clean.update({f"GCITE_{k.upper()}": v for k, v in env.items()})
    clean["GCITE_DATA_DIR"] = str(tmp_path / "data")
    gcite = Path(sys.executable).parent / "gcite"
    return subprocess.run(
        [str(gcite), *args], env=clean, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"database_url": "sqlite:////nonexistent/dir/x.db"}, "database_url"),
        ({"retrieval_prefix": "../x"}, "retrieval_prefix"),
        ({"top_k": "-3"}, "top_k"),
        ({"convert_max_cells": "0"}, "convert_max_cells"),
        # the verifier is made after start-up: its judge's address is checked before
        ({"verify_judge_base_url": "http://[::1", "verify_judge_model": "j"}, "judge_base_url"),
        # the model's SDK client is made by the warm-up: its address is checked before
        ({"llm_base_url": "http://[::1", "llm_model": "m"}, "llm_base_url"),
        ({"llm_base_url": "ftp://x", "llm_model": "m"}, "llm_base_url"),
        # the web source is built by the app's start-up: its settings are checked before
        ({"web_provider": "bocha"}, "bocha_api_key"),
        ({"web_provider": "offline"}, "web_dir"),
    ],
)
def test_serve_stops_with_one_error_line(tmp_path: Path, env: dict[str, str], needle: str) -> None:
    _one_error_line(_gcite(tmp_path, "serve", "--port", "0", **env), needle)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"web_provider": "tavily"}, "tavily_api_key"),
        ({"web_provider": "offline", "web_dir": "/nonexistent/pages"}, "/nonexistent/pages"),
        ({"web_provider": "baidu", "baidu_api_key": "k", "web_freshness": "day"}, "时效"),
    ],
)
def test_serve_with_workers_stops_with_one_error_line(
    tmp_path: Path, env: dict[str, str], needle: str
) -> None:
    """Before any process of the set starts (it used to end in the knowledge process's
    exit code after its traceback)."""
    (tmp_path / "data").mkdir()
    _one_error_line(_gcite(tmp_path, "serve", "--port", "0", "--workers", "2", **env), needle)


def _one_error_line(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("错误: ") and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr and not Path("/nonexistent").exists()
    assert "已启动" not in done.stdout


def test_section_tables_are_checked_and_take_none_like_top_level_keys(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text(
        '[llm]\ntotal_timeout_s = "none"\n[scheduling]\nadmit = 2\n[convert]\nmemory_mb = 128\n',
        encoding="utf-8",
    )
    settings = load_settings(config_file=config, environ={})
    assert settings.llm.total_timeout_s == 0
    assert (settings.scheduling.admit, settings.convert.memory_mb) == (2, 128)
    config.write_text("[convert]\nmemory_mb = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="convert_memory_mb"):
        load_settings(config_file=config, environ={})
