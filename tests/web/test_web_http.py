"""The shared retrying transport's pure rules (Retry-After, backoff, status classes) and limits."""

from __future__ import annotations

import asyncio
import email.utils
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gcite.errors import ConfigError, SourceUnavailable
from gcite.web.http import (
    JsonClient,
    RetryPolicy,
    RetryTiming,
    check_base_url,
    classify_status,
    excerpt,
    parse_retry_after,
    retry_delay,
)
from support.web_standin import Reply, web_standin

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
GUARD_S = 120.0  # hang guard only: a request is never cut short on a busy machine


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("Sun, 29 Nov 2026 12:00:07 GMT", 7.0),
        ("Sun, 29 Nov 2026 11:00:00 GMT", 0.0),  # in the past: retry now
        ("Sunday, 29-Nov-26 12:00:30 GMT", 30.0),  # obsolete RFC 850 form
    ],
)
def test_parse_retry_after(value: str, seconds: float) -> None:
    assert parse_retry_after(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [None, "", "-1", "soon", "nan", "inf", "Sun, 99 Foo"])
def test_parse_retry_after_rejects_garbage(value: str | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_parse_retry_after_date_round_trip() -> None:
    later = NOW + timedelta(seconds=42)
    assert parse_retry_after(email.utils.format_datetime(later, usegmt=True), now=NOW) == 42.0


@given(st.text(max_size=60))
def test_parse_retry_after_never_raises(value: str) -> None:
    result = parse_retry_after(value, now=NOW)
    assert result is None or result >= 0


@given(
    retry=st.integers(min_value=1, max_value=10_000),
    rand=st.floats(min_value=0, max_value=1),
    jitter=st.floats(min_value=0, max_value=1),
)
def test_backoff_stays_within_its_bounds(retry: int, rand: float, jitter: float) -> None:
    policy = RetryPolicy(backoff_s=0.5, backoff_max_s=4.0, jitter=jitter)
    delay = retry_delay(retry, policy, rand=rand)
    ceiling = min(0.5 * 2 ** min(retry - 1, 30), 4.0)
    assert ceiling * (1 - jitter) - 1e-9 <= delay <= ceiling


def test_backoff_doubles_without_jitter() -> None:
    policy = RetryPolicy(backoff_s=0.25, backoff_max_s=1.0, jitter=0)
    assert [retry_delay(n, policy) for n in (1, 2, 3, 4)] == [0.25, 0.5, 1.0, 1.0]


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(backoff_s=0.5, retry_after_max_s=10.0)
    assert retry_delay(1, policy, retry_after=2.0, rand=0.9) == 2.0
    assert retry_delay(1, policy, retry_after=3600.0) == 10.0


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        *[(200, "ok"), (204, "ok"), (401, "auth"), (403, "auth")],
        *[(408, "retry"), (429, "retry"), (500, "retry"), (502, "retry"), (599, "retry")],
        *[(400, "fail"), (404, "fail"), (302, "fail"), (101, "fail")],
    ],
)
def test_classify_status(status: int, kind: str) -> None:
    assert classify_status(status) == kind


@pytest.mark.parametrize(
    "kwargs", [{"attempts": 0}, {"backoff_s": -1}, {"jitter": 1.5}, {"retry_after_max_s": -2}]
)
def test_bad_retry_policy(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_check_base_url() -> None:
    assert check_base_url(" https://api.example.com/v2/ ", source="x") == (
        "https://api.example.com/v2"
    )
    with pytest.raises(ConfigError, match="http"):
        check_base_url("file:///etc/passwd", source="x")


def test_excerpt_is_one_short_line() -> None:
    text = excerpt(("错误\n" * 500).encode() + b"\xff")
    assert "\n" not in text
    assert len(text) <= 201


async def test_response_above_the_size_cap_is_refused() -> None:
    with web_standin(api_key=None) as server:
        server.script(Reply.raw(b'{"results": "' + b"x" * 5000 + b'"}'))
        client = JsonClient(
            source="测试",
            base_url=server.base_url,
            headers={},
            timeout_s=GUARD_S,
            max_response_bytes=1000,
        )
        with pytest.raises(SourceUnavailable, match="1000 字节"):
            await client.post_json("/search", {"query": "q"})
        server.script(Reply.raw(b'{"results": []}'))
        assert await client.post_json("/search", {"query": "q"}) == {"results": []}
        await client.aclose()


async def test_utf8_garbage_is_invalid_json() -> None:
    with web_standin(api_key=None) as server:
        server.script(Reply.raw(b"\xff\xfe{}"))
        client = JsonClient(source="测试", base_url=server.base_url, headers={}, timeout_s=GUARD_S)
        with pytest.raises(SourceUnavailable, match="JSON"):
            await client.post_json("/search", {"query": "q"})
        await client.aclose()


def test_one_source_across_event_loops() -> None:
    # The CLI runs one asyncio.run per command; pooled connections must not leak across.
    from gcite.web import TavilySearch

    with web_standin(api_key="k") as server:
        source = TavilySearch("k", base_url=server.base_url, timeout_s=GUARD_S)
        first = asyncio.run(source.search("巡检", count=1))
        second = asyncio.run(source.search("消防", count=2))
        asyncio.run(source.aclose())
    assert [len(first["results"]), len(second["results"])] == [1, 2]
    assert [r.json()["query"] for r in server.requests] == ["巡检", "消防"]


async def test_waits_follow_retry_after_and_backoff() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(attempts=4, backoff_s=0.1, backoff_max_s=1.0, retry_after_max_s=3.0)
    with web_standin(api_key=None) as server:
        server.script(
            Reply.error(429, retry_after="2"),  # the server's wish
            Reply.error(503, retry_after="120"),  # capped at retry_after_max_s
            Reply.error(502),  # no header: backoff 0.1 * 2**2 with half jitter
            Reply.raw(b'{"results": []}'),
        )
        client = JsonClient(
            source="测试",
            base_url=server.base_url,
            headers={},
            timeout_s=30.0,
            retry=policy,
            timing=RetryTiming(sleep=record, rand=lambda: 0.5),
        )
        assert await client.post_json("/search", {"query": "q"}) == {"results": []}
        await client.aclose()
    assert waits == [2.0, 3.0, pytest.approx(0.4 * (1 - 0.5 * 0.5))]
    assert len(server.requests) == 4
