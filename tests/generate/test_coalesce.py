"""Fewer, longer deltas under load (gcite.generate.coalesce, applied by the process's
scheduler): the pure interval and join, then the scheduler's answer stream against the
OpenAI stand-in (a real local HTTP server) through the real backend, and with plain
async sources for ordering, errors and closing. Time is a hand-moved clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.config import Settings
from gcite.errors import LLMError
from gcite.generate.backends import Reasoning, WrappedBackend
from gcite.generate.coalesce import flush_interval, join
from gcite.generate.factory import make_backend
from gcite.generate.fallback import FellBack
from support.clock import ManualClock, until
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "user", "content": "问题"}]
ANSWER = "依据第二十三条[C:1]，公用消防设施的检测维修费用由业主共同承担[C:2]。"
GUARD_S = 120.0  # hang guard only (a loaded machine may need tens of seconds)


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def test_flush_interval_is_zero_when_quiet_and_grows_to_its_cap() -> None:
    knobs = {"quiet": 8, "per_stream_s": 0.002, "max_interval_s": 0.1}
    assert flush_interval(0, **knobs) == 0.0  # type: ignore[arg-type]
    assert flush_interval(8, **knobs) == 0.0  # type: ignore[arg-type]
    assert flush_interval(9, **knobs) == pytest.approx(9 * 0.002)  # type: ignore[arg-type]
    assert flush_interval(100_000, **knobs) == 0.1  # type: ignore[arg-type]


def test_join_keeps_order_and_kinds_apart() -> None:
    notice = FellBack("extractive", "模型服务不可用")
    items = ["a", "b", Reasoning("r1"), Reasoning("r2"), "c", notice, "d", "e"]
    assert join(items) == ["ab", Reasoning("r1r2"), "c", notice, "de"]
    assert join([]) == []


async def _fed(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    """A model whose every delta the test sends (None: the end)."""
    while (item := await queue.get()) is not None:
        yield item


async def test_one_stream_gets_every_delta_at_once() -> None:
    s = Scheduler(Knobs(), ManualClock())
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    got: list[str] = []

    async def read() -> None:
        async for delta in s.answer(_fed(queue)):
            got.append(delta)

    reader = asyncio.create_task(read())
    for i, piece in enumerate(ANSWER):
        queue.put_nowait(piece)
        await until(lambda i=i: len(got) == i + 1)  # quiet: handed on alone, at once
    queue.put_nowait(None)
    await asyncio.wait_for(reader, GUARD_S)
    assert got == list(ANSWER)  # nothing joined
    assert s.active_streams() == 0


async def test_a_busy_process_joins_what_came_within_one_flush_interval() -> None:
    clock = ManualClock()
    s = Scheduler(Knobs(quiet_streams=0, per_stream_s=0.05, max_interval_s=0.1), clock)
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    got: list[str] = []

    async def read() -> None:
        async for delta in s.answer(_fed(queue)):
            got.append(delta)

    reader = asyncio.create_task(read())
    queue.put_nowait("一")
    await until(lambda: got == ["一"])  # the first delta goes on at once
    for piece in "二三四":
        queue.put_nowait(piece)
    await until(lambda: clock.sleepers() == 1 and queue.empty())  # waits for its interval
    assert got == ["一"]
    clock.advance(0.05)
    await until(lambda: len(got) == 2)
    assert got == ["一", "二三四"]  # joined
    queue.put_nowait(None)
    await asyncio.wait_for(reader, GUARD_S)
    assert s.active_streams() == 0


class _Ends(WrappedBackend):
    """Counts the model streams read to their end (by the scheduler's readers)."""

    ended = 0

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for delta in self.inner.stream(messages, **kwargs):
            yield delta
        self.ended += 1


async def test_many_streams_get_fewer_longer_deltas_and_the_same_text(
    standin: OpenAIStandin,
) -> None:
    """24 answers through the real backend: each first delta goes on at once; the rest,
    sent by the model within one flush interval, comes as one more delta, whole."""
    clock = ManualClock()
    s = Scheduler(Knobs(), clock)
    streams = 3 * s.knobs.quiet_streams
    model = _Ends(make_backend(Settings.from_keys(llm_base_url=standin.base_url, llm_model="m")))
    backend = s.paced(model)
    standin.reset()
    standin.push(*[Script.text(ANSWER, size=1, token_delay_s=0.002) for _ in range(streams)])
    answers: list[list[str]] = [[] for _ in range(streams)]

    async def one(deltas: list[str]) -> None:
        async for delta in backend.stream(MESSAGES):
            assert isinstance(delta, str)
            deltas.append(delta)

    try:
        tasks = [asyncio.create_task(one(d)) for d in answers]
        # every model stream was read to its end here (not only sent by the stand-in) and
        # every first delta went on: the clock never moved; each stream waits for its next
        # flush, or had the rest at once as its model's stream had ended by then
        await until(
            lambda: (
                model.ended == streams
                and all(answers)
                and clock.sleepers() + sum(t.done() for t in tasks) == streams
            )
        )
        assert all(len(d) == 1 or t.done() for d, t in zip(answers, tasks, strict=True))
        clock.advance(s.knobs.max_interval_s)
        await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    finally:
        await backend.aclose()
    assert all("".join(d) == ANSWER for d in answers)
    assert all(len(d) <= 2 for d in answers)  # 39 tokens in at most two deltas
    assert s.active_streams() == 0


async def _source(log: list[str], fail: bool = False) -> AsyncIterator[str]:
    try:
        for piece in ("一", "二", "三"):
            yield piece
            await asyncio.sleep(0)
        if fail:
            raise LLMError("模型服务连接中断")
        await asyncio.Event().wait()  # a model that sends nothing more
    finally:
        log.append("closed")


async def test_an_error_comes_after_the_text_before_it() -> None:
    log: list[str] = []
    got: list[str] = []
    s = Scheduler(Knobs(), ManualClock())
    with pytest.raises(LLMError, match="连接中断"):
        async for delta in s.answer(_source(log, fail=True)):
            got.append(delta)
    assert "".join(got) == "一二三"
    assert log == ["closed"]


async def test_closing_early_closes_the_model_stream() -> None:
    log: list[str] = []
    s = Scheduler(Knobs(), ManualClock())
    stream = s.answer(_source(log))
    assert await anext(stream) == "一"
    await stream.aclose()  # type: ignore[attr-defined]
    assert log == ["closed"]
    assert s.active_streams() == 0


async def test_cancelling_the_reader_closes_the_model_stream() -> None:
    log: list[str] = []
    s = Scheduler(Knobs(), ManualClock())
    got: list[str] = []

    async def consume() -> None:
        async for delta in s.answer(_source(log)):
            got.append(delta)

    task = asyncio.create_task(consume())
    await until(lambda: "".join(got) == "一二三")  # the source now waits for more
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["closed"]
    assert s.active_streams() == 0
