"""Each provider's real payload, fetched through its client, feeds the merge node (issue 5).

The payload a :class:`~gcite.web.WebSource` returns goes unchanged into
``gcite.merge.merge_chunks`` as ``web_chunks``; this checks what every provider
field becomes in ``chunk_metadata`` (the table in docs/web-search.md; platform
design document §3.4, §3.6, §4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gcite.merge import merge_chunks
from gcite.web import BaiduSearch, BochaWebSearch, TavilySearch
from gcite.web.base import HttpWebSource
from support.web_standin import Reply, WebStandin, sample_items, tavily_payload, web_standin

KEY = "k-merge"
QUERY = "电梯困人救援"
GUARD_S = 120.0  # hang guard only: a search is never cut short on a busy machine


@pytest.fixture(scope="module")
def server() -> Iterator[WebStandin]:
    with web_standin(api_key=KEY, results=10) as standin:
        yield standin


async def fetch(cls: type[HttpWebSource], server: WebStandin, count: int = 3) -> Any:
    source = cls(KEY, base_url=server.base_url, timeout_s=GUARD_S)
    try:
        return await source.search(QUERY, count=count)
    finally:
        await source.aclose()


def host(url: str) -> str:
    netloc = url.split("/")[2]
    return netloc[4:] if netloc.startswith("www.") else netloc


async def test_bocha_fields(server: WebStandin) -> None:
    chunks = merge_chunks([], await fetch(BochaWebSearch, server))["chunk_metadata"]
    items = sample_items(QUERY, 3)
    assert len(chunks) == 3
    for chunk, item in zip(chunks, items, strict=True):
        assert chunk["source_type"] == "web"
        assert chunk["document_title"] == item["title"]  # Bocha "name"
        assert chunk["url"] == item["url"]
        assert chunk["content"] == item["summary"]  # summary=true: the longer text wins
        assert chunk["site_name"] == item["site_name"]  # "siteName"
        assert chunk["published_date"] == item["date"]  # "datePublished", cut to YYYY-MM-DD
        assert chunk["display_subtitle"] == f"{item['site_name']} · {item['date']}"


async def test_tavily_fields(server: WebStandin) -> None:
    result = merge_chunks([], await fetch(TavilySearch, server))
    chunks, items = result["chunk_metadata"], sample_items(QUERY, 3)
    assert result["chunk_count"] == 3
    for chunk, item in zip(chunks, items, strict=True):
        assert chunk["document_title"] == item["title"]
        assert chunk["url"] == item["url"]
        assert chunk["content"] == item["snippet"]  # Tavily "content"
        assert chunk["site_name"] == ""  # Tavily has no site name ...
        assert chunk["score"] == item["score"]
        assert chunk["published_date"] == item["date"]
        # ... so the subtitle falls back to the host (seed §3.6 level 2)
        assert chunk["display_subtitle"] == f"{host(item['url'])} · {item['date']}"


async def test_baidu_fields(server: WebStandin) -> None:
    chunks = merge_chunks([], await fetch(BaiduSearch, server))["chunk_metadata"]
    items = sample_items(QUERY, 3)
    assert len(chunks) == 3
    for chunk, item in zip(chunks, items, strict=True):
        assert chunk["document_title"] == item["title"]
        assert chunk["content"] == item["summary"]  # Baidu "content"
        assert chunk["site_name"] == item["site_name"]  # "web_anchor"
        assert chunk["published_date"] == item["date"]  # "2025-08-01 12:35:55" -> date
        assert chunk["display_subtitle"] == f"{item['site_name']} · {item['date']}"
    assert [c["id"] for c in chunks] == ["1", "2", "3"]
    assert "[C:1]" in merge_chunks([], await fetch(BaiduSearch, server))["formatted_chunks"]


async def test_missing_optional_fields_still_give_a_subtitle(server: WebStandin) -> None:
    items = sample_items(QUERY, 2)
    server.script(Reply.ok(tavily_payload(QUERY, items, minimal=True)))
    chunks = merge_chunks([], await fetch(TavilySearch, server))["chunk_metadata"]
    assert [c["display_subtitle"] for c in chunks] == [host(i["url"]) for i in items]
    assert [c["published_date"] for c in chunks] == ["", ""]


async def test_empty_payload_gives_no_chunks(server: WebStandin) -> None:
    for cls in (BochaWebSearch, TavilySearch, BaiduSearch):
        source = cls(KEY, base_url=server.base_url)
        payload = await source.search("   ", count=3)
        await source.aclose()
        assert merge_chunks([], payload)["chunk_metadata"] == []
