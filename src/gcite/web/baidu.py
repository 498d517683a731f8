"""Baidu search client (Qianfan ``POST {base}/v2/ai_search/web_search``).

Provider facts: ``../shared/reference/dify-protocol.md`` §6 (Baidu AI search /
Baidu search, Qianfan v2). The request::

    {"messages": [{"role": "user", "content": query}],
     "search_source": "baidu_search_v2",
     "resource_type_filter": [{"type": "web", "top_k": count}],
     "search_recency_filter": "week" | "month" | "semiyear" | "year"   (optional)}

with ``Authorization: Bearer <Qianfan v2 API key>``. The answer is
``{"request_id": "…", "references": [{"id", "url", "title", "date", "content",
"icon", "web_anchor", "type", "website", "snippet", "rerank_score",
"authority_score", …}]}``. Qianfan reports failures as ``{"code": "…",
"message": "…"}``, sometimes with HTTP 200; such a body without
``references`` is a :class:`SourceUnavailable`.

The seeds' Dify Baidu tool ignored Top-K and always returned 10 references
(platform design document, appendix A): the reference list is cut to ``count``
here.
"""

from __future__ import annotations

from typing import Any

from gcite.errors import SourceAuthError, SourceUnavailable
from gcite.web.base import HttpWebSource, pick_freshness, require_dict, truncate_list
from gcite.web.http import RetryPolicy

_RECENCY: dict[str, str | None] = {
    "": None,
    "week": "week",
    "month": "month",
    "semiyear": "semiyear",
    "year": "year",
}
_AUTH_CODES = {"InvalidAuthorization", "AccessDenied", "IamAuthFailed", "Unauthorized"}


class BaiduSearch(HttpWebSource):
    """Baidu search (Qianfan AI search, plain-search mode) as a :class:`~gcite.web.WebSource`.

    ``name = "baidu"``. ``api_key``: a Qianfan v2 API key (``bce-v3/…``).
    ``base_url``: API root, default ``https://qianfan.baidubce.com``.
    ``timeout_s``: budget of one search, seconds. ``freshness``: ``""`` (no
    limit, default), ``"week"``, ``"month"``, ``"semiyear"``, ``"year"`` (sent as
    ``search_recency_filter``; Baidu has no one-day filter). ``count`` is 1–50
    (``top_k`` of the web resource filter). Raises
    :class:`~gcite.errors.ConfigError` for a bad URL, timeout or freshness.
    """

    name = "baidu"
    display_name = "百度搜索"
    default_base_url = "https://qianfan.baidubce.com"
    path = "/v2/ai_search/web_search"
    max_count = 50

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "",
        timeout_s: float = 8.0,
        freshness: str = "",
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(api_key, base_url=base_url, timeout_s=timeout_s, retry=retry)
        self.recency = pick_freshness(freshness, _RECENCY, source=self.display_name)

    def build_body(self, query: str, count: int) -> dict[str, Any]:
        """``{"messages", "search_source", "resource_type_filter", "search_recency_filter"?}``."""
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": query}],
            "search_source": "baidu_search_v2",
            "resource_type_filter": [{"type": "web", "top_k": count}],
        }
        if self.recency:
            body["search_recency_filter"] = self.recency
        return body

    def empty_payload(self, query: str) -> dict[str, Any]:
        """Baidu's shape with an empty ``references``."""
        return {"request_id": "", "references": []}

    def enforce(self, payload: Any, count: int) -> dict[str, Any]:
        """Map an error body to an error, else cut ``references`` to ``count``."""
        body = require_dict(payload, source=self.display_name)
        code = body.get("code")
        if code and "references" not in body:
            message = str(body.get("message") or "")
            if str(code) in _AUTH_CODES or str(code) in ("401", "403"):
                raise SourceAuthError(f"{self.display_name}拒绝了 API 密钥（{code}）: {message}")
            raise SourceUnavailable(f"{self.display_name}返回错误 {code}: {message[:200]}")
        truncate_list(body, "references", count, source=self.display_name)
        return body


__all__ = ["BaiduSearch"]
