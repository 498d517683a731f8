"""The run handle without HTTP: one run's lifetime and its outcome stored exactly once.

Real conversation store (SQLite) and real chatflow; the model is a slow scripted stand-in
(no LLM API runs here), so a test can stop or abandon a run in the middle of its answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gcite.chatflow import ChatRun, Deps, Turn
from gcite.chatflow.scheduler import Knobs, Scheduler
from gcite.config import Settings
from gcite.dify.wire import DifyStream, Envelope
from gcite.generate.backends import BackendLifecycle, Usage
from gcite.service.runs import ABANDONED, RunHandle, RunRegistry
from gcite.service.store import ConversationStore
from support.clock import ManualClock, until
from support.web_standin import PayloadWeb

DELTAS = ["第一句。", "第二句。", "第三句。", "第四句。"]
GUARD_S = 120.0  # hang guard only (a loaded machine may need tens of seconds)


class Slow(BackendLifecycle):
    """A model stand-in: fixed deltas, ``delay`` seconds apart; counts closed streams."""

    name = "slow"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.closed = 0

    async def stream(
        self,
        messages: Sequence[dict[str, str]],
        *,
        chunks: Sequence[dict[str, Any]],
        query: str,
        usage: Usage | None = None,
    ) -> AsyncIterator[str]:
        try:
            for delta in DELTAS:
                await asyncio.sleep(self.delay)
                if usage is not None:
                    usage.completion_tokens += 1
                yield delta
        finally:
            self.closed += 1


class CountingStore(ConversationStore):
    """The real store, counting how often an outcome is written."""

    finished = 0

    def finish_message(self, message_id: str, **kw: Any) -> None:
        type(self).finished += 1
        super().finish_message(message_id, **kw)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    CountingStore.finished = 0
    opened = CountingStore(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    yield opened
    opened.close()


def handle_for(
    store: ConversationStore,
    backend: Slow,
    verifier: Any = None,
    web: Any = None,
    scheduler: Scheduler | None = None,
) -> tuple[RunHandle, str]:
    record = store.start_message(user="owner", query="问题", inputs={})
    deps = Deps(
        settings=Settings(),
        backend=backend,
        get_store=None,
        verifier=verifier,
        web_source=web,
        scheduler=scheduler or Scheduler(),
    )
    env = Envelope("task", record.id, record.conversation_id, record.created_at, user="u")
    handle = RunHandle(
        ChatRun(Turn("问题"), deps),
        DifyStream(env),
        conversations=store,
        message_id=record.id,
        ping_interval=0.02,
    )
    return handle, record.id


def events_of(frames: list[bytes]) -> list[str]:
    out = []
    for frame in b"".join(frames).split(b"\n\n"):
        if frame.startswith(b"data: "):
            out.append(json.loads(frame[6:])["event"])
        elif frame:
            out.append(frame.decode().removeprefix("event: "))
    return out


class Pausing(Slow):
    """:class:`Slow` that, after its first delta, says nothing until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.go = asyncio.Event()

    async def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> AsyncIterator[str]:
        async for delta in super().stream(messages, **kw):
            yield delta
            await self.go.wait()


async def test_a_run_to_the_end_is_stored_once_with_pings(store: CountingStore) -> None:
    backend = Pausing()
    handle, message_id = handle_for(store, backend)
    frames = []
    async for frame in handle.frames("问题"):
        frames.append(frame)
        if frame.startswith(b"event: ping"):
            backend.go.set()  # the model's silence was filled with a ping: answer on
    events = events_of(frames)
    assert events[0] == "workflow_started" and events[-2:] == ["workflow_finished", "message_end"]
    assert "ping" in events
    record = store.get_message(message_id)
    assert record is not None and record.status == "normal" and record.answer == "".join(DELTAS)
    assert CountingStore.finished == 1


