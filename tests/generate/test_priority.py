"""First text first (generate/priority.py, issue 19): arrival-ordered slots, the hold of
streaming answers while runs prepare, and the real backend against the OpenAI stand-in
(a real local HTTP server): held answers lose nothing, first texts are never held."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from gcite.config import Settings
from gcite.generate import coalesce, priority
from gcite.generate.coalesce import coalesced
from gcite.generate.factory import make_backend
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "user", "content": "问题"}]
ANSWER = "依据第二十三条[C:1]，公用消防设施的检测维修费用由业主共同承担[C:2]。"


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


@pytest.fixture(autouse=True)
def _nothing_left_counted() -> Iterator[None]:
    yield
    assert priority.preparing_runs() == 0
    assert priority.busy_slots() == 0


async def test_free_slots_go_to_the_earliest_arrival_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(priority, "ADMIT", 2)
    order: list[int] = []
    release = asyncio.Event()

    async def request(number: int) -> None:
        async with priority.step(number):
            order.append(number)
            await release.wait()

    first = [asyncio.create_task(request(n)) for n in (100, 101)]
    await asyncio.sleep(0.01)
    assert order == [100, 101]  # two slots, both taken at once
    later = [asyncio.create_task(request(n)) for n in (7, 3, 9, 5)]  # arrive out of order
    await asyncio.sleep(0.01)
    assert order == [100, 101] and priority.waiting_steps() == 4
    release.set()
    await asyncio.gather(*first, *later)
    assert order == [100, 101, 3, 5, 7, 9]


async def test_a_waiter_cancelled_with_its_slot_passes_it_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(priority, "ADMIT", 1)
    holder = priority.Preparing(1)
    await holder.admit()
    waiting = [priority.Preparing(n) for n in (2, 3)]
    tasks = [asyncio.create_task(p.admit()) for p in waiting]
    await asyncio.sleep(0.01)
    holder.release()  # the slot is handed to number 2 ...
    tasks[0].cancel()  # ... which is cancelled before it runs: number 3 gets it
    await asyncio.sleep(0.01)
    assert tasks[1].done() and priority.busy_slots() == 1
    for p in (holder, *waiting):
        p.done()
    assert priority.busy_slots() == 0


async def test_hold_waits_while_a_run_prepares_in_a_busy_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(priority, "MAX_HOLD_S", 5.0)
    # quiet process: never held, even with a run preparing
    run = priority.Preparing()
    start = loop.time()
    await priority.hold(start)
    assert loop.time() - start < 0.05
    # busy: held until the preparing run is done
    monkeypatch.setattr(coalesce, "_active", coalesce.QUIET_STREAMS + 1)
    held = asyncio.create_task(priority.hold(loop.time()))
    await asyncio.sleep(0.1)
    assert not held.done()
    run.done()
    await asyncio.wait_for(held, 1.0)
    # busy but no run preparing: not held
    start = loop.time()
    await priority.hold(start)
    assert loop.time() - start < 0.05


async def test_hold_ends_after_max_hold_when_runs_keep_preparing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(priority, "MAX_HOLD_S", 0.2)
    monkeypatch.setattr(coalesce, "_active", coalesce.QUIET_STREAMS + 1)
    run = priority.Preparing()
    try:
        start = loop.time()
        await asyncio.wait_for(priority.hold(start), 2.0)
        assert 0.15 <= loop.time() - start < 1.5
        # a stream whose last read is older than MAX_HOLD_S reads at once
        start = loop.time()
        await priority.hold(start - 1.0)
        assert loop.time() - start < 0.05
    finally:
        run.done()


async def test_paced_closes_its_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[bytes]:
        try:
            for piece in (b"a", b"b", b"c"):
                yield piece
        finally:
            closed.append(True)

    stream = priority.paced(source(), [True])
    assert await stream.__anext__() == b"a"
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


async def _stamped(backend: object, stamps: list[tuple[float, str]]) -> None:
    async for delta in coalesced(backend.stream(MESSAGES)):  # type: ignore[attr-defined]
        if isinstance(delta, str):
            stamps.append((time.monotonic(), delta))


async def test_streaming_answers_wait_for_a_preparing_run_and_lose_nothing(
    standin: OpenAIStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(priority, "MAX_HOLD_S", 5.0)
    streams = coalesce.QUIET_STREAMS + 4  # busy: past QUIET_STREAMS answers
    settings = Settings.from_keys(llm_base_url=standin.base_url, llm_model="m", llm_timeout_s=30)
    backend = make_backend(settings)
    standin.push(*[Script.text(ANSWER, size=1, token_delay_s=0.01) for _ in range(streams)])
    stamps: list[list[tuple[float, str]]] = [[] for _ in range(streams)]
    run: priority.Preparing | None = None
    try:
        tasks = [asyncio.create_task(_stamped(backend, s)) for s in stamps]
        for _ in range(500):  # every answer has its first text
            if all(stamps):
                break
            await asyncio.sleep(0.01)
        assert all(stamps)
        run = priority.Preparing()  # a new request starts preparing
        held_from = time.monotonic()
        await asyncio.sleep(0.4)  # 40 tokens' worth of time
        held_to = time.monotonic()
        run.done()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
    finally:
        if run is not None:
            run.done()
        await backend.aclose()
    for s in stamps:
        assert "".join(d for _, d in s) == ANSWER  # nothing lost, nothing reordered
        # what had been read before the hold is flushed within one flush interval; then
        # no text until the preparing run is done
        during = [d for t, d in s if held_from + 0.1 <= t < held_to]
        assert during == [], during
        assert any(t >= held_to for t, _ in s)  # the rest came afterwards


async def test_the_first_text_is_never_held(
    standin: OpenAIStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(priority, "MAX_HOLD_S", 5.0)
    streams = coalesce.QUIET_STREAMS + 4
    settings = Settings.from_keys(llm_base_url=standin.base_url, llm_model="m", llm_timeout_s=30)
    backend = make_backend(settings)
    standin.push(*[Script.text(ANSWER, size=1, token_delay_s=0.01) for _ in range(streams)])
    stamps: list[list[tuple[float, str]]] = [[] for _ in range(streams)]
    run = priority.Preparing()  # preparing the whole time the answers start
    try:
        tasks = [asyncio.create_task(_stamped(backend, s)) for s in stamps]
        for _ in range(300):
            if all(stamps):
                break
            await asyncio.sleep(0.01)
        assert all(stamps)  # every first text came while a run prepared
        run.done()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
    finally:
        run.done()
        await backend.aclose()
    assert all("".join(d for _, d in s) == ANSWER for s in stamps)


async def test_a_run_waiting_for_a_source_is_not_counted_as_preparing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(priority, "MAX_HOLD_S", 5.0)
    monkeypatch.setattr(coalesce, "_active", coalesce.QUIET_STREAMS + 1)
    run = priority.Preparing()
    await run.admit()
    held = asyncio.create_task(priority.hold(loop.time()))
    await asyncio.sleep(0.05)
    assert not held.done()
    run.release()  # waits for its sources: no slot, still counted (the KB search's CPU)
    assert priority.preparing_runs() == 1 and priority.busy_slots() == 0
    await asyncio.sleep(0.05)
    assert not held.done()
    run.away()  # waits for web search only: needs no CPU
    assert priority.preparing_runs() == 0 and priority.busy_slots() == 0
    await asyncio.wait_for(held, 1.0)  # the held answer reads on
    start = loop.time()
    await priority.hold(start)
    assert loop.time() - start < 0.05
    await run.admit()  # its next CPU step: counted again
    assert priority.preparing_runs() == 1 and priority.busy_slots() == 1
    run.done()
    await run.admit()  # a run that ended is never counted again nor takes a slot
    assert priority.preparing_runs() == 0 and priority.busy_slots() == 0
    run.away()
    assert priority.preparing_runs() == 0


async def test_a_preparing_runs_own_model_call_is_never_held(
    standin: OpenAIStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follow-up's condense call is part of its run's preparation (its first text waits
    for it): in a busy process with other runs preparing, its reads are not held."""
    monkeypatch.setattr(priority, "MAX_HOLD_S", 5.0)
    monkeypatch.setattr(coalesce, "_active", coalesce.QUIET_STREAMS + 1)
    settings = Settings.from_keys(llm_base_url=standin.base_url, llm_model="m", llm_timeout_s=30)
    backend = make_backend(settings)
    standin.push(Script.text(ANSWER, size=4, token_delay_s=0.01))
    other = priority.Preparing()  # another request preparing the whole time

    async def condense() -> str:
        run = priority.Preparing()  # the follow-up's run, before its retrieval
        try:
            run.away()  # its condense call waits for the model
            parts = [d async for d in backend.stream(MESSAGES) if isinstance(d, str)]
            return "".join(parts)
        finally:
            run.done()

    try:
        start = time.monotonic()
        text = await asyncio.wait_for(asyncio.create_task(condense()), 10)
        took = time.monotonic() - start
    finally:
        other.done()
        await backend.aclose()
    assert text == ANSWER
    assert took < 2.0, took  # held, each later read would wait 5 s
