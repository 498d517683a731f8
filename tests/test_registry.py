"""The registries of web providers, LLM protocols and store backends: every entry builds
its seam from settings, and the config keys follow from the entries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gcite.chatflow.seams import LLMBackend, WebSource
from gcite.config import CHOICES, KEYS, Settings, load_settings
from gcite.knowledge.store import pgvector_url
from gcite.registry import LLM_PROTOCOLS, STORE_BACKENDS, WEB_PROVIDERS, load
from gcite.web import make_web_source


@pytest.mark.parametrize("name", sorted(WEB_PROVIDERS))
async def test_every_web_provider_is_built_from_its_settings(name: str, tmp_path: Path) -> None:
    entry = WEB_PROVIDERS[name]
    (tmp_path / "a.md").write_text("# 页面\n\n巡检记录。", encoding="utf-8")
    flags = {"web_provider": name, "web_dir": str(tmp_path), "web_offline_index": "bm25"}
    if entry.needs_key:
        assert KEYS[f"{name}_api_key"] == ("web", "providers", name, "api_key")
        flags[f"{name}_api_key"] = "k"
    source = make_web_source(load_settings(flags, environ={}))
    assert isinstance(source, WebSource)
    assert isinstance(source, load(entry.source))
    assert source.name == name
    await source.aclose()
    assert name in CHOICES["web_provider"]


@pytest.mark.parametrize("name", sorted(LLM_PROTOCOLS))
def test_every_llm_protocol_is_built_from_its_settings(name: str) -> None:
    settings = Settings.from_keys(llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    backend = load(LLM_PROTOCOLS[name]).from_settings(settings.with_keys(llm_protocol=name))
    assert isinstance(backend, LLMBackend)
    assert name in CHOICES["llm_protocol"]


def test_a_provider_key_comes_from_its_table_or_its_own_variables(tmp_path: Path) -> None:
    config = tmp_path / "gcite.toml"
    config.write_text("[web.baidu]\napi_key = 'from-table'\n", encoding="utf-8")
    settings = load_settings(config_file=config, environ={"QIANFAN_API_KEY": "q"})
    assert settings.web.api_key("baidu") == "from-table"
    assert load_settings(environ={"QIANFAN_API_KEY": " q "}).web.api_key("baidu") == "q"


@pytest.mark.parametrize(
    "name", sorted(n for n, b in STORE_BACKENDS.items() if b.settings) or ["none"]
)
def test_a_store_backend_setting_follows_from_its_entry(name: str, tmp_path: Path) -> None:
    """Each setting a store backend declares has its config key, its ``GCITE_*``
    variable and its ``[knowledge]`` file key, and reaches the backend's table."""
    assert name != "none", "no store backend declares a setting"
    for setting in STORE_BACKENDS[name].settings:
        assert KEYS[setting.key] == ("knowledge", "backends", name, setting.name)
        sample = "postgresql://u@h/from-file" if isinstance(setting.default, str) else "7"
        config = tmp_path / f"{setting.key}.toml"
        config.write_text(f"[knowledge]\n{setting.name} = {sample!r}\n", encoding="utf-8")
        from_file = load_settings(config_file=config, environ={})
        assert str(from_file.knowledge.setting(name, setting.name)) == sample
        assert from_file.value(setting.key) == from_file.knowledge.setting(name, setting.name)
        from_env = load_settings(environ={f"GCITE_{setting.key.upper()}": sample})
        assert str(from_env.knowledge.setting(name, setting.name)) == sample
        assert Settings().knowledge.setting(name, setting.name) == setting.default


def test_the_pgvector_database_keeps_its_contract_names(tmp_path: Path) -> None:
    url = "postgresql://u@127.0.0.1/kb"
    config = tmp_path / "gcite.toml"
    config.write_text(f'[knowledge]\nstore = "pgvector"\ndatabase_url = "{url}"\n', "utf-8")
    assert pgvector_url(load_settings(config_file=config, environ={})) == url
    top = tmp_path / "top.toml"
    top.write_text(f'knowledge_database_url = "{url}"\n', encoding="utf-8")
    assert pgvector_url(load_settings(config_file=top, environ={})) == url
    env = {"GCITE_KNOWLEDGE_DATABASE_URL": url}
    assert pgvector_url(load_settings(environ=env)) == url
    assert pgvector_url(Settings.from_keys(knowledge_database_url=url)) == url
    assert pgvector_url(Settings.from_keys(database_url=url + "2")) == url + "2"  # fallback


_NEW_BACKEND = """
import importlib, sys
import gcite.config
from gcite.registry import STORE_BACKENDS, BackendSetting, StoreBackend

url, pool = BackendSetting("acme_url", "acme_url"), BackendSetting("acme_pool", "acme_pool", 4)
STORE_BACKENDS["acme"] = StoreBackend("acme", "acme_store:open_acme", (url, pool))
config = importlib.reload(gcite.config)  # as if the entry had been there at start-up
s = config.load_settings(config_file=sys.argv[1], environ={"GCITE_ACME_POOL": "9"})
k = s.knowledge
print(k.store, k.setting("acme", "acme_url"), k.setting("acme", "acme_pool"))
"""


def test_a_new_store_backend_needs_no_change_in_config(tmp_path: Path) -> None:
    """A backend registered with settings of its own: ``store`` accepts it, and its
    settings are read from the file's ``[knowledge]`` table and the environment (typed by
    their defaults) with no line of :mod:`gcite.config` changed."""
    config = tmp_path / "gcite.toml"
    config.write_text('[knowledge]\nstore = "acme"\nacme_url = "acme://x"\n', "utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _NEW_BACKEND, str(config)],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
        check=True,
    )
    assert done.stdout.split() == ["acme", "acme://x", "9"]