async def test_stop_ends_the_stream_and_stores_the_partial_answer_once(
    store: CountingStore,
) -> None:
    backend = Slow(0.1)
    handle, message_id = handle_for(store, backend)
    runs = RunRegistry()
    runs.add("task", "owner", handle)
    frames: list[bytes] = []
    async for frame in handle.frames("问题"):
        frames.append(frame)
        if b'"event":"message"' in frame:
            runs.stop("task", "someone else")  # a wrong owner does nothing
            runs.stop("task", "owner")
    events = events_of(frames)
    assert events[-2:] == ["workflow_finished", "message_end"]  # Dify's order for a stop too
    assert b'"status":"stopped"' in frames[-1]  # one chunk: workflow_finished, message_end
    record = store.get_message(message_id)
    assert record is not None and record.status == "stopped"
    assert record.answer and record.answer != "".join(DELTAS)
    assert CountingStore.finished == 1 and backend.closed == 1
    runs.stop("task", "owner")  # after the end: nothing happens
    assert CountingStore.finished == 1


async def test_a_client_that_goes_away_cancels_the_model_and_is_stored_once(
    store: CountingStore,
) -> None:
    backend = Slow(0.1)
    handle, message_id = handle_for(store, backend)
    stream = handle.frames("问题")
    async for frame in stream:
        if b'"event":"message"' in frame:
            break
    await stream.aclose()  # what Starlette does when the client disconnects
    await until(lambda: CountingStore.finished > 0, GUARD_S)
    record = store.get_message(message_id)
    assert record is not None and record.status == "stopped" and record.error == ABANDONED
    assert record.answer == DELTAS[0]
    assert CountingStore.finished == 1 and backend.closed == 1


async def test_blocking_run_and_a_blocking_client_that_disconnects(store: CountingStore) -> None:
    handle, message_id = handle_for(store, Slow(0.0))
    outcome = await handle.result(None)
    assert outcome.summary.answer == "".join(DELTAS) and not outcome.abandoned
    assert outcome.failure is None and not outcome.crashed

    backend = Slow(0.2)
    handle, message_id = handle_for(store, backend)
    outcome = await handle.result(lambda: asyncio.sleep(0.1))
    assert outcome.abandoned
    record = store.get_message(message_id)
    assert record is not None and record.status == "stopped" and record.error == ABANDONED
    assert CountingStore.finished == 2 and backend.closed == 1


@pytest.mark.parametrize("workers", [2, 3])
async def test_a_stop_received_by_another_worker_reaches_the_running_one(
    store: CountingStore, tmp_path: Path, workers: int
) -> None:
    """Each worker has its own registry and its own handle on the shared SQLite store (WAL);
    the stop goes to the last worker, the run streams on the first."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    others = [ConversationStore(url) for _ in range(workers - 1)]
    try:
        backend = Pausing()  # says nothing after its first delta until stopped
        handle, message_id = handle_for(store, backend)
        running = RunRegistry(store)
        receivers = [RunRegistry(other) for other in others]
        running.add("task", "owner", handle)
        frames: list[bytes] = []
        async for frame in handle.frames("问题"):
            frames.append(frame)
            if b'"event":"message"' in frame and len(frames) < 50:
                await receivers[-1].stop_anywhere("task", "someone else")  # nothing
                await receivers[-1].stop_anywhere("task", "owner")
        record = store.get_message(message_id)
        assert record is not None and record.status == "stopped"
        assert record.answer and record.answer != "".join(DELTAS)
        assert store.take_stops(["task"]) == []  # the record was taken, the stray one too
    finally:
        for other in others:
            other.close()


async def test_a_stop_for_an_unknown_task_is_harmless(store: CountingStore) -> None:
    runs = RunRegistry(store)
    await runs.stop_anywhere("no-such-task", "owner")
    assert store.take_stops(["no-such-task"]) == [("no-such-task", "owner")]


@contextmanager
def opened(kind: type[CountingStore], tmp_path: Path) -> Iterator[Any]:
    """A ``kind`` store on a fresh SQLite file, closed at the end."""
    store = kind(f"sqlite:///{tmp_path / 'runs-kind.sqlite3'}")
    try:
        yield store
    finally:
        store.close()


class SlowChunks(CountingStore):
    """The real store whose Plan B chunk write waits (another writer holds the database)
    until the test's ``release`` is set; records the order of what happened."""

    release = threading.Event()
    order: ClassVar[list[str]] = []

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        type(self).order.append("write started")
        type(self).release.wait(GUARD_S)
        super().set_chunks(message_id, chunk_metadata)
        type(self).order.append("written")


