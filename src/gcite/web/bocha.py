"""Bocha web search client (``POST {base}/v1/web-search``).

Provider facts: ``../shared/reference/dify-protocol.md`` §6 (Bocha web search,
Bing-compatible). The request is ``{query, count, freshness, summary}`` with
``Authorization: Bearer <key>``; the answer::

    {"code": 200, "log_id": "…", "msg": null,
     "data": {"_type": "SearchResponse", "queryContext": {"originalQuery": "…"},
              "webPages": {"value": [{"name", "url", "snippet", "summary",
                                      "siteName", "datePublished", …}]}}}

Bocha also reports errors in the body (``{"code": 401, "msg": "…"}``), so a
non-200 ``code`` is mapped like the HTTP status would be. The platform design
document §4 maps ``siteName`` → ``site_name`` and ``datePublished`` →
``published_date``; the merge node does that mapping.
"""

from __future__ import annotations

import re
from typing import Any

from gcite.errors import SourceAuthError, SourceUnavailable
from gcite.web.base import HttpWebSource, pick_freshness, require_dict, truncate_list
from gcite.web.http import RetryPolicy, excerpt

_FRESHNESS: dict[str, str | None] = {
    "": "noLimit",
    "day": "oneDay",
    "week": "oneWeek",
    "month": "oneMonth",
    "year": "oneYear",
    "noLimit": "noLimit",
    "oneDay": "oneDay",
    "oneWeek": "oneWeek",
    "oneMonth": "oneMonth",
    "oneYear": "oneYear",
}
_DATE_RANGE = re.compile(r"^\d{4}-\d{2}-\d{2}(\.\.\d{4}-\d{2}-\d{2})?$")


class BochaWebSearch(HttpWebSource):
    """Bocha web search as a :class:`~gcite.web.WebSource` (``name = "bocha"``).

    ``api_key``: a Bocha API key (``sk-…``). ``base_url``: API root, default
    ``https://api.bochaai.com``. ``timeout_s``: budget of one search, seconds.
    ``freshness``: ``""``/``"noLimit"`` (default), ``"day"``, ``"week"``,
    ``"month"``, ``"year"``, Bocha's own ``oneDay``… values, a date
    ``YYYY-MM-DD`` or a range ``YYYY-MM-DD..YYYY-MM-DD``. ``summary``: ask for
    the longer ``summary`` text beside ``snippet`` (default on). ``count`` is
    1–50. Raises :class:`~gcite.errors.ConfigError` for a bad URL, timeout or
    freshness.
    """

    name = "bocha"
    display_name = "博查搜索"
    default_base_url = "https://api.bochaai.com"
    path = "/v1/web-search"
    max_count = 50

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "",
        timeout_s: float = 8.0,
        freshness: str = "",
        summary: bool = True,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(api_key, base_url=base_url, timeout_s=timeout_s, retry=retry)
        if freshness and _DATE_RANGE.match(freshness.strip()):
            self.freshness = freshness.strip()
        else:
            self.freshness = pick_freshness(freshness, _FRESHNESS, source=self.display_name) or ""
        self.summary = summary

    def build_body(self, query: str, count: int) -> dict[str, Any]:
        """``{"query", "count", "freshness", "summary"}`` (dify-protocol.md §6)."""
        return {
            "query": query,
            "count": count,
            "freshness": self.freshness,
            "summary": self.summary,
        }

    def empty_payload(self, query: str) -> dict[str, Any]:
        """Bocha's shape with an empty ``data.webPages.value``."""
        return {
            "code": 200,
            "log_id": "",
            "msg": None,
            "data": {
                "_type": "SearchResponse",
                "queryContext": {"originalQuery": query},
                "webPages": {"value": []},
            },
        }

    def enforce(self, payload: Any, count: int) -> dict[str, Any]:
        """Check the body ``code`` and cut ``data.webPages.value`` to ``count``.

        A ``code`` of 401/403 raises :class:`SourceAuthError`, any other
        non-200 code :class:`SourceUnavailable`; a missing ``data`` or
        ``webPages`` (no results) is returned as is.
        """
        body = require_dict(payload, source=self.display_name)
        code = body.get("code", 200)
        if code in (401, 403, "401", "403"):
            raise SourceAuthError(
                f"{self.display_name}拒绝了 API 密钥（code {code}）: {body.get('msg')}"
            )
        if code not in (200, "200"):
            raise SourceUnavailable(
                f"{self.display_name}返回错误 code {code}: {excerpt(str(body.get('msg')).encode())}"
            )
        data = body.get("data")
        if data is None:
            return body
        data = require_dict(data, source=self.display_name)
        pages = data.get("webPages")
        if pages is None:
            return body
        pages = require_dict(pages, source=self.display_name)
        truncate_list(pages, "value", count, source=self.display_name)
        return body


__all__ = ["BochaWebSearch"]
