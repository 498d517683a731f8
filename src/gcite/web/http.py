"""Shared retrying JSON-over-HTTP transport of the web search clients.

Every web search provider (Bocha, Tavily, Baidu) is one ``POST`` of a JSON body
that answers with a JSON payload. This module owns everything those calls have
in common, so each provider module only builds its request and checks its
payload (platform design document §2.2, the web branch):

* **one time budget per call** (``timeout_s``, seconds): connect, write, read
  and every wait between retries come out of it; each attempt gets what is
  left, and the attempt is also bounded as a whole, so a server that trickles
  bytes cannot stretch it. Running out raises :class:`SourceTimeout`.
* **retries** on HTTP 408, 429 and 5xx and on network errors (connection
  refused or reset), with exponential backoff and jitter, honouring
  ``Retry-After`` (seconds or an HTTP date, capped). A wait that would not fit
  in the remaining budget is not started: the call fails at once with
  :class:`SourceUnavailable`.
* **no retry** on 401/403 (:class:`SourceAuthError`: a bad or expired key),
  on other 4xx, on an invalid JSON body, or on a body above the size cap
  (all :class:`SourceUnavailable`).

Timeouts are not retried: the budget they exhausted is the caller's (the chat
pipeline runs the web branch with its own ``web_timeout_s``).

Every httpx exception is translated here, at this one boundary; callers only
ever see :mod:`gcite.errors`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from gcite.config_checks import url_problem
from gcite.errors import ConfigError, SourceAuthError, SourceTimeout, SourceUnavailable

logger = logging.getLogger("gcite.web")

StatusClass = Literal["ok", "retry", "auth", "fail"]

#: Largest response body read, bytes. Real payloads are tens of kilobytes.
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

_USER_AGENT = "gcite-web/0.1"


@dataclass(frozen=True)
class RetryTiming:
    """How a client waits between attempts: ``sleep(seconds)`` and ``rand()`` in [0, 1)
    for the jitter (defaults :func:`asyncio.sleep`, :func:`random.random`)."""

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rand: Callable[[], float] = random.random


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a failed provider call.

    ``attempts`` counts every request, the first one included (``1`` = never
    retry). Retry ``n`` (1-based) waits ``backoff_s * 2**(n-1)`` seconds, at most
    ``backoff_max_s``, reduced by up to ``jitter`` of itself (``0`` = no jitter,
    ``1`` = "full jitter"). A server's ``Retry-After`` replaces that wait,
    capped at ``retry_after_max_s``. Raises :class:`ConfigError` on values out of
    range.
    """

    attempts: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 4.0
    retry_after_max_s: float = 10.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError(f"重试次数必须至少为 1: {self.attempts}")
        if min(self.backoff_s, self.backoff_max_s, self.retry_after_max_s) < 0:
            raise ConfigError("重试等待时间不能为负数")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"重试抖动比例必须在 0 到 1 之间: {self.jitter}")


def classify_status(status: int) -> StatusClass:
    """What a provider's HTTP status means for the call.

    ``"ok"`` for 2xx, ``"auth"`` for 401/403 (never retried), ``"retry"`` for 408,
    429 and every 5xx, ``"fail"`` for anything else (other 4xx, 1xx, 3xx: we do
    not follow redirects to a different API).
    """
    if 200 <= status < 300:
        return "ok"
    if status in (401, 403):
        return "auth"
    if status in (408, 429) or 500 <= status < 600:
        return "retry"
    return "fail"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110 §10.2.3).

    Accepts a non-negative number of seconds (``"2"``, also ``"1.5"``) or an
    HTTP date (``"Wed, 21 Oct 2015 07:28:00 GMT"``), which is measured from
    ``now`` (default: the current UTC time); a date in the past gives ``0.0``.
    Returns ``None`` for a missing, negative or unparseable value (the caller
    then falls back to its own backoff). Never raises.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds != seconds or seconds < 0 or seconds == float("inf"):
            return None
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    reference = now or datetime.now(UTC)
    return max(0.0, (when - reference).total_seconds())


