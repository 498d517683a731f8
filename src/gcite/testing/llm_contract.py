"""The LLMBackend contract: one suite every model backend passes (haystack style).

Subclass :class:`LLMBackendContract` in a pytest module (pytest-asyncio in auto mode)
and provide the ``backend`` fixture: a fresh backend that answers :data:`QUERY` from
:data:`CHUNKS` (a model scripted to say :data:`ANSWER`), closed by the fixture.

A backend that calls an upstream service (a model API) also overrides two fixtures,
both defined here as "this backend has no upstream" (the tests then skip):

- ``failing_backend``: a factory ``(failure) -> backend`` whose next call meets
  ``failure``, one of :data:`FAILURES`; every one must surface as
  :class:`gcite.errors.LLMError` (no SDK or transport exception escapes);
- ``stalled_backend``: ``(backend, upstream_closed)``: the backend's upstream sends
  some text and then nothing; ``upstream_closed(timeout_s) -> bool`` tells whether the
  upstream saw the call's connection closed within ``timeout_s`` seconds (a hang guard).
  Cancelling the task consuming the stream must close the upstream call.

Needs pytest (the ``testing`` extra).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.chatflow.seams import LLMBackend
from gcite.errors import LLMError
from gcite.generate.backends import Reasoning, Usage, aclose_stream
from gcite.generate.prompt import build_messages
from gcite.merge import merge_chunks
from gcite.stream.parser import parse_all
from gcite.testing.clock import ManualClock, until

HANG_GUARD_S = 120.0
"""Seconds a wait may take before the test fails as hung (never a measure of speed)."""
QUERY = "电梯多久维保一次？"
RAG = [
    {
        "content": "电梯每十五日至少进行一次清洁、润滑、调整和检查。维保记录由运维工程师签字。",
        "title": "电梯维保规程",
        "metadata": {
            "_source": "knowledge",
            "document_id": "d-1",
            "document_name": "elevator.txt",
            "dataset_name": "园区制度库",
            "segment_id": "s-1",
            "segment_position": 1,
            "score": 0.9,
            "doc_metadata": {"document_title": "电梯维保规程"},
        },
    }
]
MERGED = merge_chunks(RAG, [])
CHUNKS: list[dict[str, Any]] = [dict(c) for c in MERGED["chunk_metadata"]]
MESSAGES = build_messages(QUERY, MERGED["formatted_chunks"], [], [], None)
ANSWER = "电梯每十五日至少维保一次[C:1]。"
"""What a model is scripted to answer (the extractive backend finds it by itself)."""


FAILURES = ("unreachable", "auth_error", "server_error", "dropped", "malformed", "timeout")
"""What an upstream can do wrong: nothing listens; it refuses the key (HTTP 401); it fails
(HTTP 5xx); it drops the connection mid-answer; it sends data that cannot be parsed; it
stays silent beyond the backend's timeout."""

FailingBackend = Callable[[str], Any]
UpstreamClosed = Callable[[float], bool]


async def answer(backend: Any, usage: Usage | None = None) -> list[Any]:
    stream = backend.stream(MESSAGES, chunks=CHUNKS, query=QUERY, usage=usage)
    return [delta async for delta in stream]


def text_of(deltas: list[Any]) -> str:
    return "".join(d for d in deltas if isinstance(d, str))


def busy_scheduler() -> tuple[Scheduler, ManualClock]:
    """A scheduler in a busy process (every answer counts), on a hand-moved clock."""
    clock = ManualClock()
    return Scheduler(Knobs(quiet_streams=0, per_stream_s=0.0, max_hold_s=5.0), clock), clock


