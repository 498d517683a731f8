"""First text first (gcite.chatflow.scheduler): arrival-ordered slots, the hold of
streaming answers while runs prepare, and the real OpenAI backend paced against its
stand-in (a real local HTTP server): held answers lose nothing, first texts are never
held. Time is a hand-moved clock: nothing here depends on how fast the machine is
(the speed of the whole is measured by benchmarks/bench_scale.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.config import Settings
from gcite.generate.factory import make_backend
from support.clock import ManualClock, until
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "user", "content": "问题"}]
ANSWER = "依据第二十三条[C:1]，公用消防设施的检测维修费用由业主共同承担[C:2]。"
GUARD_S = 120.0  # hang guard only (a loaded machine may need tens of seconds)


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def scheduler(clock: ManualClock, **knobs: object) -> Scheduler:
    return Scheduler(Knobs(**knobs), clock)  # type: ignore[arg-type]


def settled(s: Scheduler) -> bool:
    return s.preparing_runs() == 0 and s.busy_slots() == 0 and s.active_streams() == 0


async def _silent(gate: asyncio.Event) -> AsyncIterator[str]:
    """A model that sends nothing until ``gate`` is set (never held: no text yet)."""
    await gate.wait()
    return
    yield


async def _streaming(s: Scheduler, count: int, gate: asyncio.Event) -> list[asyncio.Task[None]]:
    """``count`` answers streaming through ``s`` until ``gate`` is set."""

    async def one() -> None:
        async for _ in s.answer(_silent(gate)):
            pass

    tasks = [asyncio.create_task(one()) for _ in range(count)]
    await until(lambda: s.active_streams() == count)
    return tasks


async def test_free_slots_go_to_the_earliest_arrival_first() -> None:
    s = scheduler(ManualClock(), admit=2)
    order: list[int] = []
    release = asyncio.Event()

    async def request(number: int) -> None:
        async with s.step(number):
            order.append(number)
            await release.wait()

    first = [asyncio.create_task(request(n)) for n in (100, 101)]
    await until(lambda: len(order) == 2)
    assert order == [100, 101]  # two slots, both taken at once
    later = [asyncio.create_task(request(n)) for n in (7, 3, 9, 5)]  # arrive out of order
    await until(lambda: s.waiting_steps() == 4)
    assert order == [100, 101]
    release.set()
    await asyncio.wait_for(asyncio.gather(*first, *later), GUARD_S)
    assert order == [100, 101, 3, 5, 7, 9]
    assert settled(s)


async def test_a_waiter_cancelled_with_its_slot_passes_it_on() -> None:
    s = scheduler(ManualClock(), admit=1)
    holder = s.turn(1)
    sources: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    await holder.wait(asyncio.sleep(0))  # takes the slot for its next CPU step
    assert s.busy_slots() == 1
    waiting = [s.turn(n) for n in (2, 3)]
    tasks = [asyncio.create_task(p.wait(asyncio.sleep(0))) for p in waiting]
    await until(lambda: s.waiting_steps() == 2)
    held = asyncio.create_task(holder.wait(sources))
    await asyncio.sleep(0)  # one loop step: the holder frees its slot, number 2 gets it ...
    assert s.waiting_steps() == 1
    tasks[0].cancel()  # ... but is cancelled before it runs: number 3 gets it
    await asyncio.wait_for(tasks[1], GUARD_S)
    assert s.busy_slots() == 1 and s.waiting_steps() == 0
    held.cancel()
    for p in (holder, *waiting):
        p.done()
    assert settled(s)


async def test_hold_waits_while_a_run_prepares_in_a_busy_process() -> None:
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=5.0, quiet_streams=2)
    gate = asyncio.Event()
    run = s.turn()
    assert await s.hold(clock.now()) is False  # quiet process: never held
    streams = await _streaming(s, 3, gate)  # past quiet_streams: busy
    held = asyncio.create_task(s.hold(clock.now()))
    await until(lambda: s.held_streams() == 1)
    assert not held.done()
    run.done()  # held until the preparing run is done
    assert await asyncio.wait_for(held, GUARD_S) is True
    assert s.held_streams() == 0
    assert await s.hold(clock.now()) is False  # busy but no run preparing: not held
    gate.set()
    await asyncio.wait_for(asyncio.gather(*streams), GUARD_S)
    assert settled(s)


async def test_hold_ends_after_max_hold_when_runs_keep_preparing() -> None:
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=0.25, quiet_streams=0)
    gate = asyncio.Event()
    streams = await _streaming(s, 1, gate)
    run = s.turn()
    held = asyncio.create_task(s.hold(clock.now()))
    await until(lambda: s.held_streams() == 1 and clock.sleepers() == 1)
    clock.advance(0.2)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not held.done()  # 0.2 s of 0.25 s
    clock.advance(0.05)
    assert await asyncio.wait_for(held, GUARD_S) is True
    # a stream whose previous pull is older than max_hold_s pulls at once
    assert await s.hold(clock.now() - 1.0) is False
    run.done()
    gate.set()
    await asyncio.wait_for(asyncio.gather(*streams), GUARD_S)
    assert settled(s)


async def test_a_run_waiting_for_a_source_is_not_counted_as_preparing() -> None:
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=5.0, quiet_streams=0)
    gate = asyncio.Event()
    streams = await _streaming(s, 1, gate)
    loop = asyncio.get_running_loop()
    run = s.turn()
    held = asyncio.create_task(s.hold(clock.now()))
    await until(lambda: s.held_streams() == 1)
    search: asyncio.Future[None] = loop.create_future()  # the knowledge base searching
    sources: asyncio.Future[str] = loop.create_future()  # both branches
    waiting = asyncio.create_task(run.wait(sources, computing=search))
    await until(lambda: s.busy_slots() == 0)
    assert s.preparing_runs() == 1  # no slot, still counted: the search's CPU
    assert not held.done()
    search.set_result(None)  # only web search left: needs no CPU
    await until(lambda: s.preparing_runs() == 0)
    assert await asyncio.wait_for(held, GUARD_S) is True  # the held answer reads on
    assert await s.hold(clock.now()) is False
    sources.set_result("found")
    assert await asyncio.wait_for(waiting, GUARD_S) == "found"
    assert s.preparing_runs() == 1 and s.busy_slots() == 1  # its next CPU step
    run.done()
    assert s.preparing_runs() == 0 and s.busy_slots() == 0
    assert await run.wait(asyncio.sleep(0)) is None  # a run that ended is never counted again
    assert s.preparing_runs() == 0 and s.busy_slots() == 0
    gate.set()
    await asyncio.wait_for(asyncio.gather(*streams), GUARD_S)
    assert settled(s)


async def test_answer_closes_its_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[str]:
        try:
            for piece in ("a", "b", "c"):
                yield piece
                await asyncio.sleep(0)
        finally:
            closed.append(True)

    s = scheduler(ManualClock())
    stream = s.answer(source())
    assert await anext(stream) == "a"
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed == [True] and settled(s)


async def test_a_quiet_answer_goes_delta_by_delta_and_is_joined_once_the_process_is_busy() -> None:
    """While the process is quiet each delta goes on as it comes, never joined; once more
    than ``quiet_streams`` answers stream, the rest is joined per flush interval. Nothing
    is lost or reordered, and the source is closed."""
    clock = ManualClock()
    s = scheduler(clock, quiet_streams=1, per_stream_s=1.0, max_interval_s=1.0)
    fed: asyncio.Queue[str | None] = asyncio.Queue()
    closed: list[bool] = []

    async def source() -> AsyncIterator[str]:
        try:
            while (piece := await fed.get()) is not None:
                yield piece
        finally:
            closed.append(True)

    got: list[str] = []

    async def read() -> None:
        async for delta in s.answer(source()):
            got.append(delta)

    task = asyncio.create_task(read())
    gate = asyncio.Event()
    try:
        fed.put_nowait("a")
        await until(lambda: got == ["a"])
        fed.put_nowait("b")
        await until(lambda: got == ["a", "b"])
        assert got == ["a", "b"]  # quiet: one delta each, as they came
        others = await _streaming(s, 1, gate)  # a second answer: past quiet_streams
        fed.put_nowait("c")  # the read pending when the process got busy: at once
        await until(lambda: got == ["a", "b", "c"])
        fed.put_nowait("d")
        fed.put_nowait("e")
        await until(lambda: fed.empty() and clock.sleepers() == 1)
        assert got == ["a", "b", "c"]  # held until the flush interval has passed
        clock.advance(1.0)
        await until(lambda: got == ["a", "b", "c", "de"])  # joined
        fed.put_nowait(None)
        await asyncio.wait_for(task, GUARD_S)
    finally:
        gate.set()
        fed.put_nowait(None)
    await asyncio.wait_for(asyncio.gather(*others), GUARD_S)
    assert got == ["a", "b", "c", "de"] and closed == [True]
    assert settled(s)


async def test_paced_answers_wait_for_a_preparing_run_first_texts_pass_nothing_lost(
    standin: OpenAIStandin,
) -> None:
    """A run prepares while 12 answers start (past ``quiet_streams``): each gets its first
    text, then waits; when the run's model is called, each reads the rest, whole."""
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=5.0, per_stream_s=0.0)
    streams = s.knobs.quiet_streams + 4
    backend = s.paced(
        make_backend(Settings.from_keys(llm_base_url=standin.base_url, llm_model="m"))
    )
    standin.push(*[Script.text(ANSWER, size=1, token_delay_s=0.005) for _ in range(streams)])
    got: list[list[str]] = [[] for _ in range(streams)]
    run = s.turn()  # preparing the whole time the answers start

    async def one(deltas: list[str]) -> None:
        async for delta in backend.stream(MESSAGES):
            assert isinstance(delta, str)
            deltas.append(delta)

    try:
        tasks = [asyncio.create_task(one(d)) for d in got]
        await until(lambda: s.held_streams() == streams and all(got))
        assert all(d == [ANSWER[0]] for d in got), got  # first texts only
        run.done()
        await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    finally:
        run.done()
        await backend.aclose()
    assert all("".join(d) == ANSWER for d in got)  # nothing lost, nothing reordered
    assert settled(s)


