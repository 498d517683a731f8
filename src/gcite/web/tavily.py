"""Tavily search client (``POST {base}/search``).

Provider facts: ``../shared/reference/dify-protocol.md`` §6 (Tavily, as used by
Dify's official plugin). The request is ``{query, max_results, search_depth,
topic, time_range?}`` with ``Authorization: Bearer <key>`` (the current Tavily
API; the old ``api_key`` body field is not sent). The answer::

    {"query": "…", "follow_up_questions": null, "answer": null, "images": [],
     "results": [{"title", "url", "content", "score", "raw_content"?,
                  "published_date"? (news), "favicon"?}],
     "response_time": 1.2}

The platform design document §4: ``content`` stands in for ``snippet``; Tavily
has no site name, so the merge node's subtitle falls back to the URL host.
"""

from __future__ import annotations

from typing import Any

from gcite.errors import ConfigError
from gcite.web.base import HttpWebSource, pick_freshness, require_dict, truncate_list
from gcite.web.http import RetryPolicy

_TIME_RANGE: dict[str, str | None] = {
    "": None,
    "day": "day",
    "week": "week",
    "month": "month",
    "year": "year",
    "d": "day",
    "w": "week",
    "m": "month",
    "y": "year",
}
_DEPTHS = ("basic", "advanced")
_TOPICS = ("general", "news", "finance")


class TavilySearch(HttpWebSource):
    """Tavily search as a :class:`~gcite.web.WebSource` (``name = "tavily"``).

    ``api_key``: a Tavily key (``tvly-…``). ``base_url``: API root, default
    ``https://api.tavily.com``. ``timeout_s``: budget of one search, seconds.
    ``freshness``: ``""`` (no limit, default), ``"day"``, ``"week"``,
    ``"month"``, ``"year"`` (sent as ``time_range``). ``search_depth``:
    ``"basic"`` (default, as Dify's plugin) or ``"advanced"``; ``topic``:
    ``"general"`` (default), ``"news"`` or ``"finance"``. ``count`` is 1–20
    (``max_results``). Raises :class:`~gcite.errors.ConfigError` for a bad URL,
    timeout, freshness, depth or topic.
    """

    name = "tavily"
    display_name = "Tavily 搜索"
    default_base_url = "https://api.tavily.com"
    path = "/search"
    max_count = 20

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "",
        timeout_s: float = 8.0,
        freshness: str = "",
        search_depth: str = "basic",
        topic: str = "general",
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(api_key, base_url=base_url, timeout_s=timeout_s, retry=retry)
        if search_depth not in _DEPTHS:
            raise ConfigError(
                f"Tavily 搜索不支持 search_depth={search_depth!r}，可选: basic、advanced"
            )
        if topic not in _TOPICS:
            raise ConfigError(f"Tavily 搜索不支持 topic={topic!r}，可选: general、news、finance")
        self.time_range = pick_freshness(freshness, _TIME_RANGE, source=self.display_name)
        self.search_depth = search_depth
        self.topic = topic

    def build_body(self, query: str, count: int) -> dict[str, Any]:
        """``{"query", "max_results", "search_depth", "topic", "time_range"?}``."""
        body: dict[str, Any] = {
            "query": query,
            "max_results": count,
            "search_depth": self.search_depth,
            "topic": self.topic,
        }
        if self.time_range:
            body["time_range"] = self.time_range
        return body

    def empty_payload(self, query: str) -> dict[str, Any]:
        """Tavily's shape with an empty ``results``."""
        return {
            "query": query,
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": [],
            "response_time": 0.0,
        }

    def enforce(self, payload: Any, count: int) -> dict[str, Any]:
        """Cut ``results`` to ``count``; a missing ``results`` is returned as is."""
        body = require_dict(payload, source=self.display_name)
        truncate_list(body, "results", count, source=self.display_name)
        return body


__all__ = ["TavilySearch"]