class Timed(Slow):
    """:class:`Slow`, recording when the model call started; the pending chunk write goes
    on once it has."""

    async def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> AsyncIterator[str]:
        SlowChunks.order.append("model called")
        SlowChunks.release.set()
        async for delta in super().stream(messages, **kw):
            yield delta


@pytest.fixture
def slow_chunks() -> Iterator[type[SlowChunks]]:
    SlowChunks.release = threading.Event()
    SlowChunks.order = []
    yield SlowChunks
    SlowChunks.release.set()


async def test_the_chunk_write_does_not_hold_up_the_model_but_precedes_the_merge_event(
    tmp_path: Path, slow_chunks: type[SlowChunks]
) -> None:
    with opened(slow_chunks, tmp_path) as store:
        handle, message_id = handle_for(store, Timed(0.01))
        async for frame in handle.frames("问题"):
            if b'"event":"node_finished"' in frame and b'"node_type":"code"' in frame:
                slow_chunks.order.append("merge event")
            if b'"event":"message"' in frame and "first text" not in slow_chunks.order:
                slow_chunks.order.append("first text")
        # the model was called while the write was under way (the write waits for the
        # model call: had the model waited for the write, neither would have happened;
        # which of the two starts first is up to the write's thread); Plan B was stored
        # before the merge event was sent, and no text overtook that event
        assert sorted(slow_chunks.order[:2]) == ["model called", "write started"]
        assert slow_chunks.order[2:] == ["written", "merge event", "first text"]
        record = store.get_message(message_id)
        assert record is not None and record.status == "normal"


def _between(events: list[str], first: str, last: str) -> list[str]:
    return events[events.index(first) + 1 : events.index(last)]


class PingGated(CountingStore):
    """The real store whose Plan B chunk write waits until the client has had a ping."""

    pinged = threading.Event()

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        type(self).pinged.wait(GUARD_S)
        super().set_chunks(message_id, chunk_metadata)


async def test_pings_go_on_while_the_chunk_write_is_pending(tmp_path: Path) -> None:
    PingGated.pinged = threading.Event()
    with opened(PingGated, tmp_path) as store:
        handle, _ = handle_for(store, Slow(0.001))
        frames: list[bytes] = []
        try:
            async for frame in handle.frames("问题"):
                frames.append(frame)
                if not frame.startswith(b"data: "):
                    PingGated.pinged.set()
        finally:
            PingGated.pinged.set()
        kinds = []
        for frame in b"".join(frames).split(b"\n\n"):
            if frame.startswith(b"data: "):
                data = json.loads(frame[6:])
                kinds.append(f"{data['event']}:{(data.get('data') or {}).get('node_type')}")
            elif frame:
                kinds.append("ping")
        # the write waits for a ping: pings came while it was pending, before the merge event
        assert "ping" in _between(kinds, "node_started:code", "node_finished:code")


