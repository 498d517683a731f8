"""Many answers streaming at once in one process (generate/coalesce.py joins deltas past
8 streams; generate/priority.py lets preparing runs go first): the text is the model's,
stops and client disconnects still close the model call, and nothing is left counted as
streaming or preparing. Real uvicorn server, OpenAI stand-in."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from service_streams import LiveServer, body, iter_events

from gcite.generate import coalesce, priority
from support.openai_standin import SPLIT_DELTAS, SPLIT_SHOWN, OpenAIStandin, Script
from support.web_standin import Reply, WebStandin

pytestmark = pytest.mark.asyncio(loop_scope="session")

STREAMS = 24
LONG = "一二三四五六七八九十" * 10  # 3 s at 30 ms a delta


@contextlib.asynccontextmanager
async def peak_streams() -> AsyncIterator[list[int]]:
    """Sample ``coalesce.active_streams()`` every 10 ms inside the block; ``[peak]``."""
    peak = [0]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], coalesce.active_streams())
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    try:
        yield peak
    finally:
        sampler.cancel()


async def settled() -> None:
    """Wait (at most 10 s) until no answer streams and no run prepares in this process."""
    for _ in range(200):
        if priority.preparing_runs() == 0 and coalesce.active_streams() == 0:
            return
        await asyncio.sleep(0.05)


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

    async with peak_streams() as peak:
        results = await asyncio.gather(*(one(i) for i in range(STREAMS)))
    assert peak[0] > coalesce.QUIET_STREAMS  # deltas were joined
    for kind, answer, status in results:
        if kind == "full":
            assert (answer, status) == (SPLIT_SHOWN, "succeeded")
        elif kind == "stop":
            assert status == "stopped" and 0 < len(answer) < len(LONG)
    full = sum(1 for k, _, _ in results if k == "full")
    assert await asyncio.to_thread(llm.wait_for_disconnect, 1, 10)
    # the stand-in notes a hang-up it sees while waiting, not one a write runs into:
    # every model call left or stopped is closed when none of them ran to its end
    await asyncio.sleep(len(LONG) * 0.03 + 1)
    assert llm.completed == full
    await settled()
    assert coalesce.active_streams() == 0
    assert priority.preparing_runs() == 0 and priority.busy_slots() == 0


async def test_requests_that_end_before_their_model_call_leave_nothing_counted(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """A burst where a third leave right after the stream opens (mostly while their run
    prepares), a third name an unknown conversation (404 before the run) and a third
    answer: every request gets its answer or error, and no run stays counted as
    preparing nor holds a slot (generate/priority.py)."""
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
    await settled()
    assert priority.preparing_runs() == 0
    assert priority.busy_slots() == 0 and priority.waiting_steps() == 0


async def test_a_run_waiting_for_a_slow_web_source_does_not_hold_back_streaming_answers(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """While one run waits for a web search that takes longer than ``web_timeout_s``, it
    needs no CPU: the answers already streaming in the busy process read on as before,
    not once per ``MAX_HOLD_S`` (generate/priority.py)."""
    llm.responder = lambda _request: Script.text(LONG, size=1, token_delay_s=0.03)
    web.default = lambda request: Reply.hang(3.0) if "#slow" in str(request.body) else Reply.auto()
    url = service.base_url + "/v1/chat-messages"
    streams = coalesce.QUIET_STREAMS + 4
    stamps: list[list[float]] = [[] for _ in range(streams)]
    started = asyncio.Event()

    async def one(i: int) -> None:
        payload = body("监控中心的备用钥匙放在哪里？", user=f"w{i}")
        async for event in iter_events(client, url, payload, service.headers()):
            if event["event"] == "message":
                stamps[i].append(asyncio.get_running_loop().time())
                if all(stamps):
                    started.set()

    tasks = [asyncio.create_task(one(i)) for i in range(streams)]
    await asyncio.wait_for(started.wait(), 20)
    slow = asyncio.create_task(
        client.post(
            url, json=body("备用钥匙#slow", user="slow", mode="blocking"), headers=service.headers()
        )
    )
    loop = asyncio.get_running_loop()
    for _ in range(400):  # the slow run is waiting for its web search
        if any("#slow" in str(r.body) for r in list(web.requests)):
            break
        await asyncio.sleep(0.01)
    waiting_from = loop.time()
    await asyncio.sleep(0.7)  # web_timeout_s is 1.0: the run still waits
    waiting_to = loop.time()
    assert not slow.done()
    await asyncio.gather(*tasks)
    reply = await slow
    assert reply.status_code == 200
    counts = sorted(sum(1 for t in s if waiting_from + 0.1 <= t < waiting_to) for s in stamps)
    # 0.6 s of 30 ms tokens, flushed every 24 ms: about 20 deltas each; held, about 2-3
    assert counts[len(counts) // 2] >= 8, counts
    assert priority.preparing_runs() == 0 and priority.busy_slots() == 0


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
    web.default = lambda request: Reply.hang(2.0) if "#web" in str(request.body) else Reply.auto()
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

    async with peak_streams() as peak:
        results = await asyncio.gather(*(one(i) for i in range(3 * len(kinds))))
    assert peak[0] > coalesce.QUIET_STREAMS  # a busy process: answers were held
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
    await settled()
    assert priority.preparing_runs() == 0 and coalesce.active_streams() == 0
    assert priority.busy_slots() == 0 and priority.waiting_steps() == 0


async def test_streaming_answers_are_not_starved_by_a_continuous_stream_of_new_requests(
    service: LiveServer, llm: OpenAIStandin, web: WebStandin, client: httpx.AsyncClient
) -> None:
    """A new request every 30 ms for 2 s keeps runs preparing nearly all the time: each
    answer already streaming is still read at least every ``MAX_HOLD_S`` (plus a flush
    interval and the loop's own delays), and its text arrives whole, split markers and
    surrogate pairs included."""

    def respond(request: dict[str, Any]) -> Script:
        if _kind(request) == "full":
            return Script(deltas=SPLIT_DELTAS * 12, token_delay_s=0.02, ascii_json=True)
        return Script.text("钥匙在三号保险柜[C:1]。", size=2)

    llm.responder = respond
    url = service.base_url + "/v1/chat-messages"
    loop = asyncio.get_running_loop()
    streams = coalesce.QUIET_STREAMS + 4
    stamps: list[list[float]] = [[] for _ in range(streams)]
    answers = [""] * streams
    started = asyncio.Event()

    async def long(i: int) -> None:
        payload = body("监控中心的备用钥匙放在哪里？#full", user=f"s{i}")
        async for event in iter_events(client, url, payload, service.headers()):
            if event["event"] == "message":
                stamps[i].append(loop.time())
                answers[i] += event["answer"]
                if all(stamps):
                    started.set()

    async def short(i: int) -> str:
        reply = await client.post(
            url,
            json=body("备用钥匙在哪里？#short", user=f"n{i}", mode="blocking"),
            headers=service.headers(),
        )
        return str(reply.json().get("answer"))

    tasks = [asyncio.create_task(long(i)) for i in range(streams)]
    await asyncio.wait_for(started.wait(), 20)
    burst_from = loop.time()
    newcomers = []
    samples: list[bool] = []

    async def sample() -> None:
        while True:
            samples.append(priority.preparing_runs() > 0)
            await asyncio.sleep(0.002)

    sampler = asyncio.create_task(sample())
    for n in range(66):
        newcomers.append(asyncio.create_task(short(n)))
        await asyncio.sleep(0.03)
    burst_to = loop.time()
    sampler.cancel()
    shorts = await asyncio.gather(*newcomers)
    await asyncio.gather(*tasks)
    assert all(s == "钥匙在三号保险柜[C:1]。" for s in shorts)
    assert all(a == SPLIT_SHOWN * 12 for a in answers)
    assert sum(samples) > len(samples) // 4  # runs were preparing much of the time
    gaps = sorted(
        b - a for s in stamps for a, b in itertools.pairwise(s) if burst_from <= a < burst_to
    )
    assert gaps[-1] < 0.6, gaps[-5:]
