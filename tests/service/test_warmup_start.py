"""When the start-up warm-up begins (service/warmup.py): not while the app starts, but
when the server says it listens, or when the first answer needs it; once either way."""

from __future__ import annotations

import asyncio
import threading

from gcite.service.warmup import WarmUp, listening


def test_the_warm_up_begins_once_when_the_server_listens() -> None:
    runs: list[str] = []
    background = threading.Event()

    async def scenario() -> None:
        warming = WarmUp(lambda: runs.append("work"), background.set)
        await asyncio.sleep(0.05)  # the app's start-up goes on: nothing begins by itself
        assert runs == [] and not warming.done and not background.is_set()
        listening({"warming": warming})  # what gcite.service.server does once it listens
        listening({"warming": warming})
        listening({})  # an app without a warm-up: nothing
        await warming.wait()
        assert warming.done
        await warming.close()

    asyncio.run(scenario())
    assert runs == ["work"]
    assert background.wait(120)  # the daemon thread (a hang guard, not a speed limit)


def test_an_answer_that_comes_first_begins_it_and_waits_for_it() -> None:
    """On a server that never says it listens, the first answer begins the warm-up and
    waits for it; a failing warm-up is logged, not raised (the answer loads it itself)."""
    order: list[str] = []

    def work() -> None:
        order.append("warm-up")
        raise RuntimeError("broken model file")

    async def scenario() -> None:
        warming = WarmUp(work)
        await warming.close()  # never begun: nothing to wait for
        await warming.wait()
        order.append("answer")
        await warming.wait()  # once only

    asyncio.run(scenario())
    assert order == ["warm-up", "answer"]


def test_another_thread_begins_it_on_the_event_loop() -> None:
    """``start_threadsafe`` (gcite.testing.live_service, from its own thread)."""
    runs: list[str] = []

    async def scenario() -> None:
        warming = WarmUp(lambda: runs.append("work"))
        threading.Thread(target=warming.start_threadsafe).start()
        async with asyncio.timeout(60):  # a hang guard, not a speed limit
            while not warming.done:
                await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert runs == ["work"]
