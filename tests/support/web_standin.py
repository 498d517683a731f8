"""A real HTTP server on 127.0.0.1 that impersonates the Bocha, Tavily and Baidu search APIs.

It serves the three endpoints of ``gcite.web`` (dify-protocol.md §6) on one
port, with realistic payloads, and can be scripted per request. Use it
anywhere a test needs "a web search provider", including a broken one::

    from support.web_standin import Reply, web_standin

    with web_standin(api_key="k") as server:          # starts, yields, stops
        settings = Settings.from_keys(web_provider="bocha", bocha_api_key="k",
                            web_base_url=server.base_url, web_timeout_s=0.5)
        server.script(Reply.error(429, retry_after="0"), Reply.auto())
        ...                                           # first call 429, then normal
        server.default = Reply.hang()                 # every later call times out
        assert server.requests[0].json()["query"] == "…"

API
---
``web_standin(*, api_key="test-key", results=10, honour_count=False)``
    Context manager yielding a :class:`WebStandin`. ``api_key``: the Bearer key
    the server accepts (others get a provider-style 401); ``None`` accepts any.
    ``results``: how many results a normal answer holds. ``honour_count``:
    when ``False`` (default) the server ignores the requested count, as the
    seeds' Baidu tool did, so clients must truncate on their side.
``WebStandin.base_url``
    ``http://127.0.0.1:<port>``; pass it as ``web_base_url``.
``WebStandin.script(*replies)``
    Queue replies for the next requests, in order; when the queue is empty the
    server answers with ``WebStandin.default`` (initially :meth:`Reply.auto`).
``WebStandin.default``
    A :class:`Reply` or a callable ``(Request) -> Reply``.
``WebStandin.requests``
    Every :class:`Request` received (method, path, lower-cased headers, raw body);
    ``WebStandin.count(path=None)`` counts them.
``WebStandin.reset()``
    Forget requests and queued replies, and answer normally again.
:class:`Reply` constructors
    ``auto()`` (the realistic answer for the endpoint hit), ``ok(payload)``,
    ``error(status, body=None, retry_after=None)``, ``hang(seconds=30)`` (answer
    nothing for that long, or until the server stops), ``invalid_json()``,
    ``drop()`` (close the connection without answering), ``raw(body, status)``.
Payload builders
    ``sample_items(query, n)``, ``bocha_payload``, ``tavily_payload``,
    ``baidu_payload`` (``minimal=True`` leaves out every optional field).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BOCHA_PATH = "/v1/web-search"
TAVILY_PATH = "/search"
BAIDU_PATH = "/v2/ai_search/web_search"

_SITES = [
    ("知乎", "www.zhihu.com", "https://www.zhihu.com/question/{n}/answer/{m}"),
    ("百度百科", "baike.baidu.com", "https://baike.baidu.com/item/{n}"),
    ("中国政府网", "www.gov.cn", "https://www.gov.cn/zhengce/{n}.htm"),
    ("CSDN", "blog.csdn.net", "https://blog.csdn.net/u{m}/article/details/{n}"),
    ("搜狐网", "www.sohu.com", "https://www.sohu.com/a/{n}_{m}"),
]


@dataclass(frozen=True)
class Request:
    """One request the stand-in received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON (raises ``ValueError`` if it is not)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """What the stand-in answers to one request (build it with the class methods)."""

    status: int = 200
    payload: Any = None
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    hang_s: float = 0.0
    auto_payload: bool = False
    close: bool = False

    @classmethod
    def auto(cls) -> Reply:
        """The endpoint's realistic answer (built from the request's query and count)."""
        return cls(auto_payload=True)

    @classmethod
    def ok(cls, payload: Any) -> Reply:
        """HTTP 200 with ``payload`` as JSON."""
        return cls(payload=payload)

    @classmethod
    def error(cls, status: int, body: Any = None, *, retry_after: str | None = None) -> Reply:
        """HTTP ``status`` with a JSON error body (a provider-like one by default)."""
        headers = (("Retry-After", retry_after),) if retry_after is not None else ()
        payload = body if body is not None else {"code": status, "msg": f"error {status}"}
        return cls(status=status, payload=payload, headers=headers)

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Reply:
        """Say nothing for ``seconds`` (or until the server stops), then a normal answer."""
        return cls(hang_s=seconds, auto_payload=True)

    @classmethod
    def invalid_json(cls) -> Reply:
        """HTTP 200, ``Content-Type: application/json``, a body that is not JSON."""
        return cls(body=b'{"code": 200, "data": {"webPages": <html>oops</html>')

    @classmethod
    def raw(cls, body: bytes, status: int = 200) -> Reply:
        """HTTP ``status`` with exactly ``body``."""
        return cls(status=status, body=body)

    @classmethod
    def drop(cls) -> Reply:
        """Close the connection without sending a response."""
        return cls(close=True)


