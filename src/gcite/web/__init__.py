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

import importlib
from typing import TYPE_CHECKING, Any

from gcite.chatflow.seams import WebSource
from gcite.config import Settings
from gcite.errors import ConfigError
from gcite.registry import WEB_PROVIDERS, WebProvider, load

if TYPE_CHECKING:
    from gcite.knowledge.store import StoreHandles
    from gcite.web.baidu import BaiduSearch
    from gcite.web.bocha import BochaWebSearch
    from gcite.web.http import RetryPolicy
    from gcite.web.offline import OfflineWebSource
    from gcite.web.tavily import TavilySearch

_EXPORTS = {
    "BaiduSearch": "gcite.web.baidu",
    "BochaWebSearch": "gcite.web.bocha",
    "OfflineWebSource": "gcite.web.offline",
    "RetryPolicy": "gcite.web.http",
    "TavilySearch": "gcite.web.tavily",
}
"""The provider classes, imported when first named (a service without web search, or
with one provider, loads no other provider's module)."""


def make_web_source(
    settings: Settings, *, retry: RetryPolicy | None = None, handles: StoreHandles | None = None
) -> WebSource | None:
    """The web source chosen by ``settings.web.provider``, or ``None`` for ``"none"``.

    The provider is looked up in :data:`gcite.registry.WEB_PROVIDERS` and built by its
    class's ``from_settings(settings, retry=retry, handles=handles)``: the HTTP providers use
    ``settings.web`` (``base_url`` overrides the provider's API root, ``timeout_s`` is the
    budget of one search in seconds, ``freshness``) and the provider's key
    (``settings.web.api_key(name)``); ``offline`` uses ``settings.web.offline`` (the
    folder and the index, whose build starts in the background at once, embedding with
    the owner's ``handles`` (:class:`gcite.knowledge.store.StoreHandles`), so the bundled
    model is the one its knowledge store loaded). Raises
    :class:`ConfigError` (Chinese message) for an unknown provider, a missing key or
    folder, or a bad URL / timeout / freshness. Nothing touches the network here.
    """
    entry = _provider(settings)
    if entry is None:
        return None
    source: WebSource = load(entry.source).from_settings(settings, retry=retry, handles=handles)
    return source


def check_web_source(settings: Settings) -> None:
    """Raise :class:`ConfigError` (one Chinese line) where :func:`make_web_source` would,
    building nothing that runs: the chosen provider's class checks its settings
    (``check_settings(settings)``: an HTTP provider's client made without a connection,
    the offline source's folder and index way, no index built). Only the chosen provider's
    module is imported (none for ``"none"``). ``gcite serve`` calls it before it serves:
    the web source is built by the app's start-up, where an error was a traceback."""
    entry = _provider(settings)
    if entry is not None:
        load(entry.source).check_settings(settings)


def _provider(settings: Settings) -> WebProvider | None:
    """The registry entry of ``settings.web.provider`` (``None`` for ``"none"``); raises
    :class:`ConfigError` for an unknown one."""
    provider = (settings.web.provider or "none").strip().lower()
    if provider == "none":
        return None
    entry = WEB_PROVIDERS.get(provider)
    if entry is None:
        raise ConfigError(
            f"未知的联网搜索提供方 web_provider={settings.web.provider!r}，"
            f"可选: {'、'.join(('none', *WEB_PROVIDERS))}"
        )
    return entry


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module), name)


__all__ = [
    "BaiduSearch",
    "BochaWebSearch",
    "OfflineWebSource",
    "RetryPolicy",
    "TavilySearch",
    "WebSource",
    "check_web_source",
    "make_web_source",
]
