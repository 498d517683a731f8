"""Limits on a model call: total and no-text deadlines, answer and stream-line caps,
against the OpenAI stand-in (a real local HTTP server). The deadlines run on a
:class:`~gcite.testing.clock.ManualClock` the test moves: none fires, or fails to, because
of the machine's speed."""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gcite.config import Settings
from gcite.errors import LLMError
from gcite.generate.factory import make_backend
from gcite.generate.limits import LimitedBackend, Limits, capped_lines
from gcite.testing.clock import ManualClock, until
from support.openai_standin import OpenAIStandin, Script

MESSAGES = [{"role": "user", "content": "问题"}]


@pytest.fixture(scope="module")
def standin() -> Iterator[OpenAIStandin]:
    with OpenAIStandin() as server:
        yield server


def _backend(
    standin: OpenAIStandin, clock: ManualClock | None = None, **limits: float
) -> LimitedBackend:
    settings = Settings.from_keys(
        llm_base_url=standin.base_url, llm_model="m", llm_timeout_s=30, **limits
    )
    backend = make_backend(settings)
    assert isinstance(backend, LimitedBackend)
    if clock is not None:  # the deadlines on a clock the test moves
        return LimitedBackend(backend.inner, backend.limits, clock)
    return backend


async def _drain(backend: LimitedBackend, into: list[str]) -> None:
    async for delta in backend.stream(MESSAGES, chunks=[], query="q"):
        into.append(delta)


def _empty_delta() -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


async def _still_running(task: asyncio.Task[None]) -> bool:
    for _ in range(20):  # let whatever the clock woke run
        await asyncio.sleep(0)
    return not task.done()


@pytest.mark.parametrize(
    "trickle",
    [b": keep-alive\n\n", _empty_delta(), b"event: ping\n\n"],
    ids=["comment", "empty", "event"],
)
async def test_no_text_deadline_ends_a_trickling_stream(
    standin: OpenAIStandin, trickle: bytes
) -> None:
    standin.reset()
    standin.push(Script(deltas=["开头"], trickle=trickle, trickle_interval_s=0.05))
    clock = ManualClock()
    backend = _backend(standin, clock, llm_idle_timeout_s=0.5, llm_total_timeout_s=30)
    received: list[str] = []
    task = asyncio.ensure_future(_drain(backend, received))
    # the first text arrived and the stream trickles: the read after it waits on the clock
    await until(lambda: (received == ["开头"] and clock.sleepers() == 1) or task.done())
    clock.advance(0.4)
    assert await _still_running(task)  # never before the deadline
    clock.advance(0.1)
    with pytest.raises(LLMError, match=r"0\.5 秒内没有返回新的回答文字"):
        await asyncio.wait_for(task, timeout=60)  # a hang guard
    assert received == ["开头"]
    assert standin.wait_for_disconnect(1), "the model call was not closed"
    await backend.aclose()


async def test_total_deadline_ends_a_slow_steady_stream(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script.text("一" * 2000, size=1, token_delay_s=0.05))  # 100 s in all
    clock = ManualClock()
    backend = _backend(standin, clock, llm_idle_timeout_s=1.0, llm_total_timeout_s=0.6)
    received: list[str] = []
    task = asyncio.ensure_future(_drain(backend, received))
    await until(lambda: len(received) >= 3 or task.done())
    clock.advance(0.5)  # each delta restarts the no-text wait, not the total one
    assert await _still_running(task)
    clock.advance(0.1)
    with pytest.raises(LLMError, match=r"总时限 0\.6 秒"):
        await asyncio.wait_for(task, timeout=60)  # a hang guard
    assert 3 <= len(received) < 2000  # cut off
    assert standin.wait_for_disconnect(1)
    await backend.aclose()


async def test_answer_size_cap(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script.text("长" * 500, size=7))
    backend = _backend(standin, ManualClock(), max_answer_chars=100)  # no deadline fires
    received: list[str] = []
    with pytest.raises(LLMError, match="长度上限 100"):
        await _drain(backend, received)
    assert len("".join(received)) <= 100
    await backend.aclose()


