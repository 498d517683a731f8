"""Fewer, longer deltas under load (generate/coalesce.py, issue 19 item 3): against the
OpenAI stand-in (a real local HTTP server) through the real backend, and with plain
async generators for ordering, errors and closing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from gcite.config import Settings
from gcite.errors import LLMError
from gcite.generate import coalesce
from gcite.generate.backends import Reasoning
from gcite.generate.coalesce import coalesced, flush_interval, join
from gcite.generate.factory import make_backend
from gcite.generate.fallback import FellBack
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "user", "content": "问题"}]
ANSWER = "依据第二十三条[C:1]，公用消防设施的检测维修费用由业主共同承担[C:2]。"


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def test_flush_interval_is_zero_when_quiet_and_grows_to_its_cap() -> None:
    assert flush_interval(0) == 0.0
    assert flush_interval(coalesce.QUIET_STREAMS) == 0.0
    busy = coalesce.QUIET_STREAMS + 1
    assert flush_interval(busy) == pytest.approx(busy * coalesce.PER_STREAM_S)
    assert flush_interval(100_000) == coalesce.MAX_INTERVAL_S


def test_join_keeps_order_and_kinds_apart() -> None:
    notice = FellBack("extractive", "模型服务不可用")
    items = ["a", "b", Reasoning("r1"), Reasoning("r2"), "c", notice, "d", "e"]
    assert join(items) == ["ab", Reasoning("r1r2"), "c", notice, "de"]
    assert join([]) == []


async def _answers(standin: OpenAIStandin, streams: int) -> list[list[str]]:
    settings = Settings.from_keys(llm_base_url=standin.base_url, llm_model="m", llm_timeout_s=30)
    backend = make_backend(settings)
    standin.push(*[Script.text(ANSWER, size=1, token_delay_s=0.01) for _ in range(streams)])

    async def one() -> list[str]:
        return [d async for d in coalesced(backend.stream(MESSAGES)) if isinstance(d, str)]

    try:
        return await asyncio.gather(*(one() for _ in range(streams)))
    finally:
        await backend.aclose()


async def test_one_stream_gets_every_delta_at_once(standin: OpenAIStandin) -> None:
    [deltas] = await _answers(standin, 1)
    assert "".join(deltas) == ANSWER
    assert len(deltas) == len(ANSWER)  # quiet: nothing joined


async def test_many_streams_get_fewer_longer_deltas_and_the_same_text(
    standin: OpenAIStandin,
) -> None:
    streams = 3 * coalesce.QUIET_STREAMS  # flush every 48 ms, tokens 10 ms apart
    answers = await _answers(standin, streams)
    assert all("".join(d) == ANSWER for d in answers)
    firsts = sorted(len(d[0]) for d in answers)  # the first delta is not held back
    assert firsts[len(firsts) // 2] <= 2, firsts
    counts = sorted(len(d) for d in answers)
    assert counts[len(counts) // 2] <= len(ANSWER) // 2, counts
    assert coalesce.active_streams() == 0


async def _source(log: list[str], fail: bool = False) -> AsyncIterator[str]:
    try:
        for piece in ("一", "二", "三"):
            yield piece
            await asyncio.sleep(0.01)
        if fail:
            raise LLMError("模型服务连接中断")
        await asyncio.sleep(10)
    finally:
        log.append("closed")


async def test_an_error_comes_after_the_text_before_it() -> None:
    log: list[str] = []
    got: list[str] = []
    with pytest.raises(LLMError, match="连接中断"):
        async for delta in coalesced(_source(log, fail=True)):
            got.append(delta)
    assert "".join(got) == "一二三"
    assert log == ["closed"]


async def test_closing_early_closes_the_model_stream() -> None:
    log: list[str] = []
    stream = coalesced(_source(log))
    assert await anext(stream) == "一"
    await stream.aclose()
    assert log == ["closed"]
    assert coalesce.active_streams() == 0


async def test_cancelling_the_reader_closes_the_model_stream() -> None:
    log: list[str] = []

    async def consume() -> None:
        async for _ in coalesced(_source(log)):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)  # the source now waits inside its long sleep
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["closed"]
    assert coalesce.active_streams() == 0