async def test_a_held_answer_reads_once_per_max_hold_and_then_what_came_meanwhile(
    standin: OpenAIStandin,
) -> None:
    """Runs keep preparing: a held answer still reads every ``max_hold_s``, and then all
    the model sent meanwhile (``drain_s``): never starved, nothing lost."""
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=0.25, drain_s=0.01, quiet_streams=0, per_stream_s=0.0)
    backend = s.paced(
        make_backend(Settings.from_keys(llm_base_url=standin.base_url, llm_model="m"))
    )
    standin.reset()
    standin.push(Script.text(ANSWER, size=1, token_delay_s=0.0))
    run = s.turn()
    deltas: list[str] = []

    async def read() -> None:
        async for delta in backend.stream(MESSAGES):
            assert isinstance(delta, str)
            deltas.append(delta)

    task = asyncio.create_task(read())
    try:
        await until(lambda: s.held_streams() == 1 and bool(deltas))
        assert deltas == [ANSWER[0]]  # the first text, then held
        await until(lambda: standin.completed == 1 and clock.sleepers() == 1)  # all sent
        clock.advance(0.25)  # max_hold_s: the stream reads all that waited
        await asyncio.wait_for(task, GUARD_S)
    finally:
        run.done()
        await backend.aclose()
    assert "".join(deltas) == ANSWER
    assert settled(s)