def retry_delay(
    retry_number: int,
    policy: RetryPolicy,
    *,
    retry_after: float | None = None,
    rand: float = 0.0,
) -> float:
    """Seconds to wait before retry ``retry_number`` (1 = the first retry).

    With a ``retry_after`` (seconds, from :func:`parse_retry_after`) the server's
    wish wins, capped at ``policy.retry_after_max_s``. Otherwise exponential
    backoff ``backoff_s * 2**(retry_number-1)`` capped at ``backoff_max_s`` and
    reduced by ``jitter * rand`` of itself; ``rand`` is a uniform draw in
    ``[0, 1)``. Pure function.
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.retry_after_max_s)
    exponent = min(max(retry_number - 1, 0), 30)
    base = min(policy.backoff_s * (2.0**exponent), policy.backoff_max_s)
    return base * (1.0 - policy.jitter * min(max(rand, 0.0), 1.0))


def excerpt(body: bytes, limit: int = 200) -> str:
    """The start of a response body as one line of text, for error messages."""
    text = body[: limit * 4].decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def check_base_url(url: str, *, source: str) -> str:
    """``url`` without a trailing slash; :class:`ConfigError` unless it is an http(s)
    address with a host (:func:`gcite.config_checks.url_problem`, the one check of an
    address)."""
    cleaned = url.strip().rstrip("/") if isinstance(url, str) else ""
    problem = url_problem(cleaned)
    if problem is not None:
        raise ConfigError(f"{source} 的接口地址 {url!r} {problem}")
    return cleaned


@dataclass
class _Attempt:
    """Outcome of one HTTP attempt that did not end the call."""

    status: int | None
    retry_after: float | None
    reason: str


class JsonClient:
    """Posts JSON to one provider and returns the decoded JSON answer, with retries.

    ``source`` is the provider's display name used in error messages (Chinese,
    e.g. ``"博查搜索"``); ``base_url`` the API root (``http(s)://host[/prefix]``);
    ``headers`` are sent with every request (the ``Authorization`` header);
    ``timeout_s`` is the whole budget of one :meth:`post_json` call, seconds;
    ``connect_timeout_s`` caps the TCP/TLS connect of each attempt.

    ``timing`` (:class:`RetryTiming`: the sleep and the jitter's random numbers between
    attempts) exists for deterministic tests.

    Raises :class:`ConfigError` at construction for a bad URL or timeout.
    """

    def __init__(
        self,
        *,
        source: str,
        base_url: str,
        headers: Mapping[str, str],
        timeout_s: float,
        connect_timeout_s: float = 3.0,
        retry: RetryPolicy | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        timing: RetryTiming | None = None,
    ) -> None:
        if not timeout_s > 0:
            raise ConfigError(f"{source} 的超时时间必须大于 0 秒: {timeout_s}")
        self.source = source
        self.base_url = check_base_url(base_url, source=source)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.retry = retry or RetryPolicy()
        self.max_response_bytes = max_response_bytes
        self._headers = {"User-Agent": _USER_AGENT, "Accept": "application/json", **headers}
        timing = timing or RetryTiming()
        self._sleep = timing.sleep
        self._rand = timing.rand
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Future[None]] = set()

    def _http(self) -> httpx.AsyncClient:
        # Created on first use, inside the running event loop. Pooled connections
        # belong to that loop: a source reused from another loop (one asyncio.run
        # per CLI command, a test client's portal) gets a fresh pool.
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is not loop:
            stale, self._client = self._client, None
            if not (self._loop is None or self._loop.is_closed()):
                self._loop.call_soon_threadsafe(lambda: self._loop_close(stale))
        if self._client is None:
            self._client = httpx.AsyncClient(
                headers=self._headers,
                follow_redirects=False,
                trust_env=False,
            )
            self._loop = loop
        return self._client

    def _loop_close(self, client: httpx.AsyncClient) -> None:
        # Runs in the client's own loop; keep a reference so the task is not collected.
        task = asyncio.ensure_future(client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close the connection pool. Safe to call twice."""
        client, self._client = self._client, None
        if client is None:
            return
        if self._loop is asyncio.get_running_loop():
            await client.aclose()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(lambda: self._loop_close(client))

    async def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` as JSON to ``base_url + path`` and return the decoded answer.

        Returns whatever JSON the provider sent (usually a dict). Raises
        :class:`SourceTimeout` when the budget runs out, :class:`SourceAuthError`
        on 401/403 (no retry), :class:`SourceUnavailable` on anything else that
        is not a 2xx JSON answer once retries are spent.
        """
        url = self.base_url + path
        deadline = time.monotonic() + self.timeout_s
        last: _Attempt | None = None
        for attempt in range(1, self.retry.attempts + 1):
            if last is not None:
                delay = retry_delay(
                    attempt - 1, self.retry, retry_after=last.retry_after, rand=self._rand()
                )
                if time.monotonic() + delay >= deadline:
                    raise SourceUnavailable(
                        f"{self.source}暂时不可用（{last.reason}），"
                        f"等待 {delay:.1f} 秒后重试会超出 {self.timeout_s:g} 秒的时限"
                    )
                logger.info(
                    "%s: %s, retry %d in %.2fs", self.source, last.reason, attempt - 1, delay
                )
                await self._sleep(delay)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SourceTimeout(f"{self.source}在 {self.timeout_s:g} 秒内没有响应")
            outcome = await self._attempt(url, body, remaining)
            if not isinstance(outcome, _Attempt):
                return outcome.value
            last = outcome
        assert last is not None
        raise SourceUnavailable(
            f"{self.source}暂时不可用（{last.reason}），已尝试 {self.retry.attempts} 次"
        )

    async def _attempt(self, url: str, body: Mapping[str, Any], remaining: float) -> _Attempt | _Ok:
        timeout = httpx.Timeout(remaining, connect=min(self.connect_timeout_s, remaining))
        try:
            async with asyncio.timeout(remaining):
                async with self._http().stream("POST", url, json=body, timeout=timeout) as resp:
                    status = resp.status_code
                    data = await self._read(resp)
                    retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise SourceTimeout(f"{self.source}在 {self.timeout_s:g} 秒内没有响应") from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            return _Attempt(None, None, f"网络错误 {type(exc).__name__}")
        except httpx.HTTPError as exc:
            raise SourceUnavailable(f"{self.source}请求失败: {type(exc).__name__}: {exc}") from exc

        kind = classify_status(status)
        if kind == "auth":
            raise SourceAuthError(
                f"{self.source}拒绝了 API 密钥（HTTP {status}），请检查密钥配置: {excerpt(data)}"
            )
        if kind == "retry":
            return _Attempt(status, retry_after, f"HTTP {status}")
        if kind == "fail":
            raise SourceUnavailable(f"{self.source}返回 HTTP {status}: {excerpt(data)}")
        try:
            return _Ok(json.loads(data))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SourceUnavailable(
                f"{self.source}返回的内容不是有效的 JSON: {excerpt(data)}"
            ) from exc

    async def _read(self, resp: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise SourceUnavailable(
                    f"{self.source}的响应超过 {self.max_response_bytes} 字节上限，已放弃"
                )
            chunks.append(chunk)
        return b"".join(chunks)


@dataclass
class _Ok:
    value: Any


__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "JsonClient",
    "RetryPolicy",
    "RetryTiming",
    "check_base_url",
    "classify_status",
    "excerpt",
    "parse_retry_after",
    "retry_delay",
]
