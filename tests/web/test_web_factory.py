"""make_web_source: provider choice, keys from settings or environment, clear config errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gcite.config import Settings, load_settings
from gcite.errors import ConfigError
from gcite.web import (
    BaiduSearch,
    BochaWebSearch,
    TavilySearch,
    WebSource,
    check_web_source,
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


_BAD_WEB_SETTINGS = [
    ({"web_provider": "bocha"}, "缺少 API 密钥"),
    ({"web_provider": "tavily"}, "缺少 API 密钥"),
    ({"web_provider": "baidu"}, "缺少 API 密钥"),
    ({"web_provider": "bocha", "bocha_api_key": "k", "web_base_url": "ftp://x"}, "接口地址"),
    ({"web_provider": "baidu", "baidu_api_key": "k", "web_freshness": "day"}, "时效"),
    ({"web_provider": "offline"}, "web_dir"),
    ({"web_provider": "offline", "web_dir": "/nonexistent/pages"}, "不存在"),
]


@pytest.mark.parametrize(("flags", "needle"), _BAD_WEB_SETTINGS)
def test_the_start_check_refuses_what_the_factory_refuses(
    flags: dict[str, str], needle: str
) -> None:
    """``gcite serve`` checks the web settings before it serves (the app builds its source at
    start-up): the check and the factory give the same one-line error."""
    settings = load_settings(flags, environ={})
    with pytest.raises(ConfigError, match=needle) as checked:
        check_web_source(settings)
    with pytest.raises(ConfigError) as built:
        make_web_source(settings)
    assert str(checked.value) == str(built.value) and "\n" not in str(checked.value)


def test_the_start_check_builds_no_offline_index(tmp_path: Path) -> None:
    """The offline source starts indexing its folder when it is built: the check reads the
    settings only (no index thread, nothing written to the data dir)."""
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "a.md").write_text("# 页面\n\n巡检记录。", encoding="utf-8")
    data = tmp_path / "data"
    flags = {"web_provider": "offline", "web_dir": str(pages), "data_dir": str(data)}
    before = {t.name for t in threading.enumerate()}
    check_web_source(load_settings(flags, environ={}))
    assert "gcite-web-offline" not in {t.name for t in threading.enumerate()} - before
    assert not data.exists()
    with pytest.raises(ConfigError, match="hybrid 或 bm25"):
        check_web_source(_offline_index(flags, "x"))


def _offline_index(flags: dict[str, str], index: str) -> Settings:
    settings = load_settings(flags, environ={})
    offline = dataclasses.replace(settings.web.offline, index=index)
    return dataclasses.replace(settings, web=dataclasses.replace(settings.web, offline=offline))


@pytest.mark.parametrize(
    ("provider", "loaded"),
    [("none", set()), ("bocha", {"gcite.web.bocha"}), ("offline", {"gcite.web.offline"})],
)
def test_the_start_check_imports_only_the_chosen_provider(
    provider: str, loaded: set[str], tmp_path: Path
) -> None:
    script = (
        "import sys; from gcite.config import load_settings; from gcite.web import "
        "check_web_source\n"
        f"check_web_source(load_settings({{'web_provider': {provider!r}, "
        f"'bocha_api_key': 'k', 'web_dir': {str(tmp_path)!r}}}, environ={{}}))\n"
        "print(' '.join(sorted(m for m in sys.modules if m in {"
        "'gcite.web.bocha', 'gcite.web.tavily', 'gcite.web.baidu', 'gcite.web.offline'})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert set(done.stdout.split()) == loaded, done.stderr
