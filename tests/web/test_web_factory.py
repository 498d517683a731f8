"""make_web_source: provider choice, keys from settings or environment, clear config errors."""

from __future__ import annotations

import dataclasses

import pytest

from gcite.config import Settings, load_settings
from gcite.errors import ConfigError
from gcite.web import (
    BaiduSearch,
    BochaWebSearch,
    TavilySearch,
    WebSource,
    make_web_source,
)
from support.web_standin import BOCHA_PATH, web_standin


def test_none_gives_no_source() -> None:
    assert make_web_source(Settings()) is None
    settings = load_settings({"web_provider": "none"}, environ={"BOCHA_API_KEY": "x"})
    assert make_web_source(settings) is None


def test_unknown_provider() -> None:
    with pytest.raises(ConfigError, match=r"web_provider.*google.*offline, bocha, tavily, baidu"):
        Settings.from_keys(web_provider="google")
    settings = Settings()
    unchecked = dataclasses.replace(settings, web=dataclasses.replace(settings.web, provider="x"))
    with pytest.raises(ConfigError, match="未知的联网搜索提供方"):
        make_web_source(unchecked)


@pytest.mark.parametrize(
    ("provider", "cls"),
    [("bocha", BochaWebSearch), ("tavily", TavilySearch), ("baidu", BaiduSearch)],
)
def test_key_from_settings(provider: str, cls: type) -> None:
    settings = Settings.from_keys(web_provider=provider, **{f"{provider}_api_key": "from-settings"})
    source = make_web_source(settings)
    assert isinstance(source, cls)
    assert isinstance(source, WebSource)
    assert source.name == provider


@pytest.mark.parametrize(
    ("provider", "variables"),
    [
        ("bocha", ["GCITE_BOCHA_API_KEY", "BOCHA_API_KEY"]),
        ("tavily", ["GCITE_TAVILY_API_KEY", "TAVILY_API_KEY"]),
        ("baidu", ["GCITE_BAIDU_API_KEY", "BAIDU_API_KEY", "QIANFAN_API_KEY"]),
    ],
)
def test_missing_key_names_every_place_to_put_it(provider: str, variables: list[str]) -> None:
    with pytest.raises(ConfigError, match="缺少 API 密钥") as info:
        make_web_source(load_settings({"web_provider": provider}, environ={"OTHER": "x"}))
    for name in [f"{provider}_api_key", *variables]:
        assert name in str(info.value)


def _key(provider: str, env: dict[str, str], **flags: str) -> str:
    return load_settings(flags, environ=env).web.api_key(provider)


def test_key_resolution_order() -> None:
    env = {"BOCHA_API_KEY": "conventional", "GCITE_BOCHA_API_KEY": "ours"}
    assert _key("bocha", env, bocha_api_key="flag") == "flag"
    assert _key("bocha", env) == "ours"
    assert _key("bocha", {"BOCHA_API_KEY": " conventional "}) == "conventional"
    assert _key("bocha", {"GCITE_BOCHA_API_KEY": "  ", "BOCHA_API_KEY": "c"}) == "c"
    assert _key("baidu", {"QIANFAN_API_KEY": "q"}) == "q"
    assert _key("baidu", {"BAIDU_API_KEY": "b", "QIANFAN_API_KEY": "q"}) == "b"
    assert _key("tavily", {"TAVILY_API_KEY": "   "}) == ""


async def test_settings_from_the_environment_reach_the_stand_in() -> None:
    with web_standin(api_key="env-key") as server:
        env = {
            "GCITE_WEB_PROVIDER": "bocha",
            "GCITE_WEB_BASE_URL": server.base_url,
            "GCITE_WEB_TIMEOUT_S": "1.5",
            "BOCHA_API_KEY": "env-key",
            "GCITE_WEB_FRESHNESS": "month",
        }
        source = make_web_source(load_settings(environ=env))
        assert source is not None
        payload = await source.search("写字楼消防", count=2)
        await source.aclose()
    assert len(payload["data"]["webPages"]["value"]) == 2
    assert server.requests[0].path == BOCHA_PATH
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
    assert server.requests[0].json()["freshness"] == "oneMonth"


def test_bad_settings_values_are_config_errors() -> None:
    base = {"web_provider": "tavily", "tavily_api_key": "k"}
    with pytest.raises(ConfigError):
        make_web_source(Settings.from_keys(**base, web_base_url="ftp://x"))
    with pytest.raises(ConfigError):
        make_web_source(Settings.from_keys(**base, web_timeout_s=-1))
    with pytest.raises(ConfigError, match="时效"):
        make_web_source(load_settings(base, environ={"GCITE_WEB_FRESHNESS": "decade"}))


def test_offline_needs_a_folder() -> None:
    with pytest.raises(ConfigError, match="web_dir"):
        make_web_source(Settings.from_keys(web_provider="offline"))
