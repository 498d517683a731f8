"""Configuration layering: flags > GCITE_* environment > config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.config import ApiKey, load_settings
from gcite.errors import ConfigError


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_source(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"data_dir": str(tmp_path)})
    assert settings.data_dir == tmp_path
    assert settings.top_k == 5
    assert settings.db_url == f"sqlite:///{tmp_path / 'gcite.sqlite3'}"


def test_flag_beats_env_beats_file(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.toml", "top_k = 3\nweb_provider = 'offline'\nport = 9000\n")
    env = {"GCITE_TOP_K": "7", "GCITE_PORT": "9100"}
    settings = load_settings({"top_k": 9}, config_file=cfg, environ=env)
    assert settings.top_k == 9  # flag
    assert settings.port == 9100  # env over file
    assert settings.web_provider == "offline"  # file


def test_none_flags_are_ignored(tmp_path: Path) -> None:
    settings = load_settings({"top_k": None}, environ={"GCITE_TOP_K": "4"})
    assert settings.top_k == 4


def test_config_file_found_in_data_dir(tmp_path: Path) -> None:
    _write(tmp_path / "gcite.toml", "dataset = 'handbook'\n")
    settings = load_settings(environ={"GCITE_DATA_DIR": str(tmp_path)})
    assert settings.dataset == "handbook"


def test_keys_are_bound_to_roles(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "c.toml",
        '[[app_keys]]\nkey = "app-1"\nroles = ["运维工程师", "物业经理"]\n'
        'stream_event = "text_chunk"\n\n'
        '[[retrieval_keys]]\nkey = "kb-1"\nroles = "安保主管, 物业经理"\n',
    )
    settings = load_settings(config_file=cfg, environ={})
    assert settings.app_keys == [
        ApiKey("app-1", ("运维工程师", "物业经理"), "text_chunk"),
    ]
    assert settings.retrieval_keys == [ApiKey("kb-1", ("安保主管", "物业经理"))]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("top_k = 'many'\n", "top_k"),
        ("nonsense = 1\n", "nonsense"),
        ("top_k = \n", "无法读取"),
        ("[[app_keys]]\nroles = ['a']\n", "key"),
        ("[[app_keys]]\nkey = 'k'\nstream_event = 'chunks'\n", "stream_event"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    cfg = _write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError, match=message):
        load_settings(config_file=cfg, environ={})


def test_bad_env_value_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="port"):
        load_settings(environ={"GCITE_PORT": "eighty"})


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="无法读取"):
        load_settings(config_file=tmp_path / "absent.toml", environ={})


def test_app_key_carries_the_app_settings_dify_keeps_per_app(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text(
        """
[[app_keys]]
key = "app-1"
name = "物业助手"
opening_statement = "您好！"
suggested_questions = ["访客在哪里登记？", "停车怎么收费？"]

[[retrieval_keys]]
key = "kb-1"
expose_roles = true
""",
        encoding="utf-8",
    )
    settings = load_settings(config_file=config, environ={})
    (app,) = settings.app_keys
    assert (app.name, app.opening_statement) == ("物业助手", "您好！")
    assert app.suggested_questions == ("访客在哪里登记？", "停车怎么收费？")
    assert app.expose_roles is False
    assert settings.retrieval_keys[0].expose_roles is True


@pytest.mark.parametrize(
    "line",
    ['suggested_questions = "一个问题"', "opening_statement = 3", 'expose_roles = "yes"'],
)
def test_bad_app_key_settings_are_refused(tmp_path: Path, line: str) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text(f'[[app_keys]]\nkey = "app-1"\n{line}\n', encoding="utf-8")
    with pytest.raises(ConfigError):
        load_settings(config_file=config, environ={})