Handler = Reply | Callable[[Request], Reply]


def sample_items(query: str, n: int) -> list[dict[str, Any]]:
    """``n`` realistic results about ``query``: title, url, site_name, host, text, date, score."""
    items = []
    for i in range(n):
        site, host, pattern = _SITES[i % len(_SITES)]
        url = pattern.format(n=1000 + i, m=77 + i)
        items.append(
            {
                "title": f"{query}（第{i + 1}篇） - {site}",
                "url": url,
                "site_name": site,
                "host": host,
                "snippet": f"关于“{query}”的说明第{i + 1}条：物业巡检分为日常、专项和应急巡检。",
                "summary": f"关于“{query}”的详细说明第{i + 1}条。"
                + "巡检记录应包括时间、点位和处理结果。" * 3,
                "date": f"2025-08-{(i % 28) + 1:02d}",
                "score": round(0.95 - i * 0.05, 4),
            }
        )
    return items


def bocha_payload(
    query: str, items: list[dict[str, Any]], *, minimal: bool = False
) -> dict[str, Any]:
    """Bocha's ``/v1/web-search`` answer (dify-protocol.md §6); ``minimal``: no optional fields."""
    values = []
    for item in items:
        if minimal:
            values.append({"name": item["title"], "url": item["url"], "snippet": item["snippet"]})
            continue
        values.append(
            {
                "id": None,
                "name": item["title"],
                "url": item["url"],
                "displayUrl": item["url"],
                "snippet": item["snippet"],
                "summary": item["summary"],
                "siteName": item["site_name"],
                "siteIcon": f"https://th.bochaai.com/favicon?domain_url={item['host']}",
                "datePublished": f"{item['date']}T17:54:38+08:00",
                "dateLastCrawled": f"{item['date']}T17:54:38Z",
                "cachedPageUrl": None,
                "language": None,
                "isFamilyFriendly": None,
                "isNavigational": None,
            }
        )
    return {
        "code": 200,
        "log_id": "d718a1c0e5b94b1e",
        "msg": None,
        "data": {
            "_type": "SearchResponse",
            "queryContext": {"originalQuery": query},
            "webPages": {
                "webSearchUrl": "",
                "totalEstimatedMatches": 8912791,
                "someResultsRemoved": True,
                "value": values,
            },
            "images": {"value": []},
            "videos": None,
        },
    }


def tavily_payload(
    query: str, items: list[dict[str, Any]], *, minimal: bool = False
) -> dict[str, Any]:
    """Tavily's ``/search`` answer (dify-protocol.md §6); ``minimal`` drops optional fields."""
    results = []
    for item in items:
        result: dict[str, Any] = {
            "title": item["title"],
            "url": item["url"],
            "content": item["snippet"],
        }
        if not minimal:
            result.update(
                score=item["score"],
                raw_content=None,
                published_date=item["date"],
                favicon=f"https://{item['host']}/favicon.ico",
            )
        results.append(result)
    payload: dict[str, Any] = {"query": query, "results": results}
    if not minimal:
        payload.update(follow_up_questions=None, answer=None, images=[], response_time=1.27)
    return payload


def baidu_payload(items: list[dict[str, Any]], *, minimal: bool = False) -> dict[str, Any]:
    """Qianfan's ``/v2/ai_search/web_search`` answer (dify-protocol.md §6)."""
    references = []
    for i, item in enumerate(items, start=1):
        ref: dict[str, Any] = {
            "id": i,
            "url": item["url"],
            "title": item["title"],
            "content": item["summary"],
        }
        if not minimal:
            ref.update(
                date=f"{item['date']} 12:35:55",
                icon=f"https://{item['host']}/favicon.ico",
                web_anchor=item["site_name"],
                type="web",
                website=item["host"],
                video=None,
                image=None,
                is_aladdin=False,
                aladdin=None,
                snippet=item["snippet"],
                web_extensions=None,
                rerank_score=item["score"],
                authority_score=round(item["score"] - 0.01, 4),
            )
        references.append(ref)
    return {"request_id": "4f1f0c7e-9b1a-4c55-8f1e-3d7f6a2b9c10", "references": references}


