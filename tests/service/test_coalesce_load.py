"""Many answers streaming at once in one process (the process's scheduler joins deltas
and lets preparing runs go first, gcite.chatflow.scheduler): the text is the model's,
stops and client disconnects still close the model call, and nothing is left counted as
streaming or preparing. Real uvicorn server, OpenAI stand-in.

The service here runs with ``sched_quiet_streams = 0``: every answer is joined and held
while runs prepare, however fast or slow the machine is, so no test depends on how many
streams happen to overlap. How fast the first texts come and how long the gaps between
deltas are is measured by ``benchmarks/bench_scale.py``, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, iter_events, run_service

from support.clock import until
from support.openai_standin import SPLIT_DELTAS, SPLIT_SHOWN, OpenAIStandin, Script
from support.web_standin import Reply, WebStandin

pytestmark = pytest.mark.asyncio(loop_scope="session")

STREAMS = 24
LONG = "一二三四五六七八九十" * 10  # 3 s at 30 ms a delta
GUARD_S = 300.0  # hang guard only


@pytest.fixture(scope="module")
def service(service: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The chat service of the other service tests, with every answer scheduled as in a
    busy process (``sched_quiet_streams = 0``) and a database of its own."""
    db = tmp_path_factory.mktemp("db-busy") / "chat.sqlite3"
    settings = service.settings.with_keys(database_url=f"sqlite:///{db}", sched_quiet_streams=0)
    with run_service(settings) as live:
        yield live


async def settled(service: LiveServer) -> None:
    """Wait until no answer streams, no run prepares and no step waits or holds a slot in
    the service's process (fails after :data:`GUARD_S`: something stayed counted)."""
    s = service.scheduler
    await until(
        lambda: (
            s.preparing_runs() == 0
            and s.active_streams() == 0
            and s.busy_slots() == 0
            and s.waiting_steps() == 0
            and s.held_streams() == 0
        ),
        GUARD_S,
    )


