"""When the start-up warm-up begins (service/warmup.py): not while the app starts nor while
the first ``/ready`` is answered, but once that answer is sent, or when the first answer
needs it, or a moment after the server listens if nothing asked; once whichever way."""

from __future__ import annotations

import asyncio
import threading

from gcite.service.warmup import WarmUp, listening


def test_the_warm_up_begins_once_a_moment_after_the_server_listens() -> None:
    """Nothing asks for ``/ready`` nor asks a question: the server's listening schedules
    the warm-up (``begin_after_s`` later), which then runs once."""
    runs: list[str] = []
    background = threading.Event()

    async def scenario() -> None:
        warming = WarmUp(lambda: runs.append("work"), background.set, begin_after_s=0.01)
        await asyncio.sleep(0.05)  # the app's start-up goes on: nothing begins by itself
        assert runs == [] and not warming.begun and not background.is_set()
        listening({"warming": warming})  # what gcite.service.server does once it listens
        listening({"warming": warming})
        listening({})  # an app without a warm-up: nothing
        assert not warming.begun  # not while the server's start-up goes on
        async with asyncio.timeout(60):  # a hang guard, not a speed limit
            while not warming.done:
                await asyncio.sleep(0.01)
        await warming.close()

    asyncio.run(scenario())
    assert runs == ["work"]
    assert background.wait(120)  # the daemon thread (a hang guard, not a speed limit)


def test_the_first_ready_answer_begins_it_and_a_shutdown_cancels_the_schedule() -> None:
    """``/ready``'s answer begins the warm-up at once (not at the scheduled moment); a
    warm-up that was only scheduled never begins once the app shuts down."""
    runs: list[str] = []

    async def scenario() -> None:
        warming = WarmUp(lambda: runs.append("work"), begin_after_s=3600)
        listening({"warming": warming})
        await warming.after_ready()  # what GET /ready's background task does
        assert warming.begun
        await warming.wait()
        await warming.after_ready()  # once only
        idle = WarmUp(lambda: runs.append("never"), begin_after_s=0.01)
        listening({"warming": idle})
        await idle.close()
        await asyncio.sleep(0.05)
        assert not idle.begun

    asyncio.run(scenario())
    assert runs == ["work"]


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