def _requested(request: Request) -> tuple[str, int | None]:
    """(query, count) asked for in a provider request; ("", None) when unreadable."""
    try:
        body = request.json()
    except ValueError:
        return "", None
    if not isinstance(body, dict):
        return "", None
    if request.path == BAIDU_PATH:
        messages = body.get("messages") or [{}]
        query = str(messages[-1].get("content", "")) if isinstance(messages[-1], dict) else ""
        filters = body.get("resource_type_filter") or [{}]
        count = filters[0].get("top_k") if isinstance(filters[0], dict) else None
        return query, count if isinstance(count, int) else None
    count = body.get("max_results") if request.path == TAVILY_PATH else body.get("count")
    return str(body.get("query", "")), count if isinstance(count, int) else None


@dataclass
class WebStandin:
    """The running stand-in. See the module docstring for the API."""

    base_url: str
    api_key: str | None = "test-key"
    results: int = 10
    honour_count: bool = False
    default: Handler = field(default_factory=Reply.auto)
    requests: list[Request] = field(default_factory=list)
    _queue: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        """Queue ``replies`` for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        """Forget requests and queued replies; answer normally again (``default = auto()``)."""
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self.default = Reply.auto()

    def count(self, path: str | None = None) -> int:
        """How many requests arrived (to ``path`` only, when given)."""
        with self._lock:
            return sum(1 for r in self.requests if path is None or r.path == path)

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        return self.default(request) if callable(self.default) else self.default

    def _auto(self, request: Request) -> tuple[int, Any]:
        if request.path not in (BOCHA_PATH, TAVILY_PATH, BAIDU_PATH):
            return 404, {"error": f"no route {request.path}"}
        if (
            self.api_key is not None
            and request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            if request.path == BAIDU_PATH:
                return 401, {"requestId": "x", "code": "InvalidAuthorization", "message": "bad key"}
            if request.path == TAVILY_PATH:
                return 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
            return 401, {"code": 401, "msg": "Invalid API KEY", "log_id": "x"}
        query, count = _requested(request)
        n = self.results if not self.honour_count or count is None else min(count, self.results)
        items = sample_items(query, n)
        if request.path == BOCHA_PATH:
            return 200, bocha_payload(query, items)
        if request.path == TAVILY_PATH:
            return 200, tavily_payload(query, items)
        return 200, baidu_payload(items)


def _handler_class(standin: WebStandin) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm
            # and the client's delayed ACK add ~40 ms to every answer.
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            reply = standin._next(request)
            if reply.close:
                self.close_connection = True
                return
            if reply.hang_s and standin.stopping.wait(reply.hang_s):
                self.close_connection = True
                return
            status = reply.status
            if reply.body is not None:
                data = reply.body
            elif reply.auto_payload:
                status, payload = standin._auto(request)
                data = json.dumps(payload, ensure_ascii=False).encode()
            else:
                data = json.dumps(reply.payload, ensure_ascii=False).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout test)
                self.close_connection = True

        do_POST = _serve
        do_GET = _serve

    return _Handler


@contextmanager
def web_standin(
    *, api_key: str | None = "test-key", results: int = 10, honour_count: bool = False
) -> Iterator[WebStandin]:
    """Start the stand-in on a free port of 127.0.0.1, yield it, stop it (hangs released)."""
    standin = WebStandin(base_url="", api_key=api_key, results=results, honour_count=honour_count)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(standin))
    server.daemon_threads = True
    server.block_on_close = False
    port = server.server_address[1]
    standin.base_url = f"http://127.0.0.1:{port}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield standin
    finally:
        standin.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class PayloadWeb:
    """An in-process web source (the chatflow's ``WebSource`` seam, no HTTP): Bocha's
    payload for any query, after ``delay`` seconds, or ``fail`` raised instead."""

    name = "bocha"

    def __init__(self, *, fail: Exception | None = None, delay: float = 0.0) -> None:
        self.fail = fail
        self.delay = delay

    async def search(self, query: str, *, count: int) -> Any:
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return bocha_payload(query, sample_items(query, count))

    async def aclose(self) -> None:
        return None


__all__ = [
    "BAIDU_PATH",
    "BOCHA_PATH",
    "TAVILY_PATH",
    "PayloadWeb",
    "Reply",
    "Request",
    "WebStandin",
    "baidu_payload",
    "bocha_payload",
    "sample_items",
    "tavily_payload",
    "web_standin",
]