def _kind(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"]).rsplit("#", 1)[-1]


def _respond(request: dict[str, Any]) -> Script:
    kind = _kind(request)
    if kind == "full":
        return Script(deltas=SPLIT_DELTAS, token_delay_s=0.02, ascii_json=True)
    return Script.text(LONG, size=1, token_delay_s=0.03)


async def test_many_streams_text_stop_and_disconnect(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    llm.responder = _respond
    url = service.base_url + "/v1/chat-messages"
    kinds = ["full", "leave", "stop"]

    async def one(i: int) -> tuple[str, str, str]:
        kind = kinds[i % len(kinds)]
        query = f"监控中心的备用钥匙放在哪里？#{kind}"
        answer = ""
        status = ""
        async for event in iter_events(client, url, body(query, user=f"u{i}"), service.headers()):
            if event["event"] == "message":
                answer += event["answer"]
                if kind == "leave":
                    return kind, answer, "left"
                if kind == "stop" and len(answer) >= 3 and not status:
                    status = "stopping"
                    reply = await client.post(
                        f"{url}/{event['task_id']}/stop",
                        json={"user": f"u{i}"},
                        headers=service.headers(),
                    )
                    assert reply.status_code == 200
            if event["event"] == "workflow_finished":
                status = event["data"]["status"]
        return kind, answer, status

    results = await asyncio.gather(*(one(i) for i in range(STREAMS)))
    for kind, answer, status in results:
        if kind == "full":
            assert (answer, status) == (SPLIT_SHOWN, "succeeded")
        elif kind == "stop":
            assert status == "stopped" and 0 < len(answer) < len(LONG)
    full = sum(1 for k, _, _ in results if k == "full")
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1)
    # the stand-in notes a hang-up it sees while waiting, not one a write runs into:
    # every model call left or stopped is closed when none of them ran to its end (the
    # calls that answered whole are counted first; then the time a left call would need
    # to run to its end passes, and none did)
    await until(lambda: llm.completed >= full, GUARD_S)
    await asyncio.sleep(len(LONG) * 0.03 + 1)
    assert llm.completed == full
    await settled(service)


async def test_requests_that_end_before_their_model_call_leave_nothing_counted(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """A burst where a third leave right after the stream opens (mostly while their run
    prepares), a third name an unknown conversation (404 before the run) and a third
    answer: every request gets its answer or error, and no run stays counted as
    preparing nor holds a slot (gcite.chatflow.scheduler)."""
    llm.responder = lambda _request: Script.text("钥匙在三号保险柜[C:1]。", size=2)
    url = service.base_url + "/v1/chat-messages"

    async def one(i: int) -> str:
        kind = ("leave", "unknown", "answer")[i % 3]
        payload = body("监控中心的备用钥匙放在哪里？", user=f"p{i}")
        if kind == "unknown":
            payload["conversation_id"] = "00000000-0000-4000-8000-000000000000"
            reply = await client.post(url, json=payload, headers=service.headers())
            return f"{kind}:{reply.status_code}"
        answer = ""
        async for event in iter_events(client, url, payload, service.headers()):
            if kind == "leave":
                return f"{kind}:{event['event']}"
            if event["event"] == "message":
                answer += event["answer"]
        return f"{kind}:{answer}"

    results = await asyncio.gather(*(one(i) for i in range(3 * STREAMS)))
    assert results.count("unknown:404") == STREAMS
    assert results.count("leave:workflow_started") == STREAMS
    assert results.count("answer:钥匙在三号保险柜[C:1]。") == STREAMS
    await settled(service)


async def test_stops_disconnects_and_model_errors_in_every_phase_leave_nothing_counted(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """In a busy process: streams stopped while their run waits for a slow web search or
    while their answer streams, blocking requests whose client leaves while the run
    prepares or streams, follow-ups (condense call), model calls answered 500 or cut
    mid-stream. Every request ends, and no run stays counted, holds or waits for a slot."""

    def respond(request: dict[str, Any]) -> Script:
        kind = _kind(request)
        if kind == "err":
            return Script(status=500, error={"message": "boom", "type": "server_error"})
        if kind == "cut":
            return Script.text(LONG, size=1, token_delay_s=0.01, drop_after=5)
        return Script.text(LONG, size=1, token_delay_s=0.01)

    llm.responder = respond
    web.default = lambda request: Reply.hang(60) if "#web" in str(request.body) else Reply.auto()
    url = service.base_url + "/v1/chat-messages"
    kinds = ["ok", "web-stop", "text-stop", "web-leave", "text-leave", "err", "cut", "followup"]

    async def stream(i: int, query: str, stop_at: str | None, **extra: Any) -> str:
        answer, status = "", ""
        payload = body(query, user=f"x{i}", **extra)
        async for event in iter_events(client, url, payload, service.headers()):
            name = event["event"]
            if name == "message":
                answer += event["answer"]
            if stop_at == name or (stop_at == "message" and name == "message"):
                stop_at = None
                reply = await client.post(
                    f"{url}/{event['task_id']}/stop",
                    json={"user": f"x{i}"},
                    headers=service.headers(),
                )
                assert reply.status_code == 200
            if name == "workflow_finished":
                status = event["data"]["status"]
            if name == "error":
                status = "error"
        return status

    async def one(i: int) -> str:
        kind = kinds[i % len(kinds)]
        if kind == "ok":
            return await stream(i, "备用钥匙在哪里？#ok", None)
        if kind == "web-stop":
            return await stream(i, "备用钥匙在哪里？#web", "workflow_started")
        if kind == "text-stop":
            return await stream(i, "备用钥匙在哪里？#ok", "message")
        if kind in ("web-leave", "text-leave"):
            query = "备用钥匙在哪里？#web" if kind == "web-leave" else "备用钥匙在哪里？#ok"
            with contextlib.suppress(httpx.TimeoutException):
                await client.post(
                    url,
                    json=body(query, user=f"x{i}", mode="blocking"),
                    headers=service.headers(),
                    timeout=0.3,
                )
            return "left"
        if kind in ("err", "cut"):
            return await stream(i, f"备用钥匙在哪里？#{kind}", None)
        first = await client.post(
            url,
            json=body("备用钥匙在哪里？#ok", user=f"x{i}", mode="blocking"),
            headers=service.headers(),
        )
        assert first.status_code == 200
        conversation = first.json()["conversation_id"]
        return await stream(i, "那它呢？#ok", None, conversation_id=conversation)

    results = await asyncio.gather(*(one(i) for i in range(3 * len(kinds))))
    for i, result in enumerate(results):
        kind = kinds[i % len(kinds)]
        expected = {
            "ok": "succeeded",
            "followup": "succeeded",
            "web-stop": "stopped",
            "text-stop": "stopped",
            "web-leave": "left",
            "text-leave": "left",
            "err": "error",  # the model's 500 or its cut stream: an error event
            "cut": "error",
        }[kind]
        assert result == expected, (kind, result)
    await settled(service)


async def test_streaming_answers_come_whole_through_a_continuous_stream_of_new_requests(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """A new request every 30 ms keeps runs preparing while 12 answers stream (each held
    while runs prepare, at most ``sched_max_hold_s`` at a time: tests/chatflow/
    test_scheduler.py): every answer, and every newcomer's, arrives whole, split markers
    and surrogate pairs included, and nothing stays counted."""

    def respond(request: dict[str, Any]) -> Script:
        if _kind(request) == "full":
            return Script(deltas=SPLIT_DELTAS * 12, token_delay_s=0.02, ascii_json=True)
        return Script.text("钥匙在三号保险柜[C:1]。", size=2)

    llm.responder = respond
    url = service.base_url + "/v1/chat-messages"
    streams = 12
    answers = [""] * streams
    started = asyncio.Event()

    async def long(i: int) -> None:
        payload = body("监控中心的备用钥匙放在哪里？#full", user=f"s{i}")
        async for event in iter_events(client, url, payload, service.headers()):
            if event["event"] == "message":
                answers[i] += event["answer"]
                if all(answers):
                    started.set()

    async def short(i: int) -> str:
        reply = await client.post(
            url,
            json=body("备用钥匙在哪里？#short", user=f"n{i}", mode="blocking"),
            headers=service.headers(),
        )
        return str(reply.json().get("answer"))

    tasks = [asyncio.create_task(long(i)) for i in range(streams)]
    await asyncio.wait_for(started.wait(), GUARD_S)
    newcomers = []
    for n in range(66):
        newcomers.append(asyncio.create_task(short(n)))
        await asyncio.sleep(0.03)  # the pace of arrivals; nothing is measured
    shorts = await asyncio.wait_for(asyncio.gather(*newcomers), GUARD_S)
    await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    assert all(s == "钥匙在三号保险柜[C:1]。" for s in shorts)
    assert all(a == SPLIT_SHOWN * 12 for a in answers)
    await settled(service)
