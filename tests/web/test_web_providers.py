"""Contract tests of every HTTP web source against the local stand-in server (issue 5, item 3).

Each provider is exercised the same way (haystack style: one contract, every
implementation): the request it sends, success with the count enforced, empty
results, missing optional fields, 429 then success, 5xx until retries run out,
a hang past the timeout, invalid JSON, a bad key. Provider-specific rules
follow the contract.
"""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gcite.errors import ConfigError, SourceAuthError, SourceTimeout, SourceUnavailable
from gcite.web import BaiduSearch, BochaWebSearch, TavilySearch, WebSource
from gcite.web.base import MAX_QUERY_CHARS, HttpWebSource
from gcite.web.http import RetryPolicy
from support.web_standin import (
    BAIDU_PATH,
    BOCHA_PATH,
    TAVILY_PATH,
    Reply,
    WebStandin,
    baidu_payload,
    bocha_payload,
    sample_items,
    tavily_payload,
    web_standin,
)

KEY = "sk-test-0123"
FAST_RETRY = RetryPolicy(attempts=3, backoff_s=0.01, backoff_max_s=0.02, retry_after_max_s=0.05)
GUARD_S = 120.0  # a test that takes longer than this has hung: fail instead of blocking the suite


@dataclass(frozen=True)
class Case:
    """One provider: its class, endpoint, payload builder and result-list accessor."""

    cls: type[HttpWebSource]
    path: str
    payload: Callable[..., dict[str, Any]]
    results: Callable[[Any], list[dict[str, Any]]]
    expected_body: Callable[[str, int], dict[str, Any]]


def _bocha_results(payload: Any) -> list[dict[str, Any]]:
    return list(payload["data"]["webPages"]["value"])


CASES = {
    "bocha": Case(
        BochaWebSearch,
        BOCHA_PATH,
        lambda q, items, **kw: bocha_payload(q, items, **kw),
        _bocha_results,
        lambda q, n: {"query": q, "count": n, "freshness": "noLimit", "summary": True},
    ),
    "tavily": Case(
        TavilySearch,
        TAVILY_PATH,
        lambda q, items, **kw: tavily_payload(q, items, **kw),
        lambda p: list(p["results"]),
        lambda q, n: {
            "query": q,
            "max_results": n,
            "search_depth": "basic",
            "topic": "general",
        },
    ),
    "baidu": Case(
        BaiduSearch,
        BAIDU_PATH,
        lambda q, items, **kw: baidu_payload(items, **kw),
        lambda p: list(p["references"]),
        lambda q, n: {
            "messages": [{"role": "user", "content": q}],
            "search_source": "baidu_search_v2",
            "resource_type_filter": [{"type": "web", "top_k": n}],
        },
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[WebStandin]:
    with web_standin(api_key=KEY, results=10) as standin:
        yield standin


@pytest.fixture
def standin(server: WebStandin) -> WebStandin:
    """The module's stand-in, reset to its normal behaviour and an empty request log."""
    server.reset()
    return server


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


def make(case: Case, standin: WebStandin, *, key: str = KEY, timeout_s: float = GUARD_S) -> Any:
    return case.cls(key, base_url=standin.base_url, timeout_s=timeout_s, retry=FAST_RETRY)


async def search(source: Any, query: str = "物业巡检流程", count: int = 3) -> Any:
    try:
        return await asyncio.wait_for(source.search(query, count=count), GUARD_S)
    finally:
        await source.aclose()


# --- the contract -------------------------------------------------------------


async def test_is_a_web_source(case: Case, standin: WebStandin) -> None:
    source = make(case, standin)
    assert isinstance(source, WebSource)
    assert source.name == case.cls.name
    await source.aclose()
    await source.aclose()  # twice is fine


async def test_sends_the_provider_request(case: Case, standin: WebStandin) -> None:
    await search(make(case, standin), "  物业  巡检\n流程 ", count=4)
    assert len(standin.requests) == 1
    sent = standin.requests[0]
    assert sent.method == "POST"
    assert sent.path == case.path
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.json() == case.expected_body("物业 巡检 流程", 4)


async def test_success_enforces_the_count(case: Case, standin: WebStandin) -> None:
    # The stand-in ignores the requested count (as the seeds' Baidu tool did) and sends 10.
    payload = await search(make(case, standin), "物业巡检流程", count=3)
    results = case.results(payload)
    assert [r["url"] for r in results] == [i["url"] for i in sample_items("物业巡检流程", 3)]
    assert all("物业巡检流程" in r.get("title", r.get("name", "")) for r in results)


async def test_count_above_the_provider_maximum_is_lowered(case: Case, standin: WebStandin) -> None:
    await search(make(case, standin), count=500)
    body = standin.requests[0].json()
    sent = case.expected_body("x", case.cls.max_count)
    for key in ("count", "max_results", "resource_type_filter"):
        if key in sent:
            assert body[key] == sent[key]


async def test_empty_results(case: Case, standin: WebStandin) -> None:
    standin.script(Reply.ok(case.payload("无结果", [])))
    payload = await search(make(case, standin), "无结果")
    assert case.results(payload) == []


async def test_missing_optional_fields_pass_through(case: Case, standin: WebStandin) -> None:
    items = sample_items("消防", 5)
    standin.script(Reply.ok(case.payload("消防", items, minimal=True)))
    payload = await search(make(case, standin), "消防", count=2)
    results = case.results(payload)
    assert [r["url"] for r in results] == [i["url"] for i in items[:2]]
    assert not any(k in r for r in results for k in ("siteName", "published_date", "date"))


async def test_blank_query_or_zero_count_sends_nothing(case: Case, standin: WebStandin) -> None:
    assert case.results(await search(make(case, standin), " \n\t ", count=5)) == []
    assert case.results(await search(make(case, standin), "消防", count=0)) == []
    assert standin.requests == []


async def test_huge_query_is_cut(case: Case, standin: WebStandin) -> None:
    await search(make(case, standin), "巡检" * 5000, count=1)
    body = standin.requests[0].json()
    query = body["messages"][0]["content"] if "messages" in body else body["query"]
    assert query == ("巡检" * 5000)[:MAX_QUERY_CHARS]


async def test_wrong_argument_types_are_rejected(case: Case, standin: WebStandin) -> None:
    source = make(case, standin)
    with pytest.raises(TypeError):
        await source.search(None, count=3)
    with pytest.raises(TypeError):
        await source.search("消防", count="3")
    await source.aclose()
    assert standin.requests == []


async def test_429_with_retry_after_then_success(case: Case, standin: WebStandin) -> None:
    standin.script(Reply.error(429, retry_after="0"))
    payload = await search(make(case, standin), count=2)
    assert len(case.results(payload)) == 2
    assert len(standin.requests) == 2


async def test_429_with_an_http_date_retry_after(case: Case, standin: WebStandin) -> None:
    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=1), usegmt=True)
    standin.script(Reply.error(429, retry_after=soon), Reply.error(503))
    payload = await search(make(case, standin), count=2)
    assert len(case.results(payload)) == 2
    assert len(standin.requests) == 3


