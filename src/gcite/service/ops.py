"""Per-request operations: a request id, a body-read deadline and one structured log line.

:class:`OpsMiddleware` wraps the whole ASGI app:

* **Request id**: the caller's ``X-Request-Id`` when it is a short token
  (``[A-Za-z0-9._-]{1,64}``), else a new one; echoed in the response's ``X-Request-Id``.
* **Body-read deadline**: a request body must arrive within ``body_read_timeout_s``
  seconds plus one second per :data:`MIN_BODY_RATE` bytes received (so a large upload at
  a reasonable speed passes, a client dribbling 10 bytes at a time does not). Past it
  the request is answered ``408 request_timeout`` (Dify's error shape) and the
  connection is closed. A client that leaves mid-body ends the request quietly.
* **One log line per request** on the ``gcite.access`` logger (INFO, JSON): request id,
  method, route template (never ids from the path), status, the key's *name* (never the
  secret), total time, the serving process id (``pid``), and for chat runs the retrieval /
  merge / first-token times and the
  number of cited chunks (filled in by the run through :func:`current`). An aborted body
  is the same one line with ``"aborted": "body_timeout" | "client_left"`` (no traceback).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from gcite.config import ApiKey, KeyTables, Settings
from gcite.service.auth import bearer_token, find_key

log = logging.getLogger("gcite.access")

MIN_BODY_RATE = 64_000
"""Bytes per second a slow body must at least average beyond the base deadline."""

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class RequestRecord:
    """What the log line of one request says; the chat run adds ``timings`` and ``cited``."""

    request_id: str
    method: str
    path: str
    key: str
    started: float = field(default_factory=time.monotonic)
    status: int = 0
    route: str = ""
    aborted: str = ""
    body_bytes: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    cited: int | None = None

    def line(self) -> str:
        """The JSON log line (times in milliseconds)."""
        entry: dict[str, Any] = {
            "request_id": self.request_id,
            "method": self.method,
            "route": self.route or self.path,
            "status": self.status,
            "key": self.key,
            "total_ms": round((time.monotonic() - self.started) * 1000, 1),
            "pid": os.getpid(),  # which worker of `gcite serve --workers N` served it
        }
        for name, seconds in self.timings.items():
            entry[f"{name}_ms"] = round(seconds * 1000, 1)
        if self.cited is not None:
            entry["cited"] = self.cited
        if self.aborted:
            entry["aborted"] = self.aborted
            entry["body_bytes"] = self.body_bytes
        return json.dumps(entry, ensure_ascii=False)


_current: ContextVar[RequestRecord | None] = ContextVar("gcite_request", default=None)


def current() -> RequestRecord | None:
    """The record of the request being served (``None`` outside a request)."""
    return _current.get()


def key_name(keys: list[ApiKey], header: str | None) -> str:
    """The configured name of the key in an ``Authorization`` header, never the secret:
    ``-`` without a header, ``unknown`` for a key that is not configured."""
    if not header:
        return "-"
    token = bearer_token(header)
    if token is None:
        return "unknown"
    found = find_key(keys, token)
    return found.label if found is not None else "unknown"


class _BodyTimeout(BaseException):
    """The body did not arrive in time (a BaseException, like cancellation, so that no
    ``except Exception`` in an endpoint turns it into a 500 with a traceback)."""


class _Exchange:
    """One request's ``receive`` with the body-read deadline and ``send`` tagging the
    response with the request id, both recording into ``record``."""

    def __init__(self, record: RequestRecord, receive: Receive, send: Send, timeout_s: float):
        self.record = record
        self.timeout_s = timeout_s
        self.response_started = False
        self._receive = receive
        self._send = send
        self._body_done = False
        self._loop = asyncio.get_running_loop()

    async def receive(self) -> Message:
        """The next message; raises :class:`_BodyTimeout` when the body is late."""
        record = self.record
        if self._body_done or self.timeout_s <= 0:
            return await self._receive()
        allowed = self.timeout_s + record.body_bytes / MIN_BODY_RATE
        remaining = record.started + allowed - self._loop.time()
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                message = await self._receive()
        except TimeoutError as exc:
            record.aborted = "body_timeout"
            raise _BodyTimeout from exc
        if message["type"] == "http.request":
            record.body_bytes += len(message.get("body", b""))
            if not message.get("more_body", False):
                self._body_done = True
        elif message["type"] == "http.disconnect":
            record.aborted = "client_left"
        return message

    async def send(self, message: Message) -> None:
        """Send ``message`` (nothing after a body timeout), the start with ``x-request-id``."""
        record = self.record
        if message["type"] == "http.response.start":
            if self.response_started or record.aborted == "body_timeout":
                return
            self.response_started = True
            record.status = int(message["status"])
            message.setdefault("headers", [])
            message["headers"] = [
                *message["headers"],
                (b"x-request-id", record.request_id.encode()),
            ]
        elif record.aborted == "body_timeout":
            return
        await self._send(message)


class OpsMiddleware:
    """ASGI middleware: request id, body-read deadline, one access log line (module doc)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.timeout_s = settings.service.body_read_timeout_s
        self.settings = settings
        self.key_tables = KeyTables(settings)

    @property
    def keys(self) -> list[ApiKey]:
        """Every configured key, as the config file says now."""
        s = self.settings
        return [*s.app_keys, *s.retrieval_keys, *s.admin_keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.key_tables.refresh()  # a role changed in the config file counts from now on
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        incoming = headers.get("x-request-id", "")
        record = RequestRecord(
            request_id=incoming if _REQUEST_ID.match(incoming) else uuid.uuid4().hex,
            method=str(scope.get("method", "")),
            path=str(scope.get("path", "")),
            key=key_name(self.keys, headers.get("authorization")),
        )
        token = _current.set(record)
        exchange = _Exchange(record, receive, send, self.timeout_s)
        try:
            await self.app(scope, exchange.receive, exchange.send)
            if record.aborted == "body_timeout":  # the endpoint swallowed the timeout
                await self._timeout_response(send, record, exchange.response_started)
        except _BodyTimeout:
            await self._timeout_response(send, record, exchange.response_started)
        except Exception:
            if record.aborted != "client_left":
                record.status = record.status or 500
                raise
            record.status = record.status or 499  # left mid-body: one line, no traceback
        finally:
            route = scope.get("route")
            record.route = str(getattr(route, "path", "") or "")
            if record.aborted == "body_timeout":
                record.status = 408
            log.info(record.line())
            _current.reset(token)

    @staticmethod
    async def _timeout_response(send: Send, record: RequestRecord, started: bool) -> None:
        record.aborted = "body_timeout"
        record.status = 408
        if started:
            return
        body = json.dumps(
            {
                "code": "request_timeout",
                "message": "Request body was not received in time.",
                "status": 408,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 408,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    (b"x-request-id", record.request_id.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


__all__ = ["MIN_BODY_RATE", "OpsMiddleware", "RequestRecord", "current", "key_name"]