async def test_endless_stream_line_is_capped_without_holding_it(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script(deltas=["开头"], endless_line=True))
    backend = _backend(standin, ManualClock(), max_stream_line_bytes=2_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    received: list[str] = []
    with pytest.raises(LLMError, match="超过上限 2000000 字节"):
        await _drain(backend, received)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, grown_mb
    assert received == ["开头"]
    assert standin.wait_for_disconnect(1)  # a hang guard
    await backend.aclose()


async def test_within_limits_nothing_changes(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script.text("答案[C:1]。", size=2, token_delay_s=0.01))
    # the clock stands still: a slow machine never reaches a deadline
    backend = _backend(standin, ManualClock(), llm_idle_timeout_s=2, llm_total_timeout_s=10)
    received: list[str] = []
    await asyncio.wait_for(_drain(backend, received), timeout=60)  # a hang guard
    assert "".join(received) == "答案[C:1]。"
    await backend.aclose()


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _lines(*parts: bytes, cap: int = 100) -> list[str]:
    return [line async for line in capped_lines(_chunks(*parts), cap)]


async def test_capped_lines_splits_every_line_ending_across_chunks() -> None:
    assert await _lines(b"a\nb\r\nc\rd", b"e\r", b"\nf\n\n") == ["a", "b", "c", "de", "f", ""]
    assert await _lines("数据".encode()[:4], "数据".encode()[4:] + b"\n") == ["数据"]
    assert await _lines(b"x" * 100 + b"\n") == ["x" * 100]
    with pytest.raises(LLMError):
        await _lines(b"x" * 101 + b"\n")
    with pytest.raises(LLMError):
        await _lines(b"x" * 60, b"x" * 60)
    assert await _lines(b"x" * 500, cap=0) == ["x" * 500]


async def test_limits_from_settings() -> None:
    limits = Limits.from_settings(
        Settings.from_keys(
            llm_total_timeout_s=9, llm_idle_timeout_s=3, max_answer_chars=7, max_stream_line_bytes=5
        )
    )
    assert limits == Limits(total_s=9, idle_s=3, max_chars=7, max_line_bytes=5)


async def test_a_stop_during_a_read_is_a_cancellation_not_a_deadline(
    standin: OpenAIStandin,
) -> None:
    standin.reset()
    standin.push(Script(deltas=["开头"], hang=False, trickle=b": keep-alive\n\n"))
    clock = ManualClock()
    backend = _backend(standin, clock, llm_idle_timeout_s=0.5, llm_total_timeout_s=30)
    received: list[str] = []
    task = asyncio.ensure_future(_drain(backend, received))
    await until(lambda: (received == ["开头"] and clock.sleepers() == 1) or task.done())
    task.cancel()  # a stop, before any deadline
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=60)  # a hang guard
    assert standin.wait_for_disconnect(1), "the model call was not closed"
    clock.advance(1.0)  # the watchdog is gone: nothing left to fire
    assert clock.sleepers() == 0
    await backend.aclose()


async def test_reads_take_no_task_of_their_own(standin: OpenAIStandin) -> None:
    standin.reset()
    standin.push(Script.text("一二三四五六七八九十" * 3, size=1, token_delay_s=0.001))
    backend = _backend(standin, ManualClock(), llm_idle_timeout_s=2, llm_total_timeout_s=10)
    loop = asyncio.get_running_loop()
    created: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        created.append(coro)
        if factory is not None:
            return factory(loop, coro, **kwargs)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(counting)
    try:
        deltas = [d async for d in backend.stream(MESSAGES, chunks=[], query="q")]
    finally:
        loop.set_task_factory(factory)
    assert "".join(deltas) == "一二三四五六七八九十" * 3
    # one watchdog for the whole stream (the HTTP client may start its own), not per read
    ours = [c for c in created if "_watch" in getattr(c, "__qualname__", "")]
    assert len(ours) == 1
    assert len(created) < 10, created
    await backend.aclose()


