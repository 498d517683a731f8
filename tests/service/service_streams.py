"""Service-test helpers: a live uvicorn server, raw Dify events, the client's view."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from gcite.chatflow.scheduler import Scheduler
from gcite.config import Settings
from gcite.service import create_app
from gcite.stream.sse import (
    AnswerFinished,
    AnswerResult,
    LineDecoder,
    SSEDecoder,
    Utf8Decoder,
    consume_chat_stream,
)
from gcite.testing import live_service

WEB_KEY = "web-test-key"
"""The API key the web-search stand-in accepts."""


@dataclass
class LiveServer:
    """A chat service running under uvicorn in a thread (:func:`gcite.testing.live_service`)."""

    base_url: str
    settings: Settings
    state: dict[str, Any] = field(default_factory=dict)

    def headers(self, key: str = "key-guard") -> dict[str, str]:
        """Authorization header for ``key``."""
        return {"Authorization": f"Bearer {key}"}

    @property
    def scheduler(self) -> Scheduler:
        """The app's process scheduler (its lifespan state), for counters read from the test."""
        scheduler: Scheduler = self.state["scheduler"]
        return scheduler


@contextmanager
def run_service(settings: Settings) -> Iterator[LiveServer]:
    """Serve ``create_app(settings)`` on a free loopback port until the block ends."""
    state: dict[str, Any] = {}
    with live_service(create_app(settings), state=state) as base_url:
        yield LiveServer(base_url, settings, state)


def body(query: str, *, user: str = "u1", mode: str = "streaming", **extra: Any) -> dict[str, Any]:
    """A ``POST /v1/chat-messages`` body."""
    return {"query": query, "inputs": {}, "response_mode": mode, "user": user, **extra}


class RawStream:
    """Decodes SSE bytes into event dicts (``{"event": "ping"}`` for a bare ping frame)."""

    def __init__(self) -> None:
        self._utf8 = Utf8Decoder()
        self._lines = LineDecoder()
        self._sse = SSEDecoder()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Events completed by ``data``."""
        out: list[dict[str, Any]] = []
        for line in self._lines.decode(self._utf8.decode(data)):
            sse = self._sse.decode(line)
            if sse is None:
                continue
            if not sse.data:
                out.append({"event": sse.event})
            else:
                payload = json.loads(sse.data)
                assert isinstance(payload, dict)
                out.append(payload)
        return out


async def iter_events(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[dict[str, Any]]:
    """POST and yield raw events as they arrive (the response closes when iteration stops)."""
    async with client.stream("POST", url, json=payload, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        decoder = RawStream()
        async for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk):
                yield event


async def raw_events(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    """Every raw event of one streamed answer."""
    return [e async for e in iter_events(client, url, payload, headers)]


async def client_view(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any], headers: dict[str, str]
) -> AnswerResult:
    """The answer as the project's SSE client (``gcite.stream.sse``) sees it."""
    result: AnswerResult | None = None
    async for update in consume_chat_stream(client, url, payload, headers):
        if isinstance(update, AnswerFinished):
            result = update.result
    assert result is not None
    return result


def names(events: list[dict[str, Any]]) -> list[str]:
    """Event names, pings left out."""
    return [e["event"] for e in events if e["event"] != "ping"]


def node_events(events: list[dict[str, Any]], kind: str, node_type: str) -> list[dict[str, Any]]:
    """``node_started`` / ``node_finished`` events of one node type."""
    return [e for e in events if e["event"] == kind and e["data"]["node_type"] == node_type]


def context_blocks(request: dict[str, Any]) -> dict[str, str]:
    """``{chunk id: content}`` parsed from the system prompt's ``[C:N]`` blocks."""
    system = request["messages"][0]["content"]
    blocks: dict[str, str] = {}
    current: str | None = None
    for line in system.split("\n"):
        if line.startswith("[C:") and line.endswith("]") and line[3:-1].isdigit():
            current = line[3:-1]
            blocks[current] = ""
        elif current is not None:
            if line.startswith("# ") or line.startswith("---"):
                current = None
            else:
                blocks[current] += line
    return blocks