class LLMBackendContract:
    """Behaviour of :class:`gcite.chatflow.seams.LLMBackend`, whatever the model."""

    @pytest.fixture
    def failing_backend(self) -> FailingBackend:
        pytest.skip("this backend calls no upstream service")

    @pytest.fixture
    def stalled_backend(self) -> tuple[Any, UpstreamClosed]:
        pytest.skip("this backend calls no upstream service")

    # ----------------------------------------------------------------- the answer

    def test_satisfies_the_protocol(self, backend: Any) -> None:
        assert isinstance(backend, LLMBackend)
        assert isinstance(backend.name, str) and backend.name

    async def test_streams_text_deltas_that_cite_the_chunks(self, backend: Any) -> None:
        deltas = await answer(backend)
        texts = [d for d in deltas if not isinstance(d, Reasoning)]
        assert texts and all(isinstance(d, str) for d in texts)
        parsed = parse_all("".join(texts), [str(c["id"]) for c in CHUNKS])
        assert [raw for raw, _ in parsed.citations] == ["1"]
        assert parsed.invalid == []
        assert "电梯" in "".join(texts)

    async def test_fills_in_usage(self, backend: Any) -> None:
        usage = Usage()
        await answer(backend, usage)
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    async def test_closing_the_stream_early_is_clean(self, backend: Any) -> None:
        stream = backend.stream(MESSAGES, chunks=CHUNKS, query=QUERY)
        first = await anext(stream)
        assert first
        await stream.aclose()

    # ----------------------------------------------------------------- lifecycle

    async def test_lifecycle(self, backend: Any) -> None:
        backend.warm_up()
        await backend.aclose()
        await backend.aclose()

    # ----------------------------------------------------------------- failures

    @pytest.mark.parametrize("failure", FAILURES)
    async def test_every_upstream_failure_is_an_llm_error(
        self, failing_backend: FailingBackend, failure: str
    ) -> None:
        backend = failing_backend(failure)
        try:
            with pytest.raises(LLMError):
                await answer(backend)
        finally:
            await backend.aclose()

    # ----------------------------------------------------------------- pacing
    # The chatflow wraps every backend in its process scheduler's PacedBackend: the
    # backend must stream correctly when its next delta is pulled only later (a held
    # answer), and close cleanly while held.

    async def test_paced_the_answer_waits_for_a_preparing_run_and_loses_nothing(
        self, backend: Any
    ) -> None:
        expected = text_of(await answer(backend))
        scheduler, _clock = busy_scheduler()
        run = scheduler.turn()  # another request prepares
        stream = scheduler.paced(backend).stream(MESSAGES, chunks=CHUNKS, query=QUERY)
        got = [await anext(stream)]  # the first text is never held
        following = asyncio.ensure_future(anext(stream, None))
        await until(lambda: scheduler.held_streams() == 1)
        assert not following.done()
        run.done()  # its model is called: the answer reads on
        rest = await asyncio.wait_for(following, HANG_GUARD_S)
        if rest is not None:
            got += [rest, *[d async for d in stream]]
        assert text_of(got) == expected
        assert scheduler.active_streams() == 0 and scheduler.held_streams() == 0

    async def test_paced_a_held_answer_reads_on_after_max_hold_and_closes_cleanly(
        self, backend: Any
    ) -> None:
        scheduler, clock = busy_scheduler()
        run = scheduler.turn()
        try:
            stream = scheduler.paced(backend).stream(MESSAGES, chunks=CHUNKS, query=QUERY)
            assert await anext(stream)
            following = asyncio.ensure_future(anext(stream, None))
            await until(lambda: scheduler.held_streams() == 1 and clock.sleepers() == 1)
            clock.advance(5.0)  # max_hold_s: read on although the run still prepares
            await asyncio.wait_for(following, HANG_GUARD_S)
            await aclose_stream(stream)  # closes the model call
            assert scheduler.active_streams() == 0 and scheduler.held_streams() == 0
        finally:
            run.done()

    # ----------------------------------------------------------------- cancellation

    async def test_cancelling_the_consumer_closes_the_upstream_call(
        self, stalled_backend: tuple[Any, UpstreamClosed]
    ) -> None:
        backend, upstream_closed = stalled_backend
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in backend.stream(MESSAGES, chunks=CHUNKS, query=QUERY):
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), HANG_GUARD_S)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(upstream_closed, HANG_GUARD_S)
        await backend.aclose()


__all__ = [
    "ANSWER",
    "CHUNKS",
    "FAILURES",
    "MESSAGES",
    "QUERY",
    "FailingBackend",
    "LLMBackendContract",
    "UpstreamClosed",
    "answer",
]
