"""The run handle without HTTP: one run's lifetime and its outcome stored exactly once.

Real conversation store (SQLite) and real chatflow; the model is a slow scripted stand-in
(no LLM API runs here), so a test can stop or abandon a run in the middle of its answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gcite.chatflow import ChatRun, Deps, Turn
from gcite.config import Settings
from gcite.dify.wire import DifyStream, Envelope
from gcite.generate.backends import BackendLifecycle, Usage
from gcite.service.runs import ABANDONED, RunHandle, RunRegistry
from gcite.service.store import ConversationStore
from support.web_standin import PayloadWeb

DELTAS = ["第一句。", "第二句。", "第三句。", "第四句。"]


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
    store: ConversationStore, backend: Slow, verifier: Any = None, web: Any = None
) -> tuple[RunHandle, str]:
    record = store.start_message(user="owner", query="问题", inputs={})
    deps = Deps(
        settings=Settings(), backend=backend, get_store=None, verifier=verifier, web_source=web
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


async def test_a_run_to_the_end_is_stored_once_with_pings(store: CountingStore) -> None:
    handle, message_id = handle_for(store, Slow(0.05))
    frames = [f async for f in handle.frames("问题")]
    events = events_of(frames)
    assert events[0] == "workflow_started" and events[-2:] == ["workflow_finished", "message_end"]
    assert "ping" in events  # 0.05 s between deltas, 0.02 s ping interval
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
    for _ in range(100):
        if CountingStore.finished:
            break
        await asyncio.sleep(0.02)
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
        backend = Slow(0.2)
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
    """The real store whose Plan B chunk write takes 0.5 s (another writer holds the
    database); records when the write ended."""

    written_at: float | None = None

    def set_chunks(self, message_id: str, chunk_metadata: list[dict[str, Any]]) -> None:
        time.sleep(0.5)
        super().set_chunks(message_id, chunk_metadata)
        type(self).written_at = time.monotonic()


class Timed(Slow):
    """:class:`Slow`, recording when the model call started."""

    started_at: float | None = None

    async def stream(self, messages: Sequence[dict[str, str]], **kw: Any) -> AsyncIterator[str]:
        self.started_at = time.monotonic()
        async for delta in super().stream(messages, **kw):
            yield delta


async def test_the_chunk_write_does_not_hold_up_the_model_but_precedes_the_merge_event(
    tmp_path: Path,
) -> None:
    with opened(SlowChunks, tmp_path) as store:
        backend = Timed(0.01)
        handle, message_id = handle_for(store, backend)
        sent: list[tuple[float, bytes]] = []
        async for frame in handle.frames("问题"):
            sent.append((time.monotonic(), frame))
        written = SlowChunks.written_at
        assert written is not None and backend.started_at is not None
        assert backend.started_at < written - 0.3  # the model call did not wait
        merge = next(
            at for at, f in sent if b'"event":"node_finished"' in f and b'"node_type":"code"' in f
        )
        assert merge >= written  # Plan B: stored before the event is sent
        first_text = next(at for at, f in sent if b'"event":"message"' in f)
        assert first_text >= merge  # and nothing after it overtakes it
        record = store.get_message(message_id)
        assert record is not None and record.status == "normal"


def _between(events: list[str], first: str, last: str) -> list[str]:
    return events[events.index(first) + 1 : events.index(last)]


async def test_pings_go_on_while_the_chunk_write_is_pending(tmp_path: Path) -> None:
    with opened(SlowChunks, tmp_path) as store:
        handle, _ = handle_for(store, Slow(0.001))
        frames = [f async for f in handle.frames("问题")]
        kinds = []
        for frame in b"".join(frames).split(b"\n\n"):
            if frame.startswith(b"data: "):
                data = json.loads(frame[6:])
                kinds.append(f"{data['event']}:{(data.get('data') or {}).get('node_type')}")
            elif frame:
                kinds.append("ping")
        # 0.5 s write, 0.02 s ping interval: pings before the merge event, not after it
        assert "ping" in _between(kinds, "node_started:code", "node_finished:code")


async def test_a_save_pending_when_the_client_goes_away_is_still_made(tmp_path: Path) -> None:
    """Blocking mode: the run has ended and its outcome waits for the slow chunk write when
    the client disconnects; the outcome is stored all the same (not left ``running``)."""
    SlowChunks.finished = 0
    with opened(SlowChunks, tmp_path) as store:
        handle, message_id = handle_for(store, Slow(0.001))
        outcome = await handle.result(lambda: asyncio.sleep(0.2))
        assert outcome.abandoned
        for _ in range(50):  # the save finishes on its own, after the 0.5 s chunk write
            record = store.get_message(message_id)
            if record is not None and record.status != "running":
                break
            await asyncio.sleep(0.05)
        assert record is not None and record.status == "normal"
        assert record.answer == "".join(DELTAS) and SlowChunks.finished == 1


async def test_a_stuck_verification_does_not_hold_back_the_end(
    store: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gcite.chatflow.run as run_module

    monkeypatch.setattr(run_module, "VERIFY_TIMEOUT_S", 0.2)
    release = threading.Event()

    def stuck(answer: str, chunks: list[dict[str, Any]]) -> dict[str, Any]:
        release.wait(5)
        return {"checked": 1}

    handle, message_id = handle_for(store, Slow(0.001), verifier=stuck)
    try:
        events = events_of([f async for f in handle.frames("问题")])
    finally:
        release.set()
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