async def test_total_deadline_passed_between_reads_fails_the_next_read(
    standin: OpenAIStandin,
) -> None:
    standin.reset()
    standin.push(Script.text("一二三四五六", size=1))
    clock = ManualClock()
    backend = _backend(standin, clock, llm_idle_timeout_s=5, llm_total_timeout_s=1)
    stream = backend.stream(MESSAGES, chunks=[], query="q")
    assert await anext(stream) == "一"
    clock.advance(2.0)  # the consumer took its time: no read was pending
    with pytest.raises(LLMError, match=r"总时限 1 秒"):
        await asyncio.wait_for(anext(stream), timeout=60)  # a hang guard
    await stream.aclose()
    await backend.aclose()


class _OddStream:
    """A model backend (in process, like a local model) whose stream yields one piece,
    then waits for more and, when its read is cancelled, does what ``on_cancel`` says
    instead of re-raising the cancellation: ``"return"`` ends the stream, ``"raise"``
    raises :class:`ValueError`. ``hook`` runs first (a stop arriving at that moment)."""

    name = "odd"

    def __init__(self, on_cancel: str, hook: Any = None) -> None:
        self.on_cancel = on_cancel
        self.hook = hook
        self.cancelled = 0

    def warm_up(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def stream(
        self, messages: Any, *, chunks: Any, query: str, usage: Any = None
    ) -> AsyncIterator[str]:
        yield "开头"
        try:
            await asyncio.Event().wait()  # a model that never sends the rest
        except asyncio.CancelledError:
            self.cancelled += 1
            if self.hook is not None:
                self.hook()
            if self.on_cancel == "raise":
                raise ValueError("清理失败") from None
            return
        yield "不该到这里"


async def _read_until_timeout(
    backend: LimitedBackend, received: list[str]
) -> tuple[BaseException | None, int]:
    """The error the stream ended with and the task's pending cancellations after it."""
    error: BaseException | None = None
    try:
        await _drain(backend, received)
    except Exception as exc:
        error = exc
    task = asyncio.current_task()
    assert task is not None
    return error, task.cancelling()


@pytest.mark.parametrize("on_cancel", ["return", "raise"])
async def test_deadline_is_an_error_whatever_the_stream_does_when_cancelled(
    on_cancel: str,
) -> None:
    inner = _OddStream(on_cancel)
    clock = ManualClock()
    backend = LimitedBackend(inner, Limits(total_s=30, idle_s=0.5), clock)  # type: ignore[arg-type]
    received: list[str] = []
    task = asyncio.ensure_future(_read_until_timeout(backend, received))
    await until(lambda: (received == ["开头"] and clock.sleepers() == 1) or task.done())
    clock.advance(1.0)  # past the no-text deadline while the read is pending
    error, cancelling = await asyncio.wait_for(task, timeout=60)  # a hang guard
    assert inner.cancelled == 1
    assert isinstance(error, LLMError), error  # not a cut answer, not the ValueError
    assert "0.5 秒内没有返回新的回答文字" in str(error)
    assert cancelling == 0  # the watchdog's cancellation was taken back
    assert clock.sleepers() == 0


@pytest.mark.parametrize("on_cancel", ["return", "raise"])
async def test_a_stop_together_with_a_fired_deadline_is_a_cancellation(on_cancel: str) -> None:
    clock = ManualClock()
    tasks: list[asyncio.Task[None]] = []
    inner = _OddStream(on_cancel, hook=lambda: tasks[0].cancel())  # the stop, same moment
    backend = LimitedBackend(inner, Limits(total_s=30, idle_s=0.5), clock)  # type: ignore[arg-type]
    received: list[str] = []
    tasks.append(asyncio.ensure_future(_drain(backend, received)))
    await until(lambda: (received == ["开头"] and clock.sleepers() == 1) or tasks[0].done())
    clock.advance(1.0)  # the watchdog fires; the stop arrives while the stream handles it
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(tasks[0], timeout=60)  # a hang guard
    assert inner.cancelled == 1
    assert tasks[0].cancelled()