async def test_the_backend_unpaced_is_never_held(standin: OpenAIStandin) -> None:
    """A follow-up's condense call goes to the backend as it is (the chatflow paces only
    the LLM node's call): in a busy process with runs preparing it is not held."""
    clock = ManualClock()
    s = scheduler(clock, max_hold_s=5.0, quiet_streams=0)
    gate = asyncio.Event()
    streams = await _streaming(s, 1, gate)
    other = s.turn()  # another request preparing the whole time
    backend = make_backend(Settings.from_keys(llm_base_url=standin.base_url, llm_model="m"))
    standin.push(Script.text(ANSWER, size=4, token_delay_s=0.005))
    try:
        parts = [d async for d in backend.stream(MESSAGES, chunks=(), query="")]
    finally:
        other.done()
        await backend.aclose()
    assert "".join(str(p) for p in parts) == ANSWER and s.held_streams() == 0
    gate.set()
    await asyncio.wait_for(asyncio.gather(*streams), GUARD_S)
    assert settled(s)


async def test_verification_past_its_time_limit_is_left_out() -> None:
    import threading

    clock = ManualClock()
    s = scheduler(clock, verify_timeout_s=30.0)
    release = threading.Event()

    def stuck(answer: str) -> str:
        release.wait(GUARD_S)
        return answer

    try:
        assert await s.verify(str.upper, "ok") == "OK"
        verifying = asyncio.create_task(s.verify(stuck, "late"))
        await until(lambda: clock.sleepers() == 1)
        assert not verifying.done()
        clock.advance(30.0)
        assert await asyncio.wait_for(verifying, GUARD_S) is None
        with pytest.raises(ZeroDivisionError):
            await s.verify(lambda: 1 / 0)
    finally:
        release.set()
        s.close()
