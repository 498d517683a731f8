"""The registries of web providers and LLM protocols: every entry builds its seam from
settings, and the config keys follow from the entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from gcite.chatflow.seams import LLMBackend, WebSource
from gcite.config import CHOICES, KEYS, Settings, load_settings
from gcite.registry import LLM_PROTOCOLS, WEB_PROVIDERS, load
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
