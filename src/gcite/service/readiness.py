"""Whether this process should be given requests, and the gate that sends them elsewhere when not.

:class:`Readiness` (built by the app's lifespan) holds the outcome of ``GET /ready``'s
checks (the knowledge store answers, the model is reachable:
:meth:`gcite.service.resources.Resources.readiness`), refreshed every :data:`RECHECK_S`
seconds in the background (a pgvector store of this process: nothing else is opened or
asked for it) and at every ``/ready`` (every check), and ``draining`` (set when the server
begins to stop: :class:`gcite.service.server.GciteServer`).

:class:`ReadinessGate` (ASGI middleware, outermost) answers a request that came through a
proxy (it carries ``X-Forwarded-For``, as the shipped nginx template sets it) with 503
``not_ready`` (Dify's error shape, ``Retry-After``) while the process is not ready,
before its body is read and before anything of it runs, so that nginx counts the machine
as failed (``max_fails``) and sends the request to another one: GET/HEAD by
``proxy_next_upstream http_503``, POSTs by the template's ``@not_ready`` location (safe:
nothing was done). ``/health`` and ``/ready`` always pass; a request without
``X-Forwarded-For`` (a client talking to this machine, which has no other to go to) is
served as before, best effort. A process is ready until its first check says otherwise
(the warm-up runs in the background and a request loads what it needs itself).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger("gcite.service")

RECHECK_S = 5.0
"""Seconds between two background readiness checks."""

RETRY_AFTER_S = 5
"""The ``Retry-After`` of a not-ready answer (s)."""

ALWAYS_OPEN = ("/health", "/ready")

NOT_READY = "本机暂不可用（{reasons}），请求已交给其他机器；请稍后重试"

_REASONS = {
    "store": "知识库数据库无法连接",
    "model": "模型服务无法连接",
    "draining": "服务正在停止",
}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Readiness:
    """This process's readiness (module docstring). ``check(background=...)``: the
    ``/ready`` checks (``{name: ok}``, awaited; ``background``: the cheap ones, maybe
    none; an exception counts as every check failed)."""

    def __init__(self, check: Callable[..., Awaitable[dict[str, bool]]]) -> None:
        self._check = check
        self.checks: dict[str, bool] = {}
        self.draining = False

    @property
    def ready(self) -> bool:
        """Whether requests should come here (the last checks passed, not draining)."""
        return not self.draining and all(self.checks.values())

    def drain(self) -> None:
        """The server begins to stop: not ready from now on."""
        self.draining = True
        self.checks = {**self.checks, "draining": False}

    async def refresh(self, *, background: bool = False) -> dict[str, bool]:
        """Run the checks now (``background``: the cheap ones; the others keep their last
        outcome); returns every check (``draining``: False while stopping)."""
        try:
            fresh = await self._check(background=background)
        except Exception:
            log.warning("readiness check failed", exc_info=True)
            fresh = {name: False for name in self.checks or {"store": False}}
        checks = {**self.checks, **fresh} if background else dict(fresh)
        if self.draining:
            checks["draining"] = False
        self.checks = checks
        return checks

    def reasons(self) -> str:
        """The failing checks, in Chinese."""
        failed = [_REASONS.get(k, k) for k, ok in self.checks.items() if not ok]
        return "、".join(failed) or "未就绪"

    async def run(self, interval_s: float = RECHECK_S) -> None:
        """:meth:`refresh` (``background``) every ``interval_s`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval_s)
            await self.refresh(background=True)


def _proxied(scope: Scope) -> bool:
    return any(name == b"x-forwarded-for" for name, _ in scope.get("headers") or ())


class ReadinessGate:
    """ASGI middleware: 503 ``not_ready`` for proxied requests while the process is not
    ready (module docstring); the lifespan state holds the :class:`Readiness`
    (``readiness``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        readiness = (scope.get("state") or {}).get("readiness")
        if (
            scope["type"] != "http"
            or not isinstance(readiness, Readiness)
            or readiness.ready
            or scope.get("path") in ALWAYS_OPEN
            or not _proxied(scope)
        ):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "code": "not_ready",
                "message": NOT_READY.format(reasons=readiness.reasons()),
                "status": 503,
            },
            ensure_ascii=False,
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(RETRY_AFTER_S).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


__all__ = ["RECHECK_S", "RETRY_AFTER_S", "Readiness", "ReadinessGate"]