async def test_5xx_until_retries_run_out(case: Case, standin: WebStandin) -> None:
    standin.default = Reply.error(500)
    with pytest.raises(SourceUnavailable, match="HTTP 500"):
        await search(make(case, standin))
    assert len(standin.requests) == FAST_RETRY.attempts


async def test_retry_after_beyond_the_budget_fails_at_once(case: Case, standin: WebStandin) -> None:
    standin.default = Reply.error(503, retry_after="3600")
    source = case.cls(
        KEY,
        base_url=standin.base_url,
        timeout_s=GUARD_S,
        retry=RetryPolicy(attempts=5, retry_after_max_s=7200),  # the wish (1 h) passes the budget
    )
    with pytest.raises(SourceUnavailable, match="HTTP 503"):
        await search(source)
    assert len(standin.requests) == 1


async def test_hang_past_the_timeout(case: Case, standin: WebStandin) -> None:
    standin.default = Reply.hang(60)
    with pytest.raises(SourceTimeout):
        await search(make(case, standin, timeout_s=0.3))
    # timeouts spend the budget: not retried (on a loaded machine the 0.3 s may end even
    # before the request arrives)
    assert len(standin.requests) <= 1


async def test_invalid_json(case: Case, standin: WebStandin) -> None:
    standin.script(Reply.invalid_json())
    with pytest.raises(SourceUnavailable, match="JSON"):
        await search(make(case, standin))
    assert len(standin.requests) == 1


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"null"])
async def test_json_that_is_not_an_object(case: Case, standin: WebStandin, body: bytes) -> None:
    standin.script(Reply.raw(body))
    with pytest.raises(SourceUnavailable):
        await search(make(case, standin))


async def test_result_list_of_the_wrong_type(case: Case, standin: WebStandin) -> None:
    payload = case.payload("x", sample_items("x", 1))
    if case.cls is BochaWebSearch:
        payload["data"]["webPages"]["value"] = {"oops": 1}
    else:
        payload["results" if case.cls is TavilySearch else "references"] = "oops"
    standin.script(Reply.ok(payload))
    with pytest.raises(SourceUnavailable, match="不是列表"):
        await search(make(case, standin))


async def test_bad_key_is_not_retried(case: Case, standin: WebStandin) -> None:
    with pytest.raises(SourceAuthError, match="401"):
        await search(make(case, standin, key="sk-wrong"))
    assert len(standin.requests) == 1


async def test_403_is_an_auth_error(case: Case, standin: WebStandin) -> None:
    standin.default = Reply.error(403)
    with pytest.raises(SourceAuthError, match="403"):
        await search(make(case, standin))
    assert len(standin.requests) == 1


async def test_other_4xx_is_not_retried(case: Case, standin: WebStandin) -> None:
    standin.script(Reply.error(400, {"code": 400, "msg": "query too long"}))
    with pytest.raises(SourceUnavailable, match="query too long"):
        await search(make(case, standin))
    assert len(standin.requests) == 1


