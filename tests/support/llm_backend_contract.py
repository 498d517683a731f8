"""The LLMBackend contract: one suite both backends pass (haystack style).

A test module subclasses :class:`LLMBackendContract` and provides ``backend`` (a fresh
backend that answers :data:`QUERY` from :data:`CHUNKS`, closed by the fixture). The
suite includes pacing: the chatflow wraps every backend in its process scheduler's
:class:`~gcite.chatflow.scheduler.PacedBackend`, and the backend must stream correctly
when its next delta is pulled only later (a held answer), and close cleanly while held.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.chatflow.seams import LLMBackend
from gcite.generate.backends import Reasoning, Usage
from gcite.generate.prompt import build_messages
from gcite.merge import merge_chunks
from gcite.stream.parser import parse_all
from support.clock import ManualClock, until

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

    async def test_lifecycle(self, backend: Any) -> None:
        backend.warm_up()
        await backend.aclose()
        await backend.aclose()

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
        rest = await asyncio.wait_for(following, 20)
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
            await asyncio.wait_for(following, 20)
            await stream.aclose()  # closes the model call
            assert scheduler.active_streams() == 0 and scheduler.held_streams() == 0
        finally:
            run.done()
