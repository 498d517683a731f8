"""Web search sources: the second retrieval branch of the seeds' chatflow.

Platform design document §2.2 (two parallel retrieval branches), §3.2.2
(``web_chunks``) and §4 (provider field mappings). A :class:`WebSource` returns
its provider's **raw payload**, which the merge node
(``gcite.merge.merge_chunks(rag_chunks, web_payload)``) turns into web
``UnifiedChunk`` items:

=========  ===================================  ==========================================
name       class                                payload
=========  ===================================  ==========================================
bocha      :class:`BochaWebSearch`              ``{"code":200,"data":{"webPages":{"value":[…]}}}``
tavily     :class:`TavilySearch`                ``{"query", "results":[…], …}``
baidu      :class:`BaiduSearch`                 ``{"request_id", "references":[…]}``
offline    :class:`OfflineWebSource`            Bocha's shape, from a folder of saved pages
=========  ===================================  ==========================================

Errors: :class:`~gcite.errors.SourceTimeout`,
:class:`~gcite.errors.SourceAuthError` (401/403, never retried) and
:class:`~gcite.errors.SourceUnavailable`; :class:`~gcite.errors.ConfigError`
at construction. The guide is ``docs/web-search.md``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from gcite.chatflow.seams import WebSource
from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.web.baidu import BaiduSearch
from gcite.web.bocha import BochaWebSearch
from gcite.web.http import RetryPolicy
from gcite.web.offline import OfflineWebSource
from gcite.web.tavily import TavilySearch

PROVIDERS = ("none", "offline", "bocha", "tavily", "baidu")

#: Environment variables read for each provider's key, in order, after the
#: ``Settings`` field (which itself comes from the config file or GCITE_*_API_KEY).
KEY_ENV_VARS: dict[str, tuple[str, ...]] = {
    "bocha": ("GCITE_BOCHA_API_KEY", "BOCHA_API_KEY"),
    "tavily": ("GCITE_TAVILY_API_KEY", "TAVILY_API_KEY"),
    "baidu": ("GCITE_BAIDU_API_KEY", "BAIDU_API_KEY", "QIANFAN_API_KEY"),
}

#: Environment variable for the freshness / recency filter (see each client).
FRESHNESS_ENV = "GCITE_WEB_FRESHNESS"
#: Environment variable for the offline source's index: "hybrid" (default) or "bm25".
OFFLINE_INDEX_ENV = "GCITE_WEB_OFFLINE_INDEX"


def resolve_api_key(
    provider: str, settings: Settings, environ: Mapping[str, str] | None = None
) -> str:
    """The API key of ``provider``: the Settings field, else the first set env var.

    Env vars are :data:`KEY_ENV_VARS` ``[provider]``, read from ``environ``
    (default :data:`os.environ`). Returns ``""`` when none is set.
    """
    env = os.environ if environ is None else environ
    key = str(getattr(settings, f"{provider}_api_key", "") or "").strip()
    if key:
        return key
    for name in KEY_ENV_VARS.get(provider, ()):
        value = env.get(name, "").strip()
        if value:
            return value
    return ""


def make_web_source(
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    freshness: str | None = None,
    retry: RetryPolicy | None = None,
    offline_index: str | None = None,
) -> WebSource | None:
    """The web source chosen by ``settings.web_provider``, or ``None`` for ``"none"``.

    Uses ``web_base_url`` (overrides the provider's API root), ``web_timeout_s``
    (budget of one search, seconds), ``web_dir`` (the offline folder) and the
    provider's key (:func:`resolve_api_key`). ``freshness`` defaults to the
    ``GCITE_WEB_FRESHNESS`` env var (``day``/``week``/``month``/``year`` or the
    provider's own values). For ``offline``, ``offline_index`` (default: the
    ``GCITE_WEB_OFFLINE_INDEX`` env var, else ``"hybrid"``) picks the index and
    its build starts in the background at once. Raises :class:`ConfigError` (Chinese message) for an
    unknown provider, a missing key or folder, or a bad URL / timeout /
    freshness. Nothing touches the network here.
    """
    env = os.environ if environ is None else environ
    provider = (settings.web_provider or "none").strip().lower()
    if provider not in PROVIDERS:
        raise ConfigError(
            f"未知的联网搜索提供方 web_provider={settings.web_provider!r}，"
            f"可选: {'、'.join(PROVIDERS)}"
        )
    if provider == "none":
        return None
    if provider == "offline":
        if not settings.web_dir.strip():
            raise ConfigError(
                "离线联网搜索需要保存网页的文件夹：请设置 web_dir（或环境变量 GCITE_WEB_DIR）"
            )
        index = offline_index or env.get(OFFLINE_INDEX_ENV, "") or "hybrid"
        return OfflineWebSource(settings.web_dir, settings=settings, index=index, warm_up=True)
    fresh = freshness if freshness is not None else env.get(FRESHNESS_ENV, "")
    key = resolve_api_key(provider, settings, env)
    if not key:
        names = "、".join(KEY_ENV_VARS[provider])
        raise ConfigError(
            f"联网搜索提供方 {provider} 缺少 API 密钥：请在配置文件中设置 {provider}_api_key，"
            f"或设置环境变量 {names}"
        )
    common: dict[str, Any] = {
        "base_url": settings.web_base_url,
        "timeout_s": settings.web_timeout_s,
        "freshness": fresh,
        "retry": retry,
    }
    if provider == "bocha":
        return BochaWebSearch(key, **common)
    if provider == "tavily":
        return TavilySearch(key, **common)
    return BaiduSearch(key, **common)


__all__ = [
    "FRESHNESS_ENV",
    "KEY_ENV_VARS",
    "OFFLINE_INDEX_ENV",
    "PROVIDERS",
    "BaiduSearch",
    "BochaWebSearch",
    "OfflineWebSource",
    "RetryPolicy",
    "TavilySearch",
    "WebSource",
    "make_web_source",
    "resolve_api_key",
]