async def test_dropped_connection_is_retried(case: Case, standin: WebStandin) -> None:
    standin.script(Reply.drop())
    payload = await search(make(case, standin), count=1)
    assert len(case.results(payload)) == 1
    assert len(standin.requests) == 2


async def test_nothing_listening(case: Case) -> None:
    with web_standin() as gone:
        url = gone.base_url
    source = case.cls(KEY, base_url=url, timeout_s=GUARD_S, retry=FAST_RETRY)
    with pytest.raises(SourceUnavailable, match="已尝试 3 次"):
        await search(source)


@pytest.mark.parametrize("url", ["", "ftp://example.com", "not a url", "http://"])
def test_bad_base_url_is_a_config_error(case: Case, url: str) -> None:
    if not url:
        assert case.cls(KEY, base_url=url).base_url == case.cls.default_base_url
        return
    with pytest.raises(ConfigError):
        case.cls(KEY, base_url=url)


@pytest.mark.parametrize("key", ["", "   ", "sk-abc\ndef", "sk abc"])
def test_bad_key_is_a_config_error(case: Case, key: str) -> None:
    with pytest.raises(ConfigError, match="API 密钥"):
        case.cls(key)


async def test_key_is_stripped(case: Case, standin: WebStandin) -> None:
    await search(case.cls(f"  {KEY}\n", base_url=standin.base_url, timeout_s=GUARD_S))
    assert standin.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_bad_timeout_is_a_config_error(case: Case) -> None:
    with pytest.raises(ConfigError, match="超时"):
        case.cls(KEY, timeout_s=0)


# --- provider-specific rules ----------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "sent"),
    [
        ("", "noLimit"),
        ("week", "oneWeek"),
        ("oneYear", "oneYear"),
        ("2025-01-01..2025-06-30", None),
    ],
)
async def test_bocha_freshness(standin: WebStandin, freshness: str, sent: str | None) -> None:
    source = BochaWebSearch(KEY, base_url=standin.base_url, freshness=freshness)
    await search(source, count=1)
    assert standin.requests[0].json()["freshness"] == (sent or freshness)


async def test_bocha_error_code_in_a_200_body(standin: WebStandin) -> None:
    standin.script(Reply.ok({"code": 401, "msg": "Invalid API KEY", "data": None}))
    with pytest.raises(SourceAuthError):
        await search(BochaWebSearch(KEY, base_url=standin.base_url))
    standin.script(Reply.ok({"code": 500, "msg": "internal", "data": None}))
    with pytest.raises(SourceUnavailable, match="500"):
        await search(BochaWebSearch(KEY, base_url=standin.base_url))


async def test_bocha_without_web_pages_is_no_results(standin: WebStandin) -> None:
    standin.script(Reply.ok({"code": 200, "msg": None, "data": {"_type": "SearchResponse"}}))
    payload = await search(BochaWebSearch(KEY, base_url=standin.base_url))
    assert payload["data"] == {"_type": "SearchResponse"}


@pytest.mark.parametrize(("freshness", "sent"), [("", None), ("day", "day"), ("m", "month")])
async def test_tavily_time_range(standin: WebStandin, freshness: str, sent: str | None) -> None:
    source = TavilySearch(KEY, base_url=standin.base_url, freshness=freshness, topic="news")
    await search(source, count=1)
    body = standin.requests[0].json()
    assert body.get("time_range") == sent
    assert body["topic"] == "news"


def test_tavily_rejects_unknown_options() -> None:
    with pytest.raises(ConfigError, match="search_depth"):
        TavilySearch(KEY, search_depth="deep")
    with pytest.raises(ConfigError, match="topic"):
        TavilySearch(KEY, topic="sports")


@pytest.mark.parametrize(("freshness", "sent"), [("", None), ("semiyear", "semiyear")])
async def test_baidu_recency(standin: WebStandin, freshness: str, sent: str | None) -> None:
    await search(BaiduSearch(KEY, base_url=standin.base_url, freshness=freshness), count=1)
    assert standin.requests[0].json().get("search_recency_filter") == sent


def test_unsupported_freshness_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="百度搜索不支持时效参数"):
        BaiduSearch(KEY, freshness="day")
    with pytest.raises(ConfigError, match="博查搜索不支持时效参数"):
        BochaWebSearch(KEY, freshness="fortnight")


async def test_baidu_error_body(standin: WebStandin) -> None:
    standin.script(Reply.ok({"requestId": "r", "code": "InvalidAuthorization", "message": "x"}))
    with pytest.raises(SourceAuthError):
        await search(BaiduSearch(KEY, base_url=standin.base_url))
    standin.script(Reply.ok({"requestId": "r", "code": "ServerHighLoad", "message": "busy"}))
    with pytest.raises(SourceUnavailable, match="ServerHighLoad"):
        await search(BaiduSearch(KEY, base_url=standin.base_url))
