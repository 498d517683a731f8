"""A stopping server ends the answers in flight (gcite.service.server.GciteServer).

The real server on a loopback socket, in a thread, against the OpenAI stand-in; the stop
is what SIGTERM does (uvicorn's ``should_exit``). With no drain left, a stream in flight
ends with an ``error`` event (``service_unavailable``) and a blocking call gets a 503,
both stored ``failed``; within the drain an answer that ends on its own ends normally.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from service_streams import body, iter_events
from sqlalchemy import text

from conftest import KEYS, _settings
from gcite.service import create_app
from gcite.service.http import BoundedHttpToolsProtocol
from gcite.service.runs import INTERRUPTED
from gcite.service.server import GciteServer
from gcite.service.store import ConversationStore
from support.openai_standin import OpenAIStandin, Script

HEADERS = {"Authorization": f"Bearer {KEYS[0].key}"}
SLOW = Script.text("一二三四五六七八九十" * 100, size=1, token_delay_s=0.05)  # 50 s


@contextmanager
def _serving(app: Any, drain_s: float) -> Iterator[tuple[str, GciteServer, threading.Thread]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", http=BoundedHttpToolsProtocol)
    server = GciteServer(config, drain_s=drain_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for _ in range(1200):  # a hang guard (two minutes)
        if server.started:
            break
        thread.join(0.1)
    assert server.started
    try:
        yield base, server, thread
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


async def _first_text_then(
    client: httpx.AsyncClient, base: str, then: Any, events: list[dict[str, Any]]
) -> None:
    async for event in iter_events(
        client, f"{base}/v1/chat-messages", body("访客怎么登记"), HEADERS
    ):
        events.append(event)
        if event["event"] == "message" and sum(e["event"] == "message" for e in events) == 1:
            then()


async def test_a_stopping_server_ends_its_answers_as_failed_with_an_error_event(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path
) -> None:
    llm.default = SLOW
    db = tmp_path / "chat.sqlite3"
    settings = _settings(role_kb, db, llm_base_url=llm.base_url, llm_model="m", llm_api_key="k")
    app = create_app(settings)
    events: list[dict[str, Any]] = []
    with _serving(app, drain_s=0.0) as (base, server, thread):
        async with httpx.AsyncClient(timeout=120) as client:
            blocking = asyncio.ensure_future(
                client.post(
                    f"{base}/v1/chat-messages",
                    json=body("访客怎么登记", mode="blocking"),
                    headers=HEADERS,
                )
            )

            def stop() -> None:
                server.should_exit = True  # what SIGTERM does

            await _first_text_then(client, base, stop, events)
            reply = await blocking
        thread.join(120)  # a hang guard
        assert not thread.is_alive()
    last = events[-1]
    assert (last["event"], last["code"], last["status"]) == ("error", "service_unavailable", 503)
    assert last["message"] == INTERRUPTED
    assert reply.status_code == 503, reply.text
    assert reply.json()["code"] == "service_unavailable"
    store = ConversationStore(f"sqlite:///{db}")
    try:
        with store.engine.connect() as connection:
            rows = connection.execute(text("SELECT id, status, error FROM gcite_messages")).all()
        assert len(rows) == 2  # the stream's and the blocking call's
        assert {(status, error) for _id, status, error in rows} == {("failed", INTERRUPTED)}
        assert last["message_id"] in {row[0] for row in rows}
        assert store.instances() == []  # the server removed itself on the way out
    finally:
        store.close()


async def test_answers_that_end_within_the_drain_end_normally(
    role_kb: Path, llm: OpenAIStandin, tmp_path: Path
) -> None:
    llm.default = Script.text("访客须在一层大堂登记[C:1]。", size=1, token_delay_s=0.05)
    settings = _settings(
        role_kb,
        tmp_path / "chat.sqlite3",
        llm_base_url=llm.base_url,
        llm_model="m",
        llm_api_key="k",
    )
    app = create_app(settings)
    events: list[dict[str, Any]] = []
    with _serving(app, drain_s=120.0) as (base, server, thread):

        def stop() -> None:
            server.should_exit = True

        async with httpx.AsyncClient(timeout=120) as client:
            await _first_text_then(client, base, stop, events)
        thread.join(120)
        assert not thread.is_alive()
    assert events[-1]["event"] == "message_end"
    finished = [e for e in events if e["event"] == "workflow_finished"]
    assert finished and finished[0]["data"]["status"] == "succeeded"