async def test_a_save_pending_when_the_client_goes_away_is_still_made(
    tmp_path: Path, slow_chunks: type[SlowChunks]
) -> None:
    """Blocking mode: the run has ended and its outcome waits for the slow chunk write when
    the client disconnects; the outcome is stored all the same (not left ``running``)."""
    SlowChunks.finished = 0
    with opened(SlowChunks, tmp_path) as store:
        handle, message_id = handle_for(store, Slow(0.001))

        async def leaves_after_the_run_ended() -> None:
            await until(lambda: handle.run.status != "running")

        outcome = await handle.result(leaves_after_the_run_ended)
        assert outcome.abandoned
        SlowChunks.release.set()  # now the chunk write ends; the save follows on its own
        record = None

        def saved() -> bool:
            nonlocal record
            record = store.get_message(message_id)
            return record is not None and record.status != "running"

        await until(saved)
        assert record is not None and record.status == "normal"
        assert record.answer == "".join(DELTAS) and SlowChunks.finished == 1


async def test_a_stuck_verification_does_not_hold_back_the_end(store: CountingStore) -> None:
    clock = ManualClock()
    scheduler = Scheduler(Knobs(verify_timeout_s=30.0), clock)
    release = threading.Event()

    def stuck(answer: str, chunks: list[dict[str, Any]], *question: str) -> dict[str, Any]:
        release.wait(GUARD_S)
        return {"checked": 1}

    handle, message_id = handle_for(store, Slow(0.001), verifier=stuck, scheduler=scheduler)

    async def frames() -> list[bytes]:
        return [f async for f in handle.frames("问题")]

    try:
        reading = asyncio.create_task(frames())
        await until(lambda: clock.sleepers() == 1)  # the verification's time limit runs
        assert not reading.done()
        clock.advance(30.0)
        events = events_of(await asyncio.wait_for(reading, GUARD_S))
    finally:
        release.set()
        scheduler.close()
    assert events[-2:] == ["workflow_finished", "message_end"]
    assert handle.run.verification is None
    record = store.get_message(message_id)
    assert record is not None and record.status == "normal"


class FailingChunks(CountingStore):
    """The real store whose early Plan B write fails (the database was locked too long)."""

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        raise RuntimeError("database is locked")


async def test_the_final_save_stores_the_chunks_when_the_early_write_failed(
    tmp_path: Path,
) -> None:
    with opened(FailingChunks, tmp_path) as store:
        handle, message_id = handle_for(store, Slow(0.001), web=PayloadWeb())
        frames = [f async for f in handle.frames("问题")]
        assert events_of(frames)[-1] == "message_end"
        chunks = handle.run.chunk_metadata
        assert chunks  # the web branch gave the merge node chunks
        record = store.get_message(message_id)
        assert record is not None and record.status == "normal"
        assert record.chunk_metadata == chunks


class ChunkWrites(CountingStore):
    """The real store, recording the ``chunk_metadata`` each outcome write is given;
    its Plan B write fails when ``fail`` is set."""

    given: ClassVar[list[Any]] = []
    fail = False

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        if type(self).fail:
            raise OSError("disk full")
        super().set_chunks(message_id, chunk_metadata)

    def finish_message(self, message_id: str, **kw: Any) -> None:
        type(self).given.append(kw.get("chunk_metadata"))
        super().finish_message(message_id, **kw)


@pytest.mark.parametrize("plan_b_fails", [False, True], ids=["stored", "failed"])
async def test_the_outcome_sends_the_chunks_again_only_when_plan_b_failed(
    tmp_path: Path, plan_b_fails: bool
) -> None:
    ChunkWrites.given, ChunkWrites.fail = [], plan_b_fails
    with opened(ChunkWrites, tmp_path) as store:
        handle, message_id = handle_for(store, Slow(0.001), web=PayloadWeb())
        frames = [frame async for frame in handle.frames("问题")]
        assert events_of(frames)[-1] == "message_end"
        chunks = handle.run.chunk_metadata
        assert chunks  # the web branch's
        assert ChunkWrites.given == [chunks if plan_b_fails else None]
        record = store.get_message(message_id)
        assert record is not None and record.status == "normal"
        assert record.chunk_metadata == chunks  # complete either way
